"""`MemoryHost`: the HTTP API v1 over a `ChatStore`, with the same `parse`/`execute` as the Worker.

It gives the guarantees of a Durable Object: one request at a time per chat key (many chats
in parallel), writes that survive a `kill -9` once acknowledged, compaction in the
background from a persisted alarm. Each request logs one access line (never the token, the
body or the query); `drain` lets the requests in flight finish before a shutdown.

It answers `GET /health` as soon as it listens; `start` then loads the engine in a thread
(the modules of every route: most of a start's time), and API requests that come meanwhile
wait for it instead of finding the port closed (clients after a crash are served sooner).
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import orjson
from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler

from memory_engine.api.http_types import CHAT_KEY, JSON_HEADERS, VERSION, Request, Response
from memory_engine.api.validation import BODY_TOO_LARGE, MAX_BODY_BYTES
from memory_engine.backoff import BACKOFF_BASE_MS, BACKOFF_MAX_MS
from memory_worker.local.alarms import AlarmTable
from memory_worker.local.chats import MAX_OPEN_CHATS, ChatStore, uncancelled
from memory_worker.local.health import HealthAnswer, healthy, host_version, storage_state
from memory_worker.local.offline import OfflineSummarizer
from memory_worker.local.protocol import ServerLog
from memory_worker.local.scheduler import CompactionScheduler, now_ms

if TYPE_CHECKING:
    from memory_engine.api.http import Operation
    from memory_engine.compaction.compact import Summarize

log = logging.getLogger("memory_worker.local")
# What `start` imports before the API is served: the route table (and through it the engine),
# the alarms' compaction and reminders, and the reminders' hand-over.
ENGINE_MODULES = (
    "memory_engine.api.http",
    "memory_engine.compaction.compact",
    "memory_engine.reminders.store",
    "memory_worker.local.handover",
)
access_log = logging.getLogger("memory_worker.access")
TOO_LARGE = Response(413, {"error": BODY_TOO_LARGE})
# The access line's status for a client that left mid-body (nginx's "client closed request");
# no one reads the answer.
CLIENT_GONE = Response(499, {"error": "the client closed the connection before sending its body"})
# An import that said more batches follow, and then sent none for this long (a client that
# crashed or gave up), has its stored rows indexed in the background, so the chat's next
# turn does not pay for it (it would index them first otherwise: nothing is unsearchable).
INDEX_IDLE_S = 30.0
# Threads that run the chats' engine work: as many chats at once (more wait for a thread).
WORKER_THREADS = 8


class MemoryHost:
    """Serves the HTTP API v1 over a ChatStore; the same `parse`/`execute` as the Worker.

    Compaction runs like the Durable Object's alarm: a call that leaves too much
    un-summarized history sets a persisted alarm and returns at once; the `scheduler`
    compacts in the background and retries failures with backoff. `start` loads the engine
    and starts the alarms: until it has, only `/health` is answered (API requests wait).
    """

    def __init__(
        self,
        data_dir: Path,
        token: str,
        max_open: int = MAX_OPEN_CHATS,
        retention: int | None = None,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
        clock: Callable[[], datetime] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.token = token
        self.store = ChatStore(self.data_dir, max_open=max_open, retention=retention, clock=clock)
        self.alarms = AlarmTable(self.data_dir)
        # The engine's offline summarizer is CPU work: the host runs it off the event loop.
        # `start` puts a configured summarizer in its place.
        self.summarize: Summarize = OfflineSummarizer()
        self.scheduler = CompactionScheduler(
            self.store,
            self.alarms,
            self.summarize,
            backoff_base_ms,
            backoff_max_ms,
            clock=(lambda: int(clock().timestamp() * 1000)) if clock else now_ms,
        )
        self.in_flight = 0
        self.stopping = False  # set by drain: answers then carry Connection: close
        self._idle = asyncio.Event()
        self._loaded = asyncio.Event()  # set by `start`, also when loading failed (`_load_error`)
        self._load_error: BaseException | None = None
        self.started = time.monotonic()
        self.index_idle_s = INDEX_IDLE_S
        self._index_timers: dict[str, asyncio.TimerHandle] = {}
        self._index_tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        # The chats' engine work (`_execute`): a few threads, one chat at a time in each.
        self._workers = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="chat")

    @property
    def version(self) -> str:
        """The installed package's version (read once; `start` reads it off the event loop)."""
        return host_version()

    async def start(self, summarizer: Callable[[], Summarize | None] | None = None) -> None:
        """Load the engine in a thread (`/health` keeps answering meanwhile), then serve the API
        and start the alarms. `summarizer` is called once the engine is loaded: the Summarize
        to use (None, or the engine's `offline_summarize`: the offline one, off the event loop)."""
        try:
            await asyncio.to_thread(load_engine)
            from memory_engine.compaction.compact import offline_summarize

            summarize = summarizer() if summarizer is not None else None
            if summarize is not None and summarize is not offline_summarize:
                self.summarize = self.scheduler.summarize = summarize
            self.scheduler.start()
        except BaseException as err:
            self._load_error = err  # the requests waiting for the engine answer 500
            raise
        finally:
            self._loaded.set()

    async def respond(self, req: Request) -> Response:
        """Answer one request."""
        return (await self._respond(req))[0]

    def health(self, detail: bool = False) -> Response:
        """`GET /health`: 200 `{"ok", "version"}` as the Worker answers (503 when storage is
        broken); `?detail=1` adds the storage state. No chat data, no token needed."""
        storage = storage_state(self.data_dir, self.store, self.alarms, self.scheduler.running)
        ok = healthy(storage)
        payload: HealthAnswer = {"ok": ok, "version": VERSION}
        if detail or not ok:
            payload["host_version"] = self.version
            payload["storage"] = storage
            payload["in_flight"] = self.in_flight
            payload["uptime_s"] = round(time.monotonic() - self.started, 1)
        return Response(200 if ok else 503, payload)

    async def _respond(self, req: Request) -> tuple[Response, str | None]:
        if req.path == "/health" and req.method.upper() in ("GET", "HEAD"):
            return self.health(detail="detail=1" in req.query.split("&")), None
        await self._loaded.wait()  # at once when loaded; before, the request waits for `start`
        if self._load_error is not None:
            raise RuntimeError("the memory engine did not load") from self._load_error
        from memory_engine.api.http import parse

        op = parse(req, self.token)
        if isinstance(op, Response):
            return op, None
        answer = await self._execute(op)
        if answer.status == 200 and op.chat_key[:1] != "@":  # the directory of chats hears of a write
            from memory_worker.local.dashboard import after_write

            await after_write(self, op)
        return answer, op.chat_key

    async def _execute(self, op: Operation) -> Response:
        from memory_engine.api.http import execute, execute_now

        effects = op.kind
        chat = op.chat_key
        if effects.summarizes:  # waits on the summarizer: must not hold up the chat's turns
            if not self.store.exists(chat):
                return await execute(op, self.store.empty(), self.summarize)
            async with self.store.lock(chat):
                with self.store.pinned(chat):
                    summarize = self.store.unlocked_while(chat, self.summarize)
                    return await execute(op, self.store.open(chat), summarize)
        async with self.store.lock(chat):
            if not self.store.exists(chat) and (effects.read_only or effects.forgets):
                if effects.forgets:
                    return Response(200, {"deleted": False})
                return await execute(op, self.store.empty())
            memory = self.store.open(chat)
            # The engine's work, off the event loop: one chat's heavy turn (a long text, an
            # import batch) does not hold the other chats' requests. The chat's lock keeps its
            # connection to one thread at a time.
            work = asyncio.get_running_loop().run_in_executor(self._workers, execute_now, op, memory)
            response = await uncancelled(work)
            if response.status != 200:
                return response
            if effects.erases_chat:
                self.store.remove(chat)
                self.scheduler.forget(chat)
                return response
            if effects.forgets:
                # The deleted rows' old pages are still in the WAL until it is checkpointed.
                self.store.checkpoint(chat)
            if effects.grows:
                self.scheduler.after_write(chat, memory)
            if effects.continues_import:
                self._index_later(chat, more=effects.defers_index)
            if effects.sets_alarm:
                self.scheduler.after_reminders(chat, memory)
            return response

    def _index_later(self, chat: str, more: bool) -> None:
        """After an import batch: index what it left pending once the import is idle (see INDEX_IDLE_S)."""
        timer = self._index_timers.pop(chat, None)
        if timer is not None:
            timer.cancel()
        if more:
            loop = asyncio.get_running_loop()
            self._index_timers[chat] = loop.call_later(self.index_idle_s, self._index_idle, chat)

    def _index_idle(self, chat: str) -> None:
        self._index_timers.pop(chat, None)
        task = asyncio.ensure_future(self._build_index(chat))
        self._index_tasks.add(task)
        task.add_done_callback(self._index_tasks.discard)

    async def _build_index(self, chat: str) -> None:
        from memory_engine.index.pending import ensure_indexed

        async with self.store.lock(chat):  # as a request: never inside another's transaction
            if self._closed or not self.store.exists(chat):
                return
            try:
                memory = self.store.open(chat)
                ensure_indexed(memory.sql, memory.retrieval)
            except (sqlite3.Error, OSError) as err:  # the chat's next read indexes them
                log.warning("could not index an idle import chat=%s: %s", chat, err)

    def server(self) -> web.Server:
        """The aiohttp server: every request, whatever its path, into `_web_handler`.

        aiohttp's low-level server, not an Application: the one handler takes every path, so a
        router, middlewares and signals were work on every turn for nothing."""
        return web.Server(
            self._web_handler,
            request_factory=_request_of,
            access_log=None,
            logger=ServerLog(logging.getLogger("aiohttp.server"), {}),
        )

    async def _web_handler(self, request: web.BaseRequest) -> web.Response:
        started = time.perf_counter()
        headers = request.headers  # read as they are: `parse` looks up one of them
        request_id = _request_id(headers.get("x-request-id"))
        path, _, query = request.raw_path.partition("?")
        if path == "/dashboard" or path.startswith("/dashboard/"):  # the owner's pages, same port
            from memory_worker.local.dashboard import serve

            return await serve(self, request, path, query)
        chat_key: str | None = None
        close = False  # the body was not read whole: the connection ends with the answer
        self.in_flight += 1
        response: Response | None
        try:
            if (request.content_length or 0) > MAX_BODY_BYTES:
                # Refused unread, as the Worker does (no "100 Continue" either): reading 32 MiB
                # only to drop them would make the client wait for nothing.
                response, close = TOO_LARGE, True
            else:
                # "100 Continue" to a client that waits for it, as aiohttp's router sends it. An
                # empty Expect names no expectation: served (not a 417), as the router serves it.
                response = await _go_on(request) if headers.get("expect") else None
            if response is None:
                body = await _body(request)
                if body is None:  # the client left mid-body: a disconnect, nothing was written
                    response, close = CLIENT_GONE, True
                    log.info("client disconnected before its body was read request_id=%s", request_id)
                else:
                    req = Request(request.method, path, query, headers, body)
                    response, chat_key = await self._respond(req)
        except web.HTTPRequestEntityTooLarge:  # no length, or chunked: refused while it is read
            response, close = TOO_LARGE, True
        except Exception as err:
            response = storage_error(err) or Response(500, {"error": "internal error"})
            if response.status == 500:
                log.exception("internal error request_id=%s", request_id)
            else:
                log.error("storage error request_id=%s: %s", request_id, err)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()
        if chat_key is None:  # a refusal: still say which chat it was for, when the key is valid
            chat_key = _chat_in(path)
        # One line per request. Never the token, the body or the query (they carry text).
        if access_log.isEnabledFor(logging.INFO):  # its fields cost a few µs to build
            access_log.info(
                "request",
                extra={
                    "fields": {
                        "chat": chat_key,
                        "request_id": request_id,
                        "method": request.method[:16],
                        "route": _route(path),
                        "status": response.status,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                    }
                },
            )
        answer = web.Response(
            status=response.status,
            body=json_body(response),
            headers={**JSON_HEADERS, **response.headers, "x-request-id": request_id},
        )
        if close or self.stopping:  # stopping: the client reconnects, and finds the port closed
            answer.force_close()
        return answer

    async def drain(self, timeout_s: float) -> bool:
        """Wait (up to `timeout_s`) until no request is in flight; True when none is left."""
        self.stopping = True
        while self.in_flight:
            self._idle.clear()
            try:
                async with asyncio.timeout(timeout_s):  # not wait_for: it can swallow a cancel
                    await self._idle.wait()
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Close every chat database and the alarm table."""
        self._closed = True
        for timer in self._index_timers.values():
            timer.cancel()
        self._index_timers.clear()
        for task in self._index_tasks:
            task.cancel()
        self._workers.shutdown(wait=True)  # no thread still on a connection that closes next
        self.store.close()
        self.alarms.close()
        if isinstance(self.summarize, OfflineSummarizer):
            self.summarize.close()


def load_engine() -> None:
    """Import the engine's modules the API and the alarms run (and read the host's version)."""
    for name in ENGINE_MODULES:
        importlib.import_module(name)
    host_version()


def storage_error(err: BaseException) -> Response | None:
    """The answer for a storage failure: 507 when the disk (or the page cap) is full."""
    full = (isinstance(err, sqlite3.Error) and "full" in str(err).lower()) or (
        isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT)
    )
    if full:
        # Not "nothing was recorded": the engine may have committed the message before a later
        # statement of the same request hit the limit. A retry with its message_id is safe.
        return Response(
            507,
            {
                "error": "storage is full: retry later with the same message_id "
                "(a repeat is never stored twice)"
            },
        )
    # Locked, I/O, read-only: the storage's trouble. A constraint error is a bug: a 500.
    if isinstance(err, (sqlite3.OperationalError, OSError)):
        return Response(
            503, {"error": "storage is unavailable right now: retry later with the same message_id"}
        )
    return None


def json_body(response: Response) -> bytes:
    """The answer as UTF-8 JSON, by orjson: a turn's 9 KB answer took the stdlib's encoder 0.28 ms
    of the request's CPU, orjson 0.05 ms. What orjson refuses (an int past 64 bits) is encoded
    as the Worker does (`Response.body`). Keys that are not strings (json.dumps writes them as
    text) take a second, slower pass: that option cost a turn's answer 6 of its 15 µs."""
    try:
        return orjson.dumps(response.payload)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        pass
    try:
        return orjson.dumps(response.payload, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return response.body()


async def _body(request: web.BaseRequest) -> bytes | None:
    """The request's body; None when the client went away before sending all of it.

    aiohttp says so with a ConnectionResetError: an OSError, which `storage_error` would
    take for the disk's trouble (a 503 logged as an error)."""
    try:
        return await request.read()
    except ConnectionResetError:
        return None


def _request_of(
    message: RawRequestMessage,
    payload: StreamReader,
    protocol: RequestHandler,
    writer: AbstractStreamWriter,
    task: asyncio.Task[None],
) -> web.BaseRequest:
    """aiohttp's request, with the API's body limit: a body over it is refused while it is read,
    before it fills memory (413)."""
    return web.BaseRequest(
        message, payload, protocol, writer, task, task.get_loop(), client_max_size=MAX_BODY_BYTES + 1
    )


async def _go_on(request: web.BaseRequest) -> Response | None:
    """`Expect: 100-continue` (curl sends it before a large body): "100 Continue", and None to
    read the body; another expectation is refused (417)."""
    expect = request.headers.get("expect", "")
    if request.version != HttpVersion11:
        return None
    if expect.lower() != "100-continue":
        return Response(417, {"error": f"unknown Expect: {expect[:64]}"})
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # the answer's own size starts after it
    return None


def _request_id(given: str | None) -> str:
    """The caller's x-request-id when it is a short plain token, else a fresh one."""
    if given and len(given) <= 64 and all(c.isalnum() or c in "-_.:" for c in given):
        return given
    return os.urandom(6).hex()  # 12 hex digits, as uuid4().hex[:12] (a third of its cost)


def _chat_in(path: str) -> str | None:
    """The valid chat key a `/v1/chats/{chat}/...` path names, else None."""
    parts = path.split("/")
    if len(parts) < 4 or parts[:3] != ["", "v1", "chats"]:
        return None
    try:
        key = unquote(parts[3], errors="strict")
    except UnicodeDecodeError:
        return None
    return key if CHAT_KEY.match(key) else None


def _route(path: str) -> str:
    """The route's shape for the log: `/v1/chats/{chat}/turn` (the chat is logged apart)."""
    parts = path.split("/")
    if len(parts) >= 4 and parts[:3] == ["", "v1", "chats"]:
        rest = parts[4:]
        if len(rest) >= 2:  # an id in the path (an author, a fact) is not the route's shape
            rest = [rest[0], "{author_id}" if rest[0] == "authors" else "{id}"]
        return "/".join(["", "v1", "chats", "{chat}", *rest])[:80]
    return path[:80]
