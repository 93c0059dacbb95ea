"""The local memory host: the memory engine on CPython's sqlite3, serving the HTTP API v1.

It gives the same guarantees as a Durable Object: one SQLite database per chat key, one
request at a time per chat key (many chats in parallel), and writes that survive a
`kill -9` once acknowledged. A bounded number of chat databases stay open, least recently
used closed first, with their WAL checkpointed on close.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import sqlite3
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import httpx
from aiohttp import web
from memory_engine import ChatMemory, Request, Response, execute, parse
from memory_engine.compaction import (
    BACKOFF_BASE_MS,
    BACKOFF_MAX_MS,
    Summarize,
    alarm_needed,
    make_summarizer,
    on_alarm,
)
from memory_engine.http_api import CHAT_KEY, JSON_HEADERS, MAX_BODY_BYTES, VERSION

log = logging.getLogger("memory_worker.host")
access_log = logging.getLogger("memory_worker.access")
T = TypeVar("T")

MAX_OPEN_CHATS = 256
READ_ONLY = {"search", "facts", "summary", "usage", "stats", "settings", "export", "notes", "forget_fact"}
FORGETTING = {"forget_chat", "forget_author"}
GROWING = {"turn", "reply", "import", "forget_author"}  # may call for a compaction
MAX_ALARMS_IN_FLIGHT = 4
SHUTDOWN_TIMEOUT_S = 30.0  # in-flight requests get this long to finish on SIGTERM
SQLITE_MAX_PAGES = 1073741823  # SQLite's default max_page_count: "no limit"


def _dict_row(cursor: sqlite3.Cursor, row: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row)}


class SqliteStorage:
    """`SqlStorage` over one sqlite3 database file (WAL, autocommit outside transactions)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        # 32 cached statements, not sqlite3's 128: prepared FTS5 statements dominate an open
        # chat's memory (0.77 MiB -> 0.45 MiB per open chat, measured; turn latency unchanged).
        self.conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=32
        )
        self.conn.row_factory = _dict_row
        if self.path != ":memory:":
            self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a process crash loses nothing committed; only a power cut can.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one statement; rows as dicts."""
        return self.conn.execute(query, params).fetchall()

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside BEGIN IMMEDIATE ... COMMIT (nested calls join the outer one)."""
        if self.conn.in_transaction:
            return fn()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn()
        except BaseException:
            # SQLite rolls back by itself on some errors (SQLITE_FULL, I/O): a second
            # ROLLBACK would raise and hide the error that says what went wrong.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return result

    def close(self) -> None:
        """Checkpoint the WAL into the database file and close."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # a checkpoint is an optimisation; the WAL stays valid without it
        self.conn.close()


class ChatStore:
    """One database per chat key under DIR, a bounded LRU of open ones, a lock per chat."""

    def __init__(self, data_dir: Path, max_open: int = MAX_OPEN_CHATS):
        self.data_dir = Path(data_dir)
        (self.data_dir / "chats").mkdir(parents=True, exist_ok=True)
        self.max_open = max_open
        self._open: OrderedDict[str, ChatMemory] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._empty: ChatMemory | None = None
        self.pinned: set[str] = set()  # chats with a compaction in flight stay open
        self.retention: int | None = None
        self.max_pages: int | None = None  # see limit_pages

    def limit_pages(self, max_pages: int | None) -> None:
        """Cap every chat database at `max_pages` pages (None: no cap): a disk-full switch for tests and quotas."""
        self.max_pages = max_pages
        for memory in self._open.values():
            self._apply_limit(memory.sql)  # type: ignore[arg-type]

    def _apply_limit(self, storage: SqliteStorage) -> None:
        storage.conn.execute(f"PRAGMA max_page_count = {int(self.max_pages or SQLITE_MAX_PAGES)}")

    def path_for(self, chat_key: str) -> Path:
        """The chat's database file: named by a hash, so no key can escape DIR or collide by case."""
        digest = hashlib.sha256(chat_key.encode("utf-8")).hexdigest()[:40]
        return self.data_dir / "chats" / digest[:2] / f"{digest}.sqlite3"

    def exists(self, chat_key: str) -> bool:
        """True when the chat has a database."""
        return chat_key in self._open or self.path_for(chat_key).exists()

    def open(self, chat_key: str) -> ChatMemory:
        """The chat's memory, opening (and creating) its database when needed."""
        memory = self._open.get(chat_key)
        if memory is not None:
            self._open.move_to_end(chat_key)
            return memory
        path = self.path_for(chat_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        storage = SqliteStorage(path)
        try:
            if self.max_pages is not None:
                self._apply_limit(storage)
            memory = (
                ChatMemory(storage)
                if self.retention is None
                else ChatMemory(storage, retention=self.retention)
            )
            if memory._state("chat_key") is None:
                memory._set_state("chat_key", chat_key)
        except BaseException:
            storage.conn.close()  # a failed open (disk full) must not leak a connection
            raise
        self._open[chat_key] = memory
        for old_key in list(self._open):
            if len(self._open) <= self.max_open:
                break
            if old_key not in self.pinned and old_key != chat_key:
                self._open.pop(old_key).sql.close()  # type: ignore[attr-defined]
        return memory

    def empty(self) -> ChatMemory:
        """A read-only stand-in for a chat that has no database: reads answer empty."""
        if self._empty is None:
            self._empty = ChatMemory(SqliteStorage(":memory:"))
        return self._empty

    def remove(self, chat_key: str) -> None:
        """Close the chat's database and delete its files."""
        memory = self._open.pop(chat_key, None)
        if memory is not None:
            memory.sql.conn.close()  # type: ignore[attr-defined]
        path = self.path_for(chat_key)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)

    @asynccontextmanager
    async def lock(self, chat_key: str) -> AsyncIterator[None]:
        """One request at a time per chat key, in arrival order."""
        lock = self._locks.setdefault(chat_key, asyncio.Lock())
        self._lock_users[chat_key] = self._lock_users.get(chat_key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[chat_key] -= 1
            if not self._lock_users[chat_key]:
                del self._lock_users[chat_key]
                del self._locks[chat_key]

    def close(self) -> None:
        """Checkpoint and close every open database."""
        while self._open:
            _, memory = self._open.popitem()
            memory.sql.close()  # type: ignore[attr-defined]


class AlarmTable:
    """Pending compaction alarms of every chat, persisted so a restart runs them."""

    def __init__(self, data_dir: Path):
        self.storage = SqliteStorage(Path(data_dir) / "alarms.sqlite3")
        self.storage.exec(
            "CREATE TABLE IF NOT EXISTS alarms (chat_key TEXT PRIMARY KEY, due_ms INTEGER NOT NULL)"
        )

    def set(self, chat_key: str, due_ms: int, keep_earlier: bool = False) -> None:
        """Schedule the chat's alarm at `due_ms` (with keep_earlier, never postpone one)."""
        update = "MIN(due_ms, excluded.due_ms)" if keep_earlier else "excluded.due_ms"
        self.storage.exec(
            "INSERT INTO alarms(chat_key, due_ms) VALUES (?, ?) "
            f"ON CONFLICT(chat_key) DO UPDATE SET due_ms = {update}",
            chat_key,
            due_ms,
        )

    def has(self, chat_key: str) -> bool:
        """True when the chat has a pending alarm."""
        return bool(self.storage.exec("SELECT 1 AS x FROM alarms WHERE chat_key = ?", chat_key))

    def delete(self, chat_key: str) -> None:
        """Drop the chat's alarm."""
        self.storage.exec("DELETE FROM alarms WHERE chat_key = ?", chat_key)

    def due(self, now_ms: int, exclude: set[str], limit: int) -> list[str]:
        """Chats whose alarm is due, earliest first."""
        rows = self.storage.exec(
            "SELECT chat_key FROM alarms WHERE due_ms <= ? ORDER BY due_ms LIMIT ?",
            now_ms,
            limit + len(exclude),
        )
        return [r["chat_key"] for r in rows if r["chat_key"] not in exclude][:limit]

    def next_due(self, exclude: set[str]) -> int | None:
        """The earliest due time in ms among chats not in `exclude`."""
        rows = self.storage.exec(
            "SELECT chat_key, due_ms FROM alarms ORDER BY due_ms LIMIT ?", len(exclude) + 1
        )
        return next((r["due_ms"] for r in rows if r["chat_key"] not in exclude), None)

    def count(self) -> int:
        """How many chats have a pending alarm."""
        return int(self.storage.exec("SELECT COUNT(*) AS n FROM alarms")[0]["n"])

    def close(self) -> None:
        """Checkpoint and close."""
        self.storage.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


def host_version() -> str:
    """The installed package version (\"dev\" when running from a bare checkout)."""
    try:
        from importlib.metadata import version

        return version("chatbot")
    except Exception:
        return "dev"


def _storage_error(err: BaseException) -> Response | None:
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


class MemoryHost:
    """Serves the HTTP API v1 over a ChatStore; the same `parse`/`execute` as the Worker.

    Compaction runs like the Durable Object's alarm: a turn that leaves too much
    un-summarized history sets a persisted alarm and returns at once; `run_alarms`
    compacts in the background and retries failures with backoff.
    """

    def __init__(
        self,
        data_dir: Path,
        token: str,
        summarize: Summarize | None = None,
        max_open: int = MAX_OPEN_CHATS,
        retention: int | None = None,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
    ):
        self.backoff = (backoff_base_ms, backoff_max_ms)
        self.store = ChatStore(data_dir, max_open=max_open)
        self.store.retention = retention
        self.token = token
        self.summarize = summarize or make_summarizer(None, None, None, None)
        self.alarms = AlarmTable(data_dir)
        self._wake = asyncio.Event()
        self._running: set[str] = set()
        self._alarm_tasks: set[asyncio.Task] = set()
        self._held: dict[str, int] = {}  # chat -> ms: alarms that could not be rescheduled
        self.data_dir = Path(data_dir)
        self.in_flight = 0
        self.stopping = False  # set by drain: answers then carry Connection: close
        self._idle = asyncio.Event()
        self.started = time.monotonic()
        self.version = host_version()

    async def stop_alarms(self, loop_task: asyncio.Task) -> None:
        """Cancel the alarm loop and every compaction in flight (their alarms stay pending)."""
        loop_task.cancel()
        for task in list(self._alarm_tasks):
            task.cancel()
        await asyncio.gather(loop_task, *self._alarm_tasks, return_exceptions=True)

    async def respond(self, req: Request) -> Response:
        """Answer one request."""
        return (await self._respond(req))[0]

    def health(self, detail: bool = False) -> Response:
        """`GET /health`: 200 `{"ok", "version"}` as the Worker answers (503 when storage is
        broken); `?detail=1` adds the storage state. No chat data, no token needed."""
        storage: dict[str, Any] = {
            "data_dir_writable": False,
            "open_chats": len(self.store._open),
            "pending_alarms": None,
            "compactions_running": len(self._running),
        }
        probe = self.data_dir / f".health-{os.getpid()}"
        try:  # a real write: a full or read-only disk shows up here
            probe.write_bytes(b"ok")
            storage["data_dir_writable"] = True
        except OSError as err:
            storage["error"] = err.strerror or "not writable"
        finally:
            probe.unlink(missing_ok=True)
        try:
            storage["disk_free_bytes"] = shutil.disk_usage(self.data_dir).free
            storage["pending_alarms"] = self.alarms.count()
        except (OSError, sqlite3.Error) as err:
            storage["error"] = str(err)
        ok = storage["data_dir_writable"] and "error" not in storage
        payload: dict[str, Any] = {"ok": ok, "version": VERSION}
        if detail or not ok:
            payload.update(
                host_version=self.version,
                storage=storage,
                in_flight=self.in_flight,
                uptime_s=round(time.monotonic() - self.started, 1),
            )
        return Response(200 if ok else 503, payload)

    async def _respond(self, req: Request) -> tuple[Response, str | None]:
        if req.path == "/health" and req.method.upper() in ("GET", "HEAD"):
            return self.health(detail="detail=1" in req.query.split("&")), None
        op = parse(req, self.token)
        if isinstance(op, Response):
            return op, None
        return await self._execute(op), op.chat_key

    async def _execute(self, op: Any) -> Response:
        if op.name == "compact":  # waits on the summarizer: must not hold up the chat's turns
            if not self.store.exists(op.chat_key):
                return await execute(op, self.store.empty(), self.summarize)
            return await self._pinned(op.chat_key, execute(op, self.store.open(op.chat_key), self.summarize))
        async with self.store.lock(op.chat_key):
            if not self.store.exists(op.chat_key) and (op.name in READ_ONLY or op.name in FORGETTING):
                if op.name in FORGETTING:
                    return Response(200, {"deleted": False})
                return await execute(op, self.store.empty())
            memory = self.store.open(op.chat_key)
            response = await execute(op, memory)
            if op.name == "forget_chat":
                self.store.remove(op.chat_key)
                self.alarms.delete(op.chat_key)
            elif op.name in GROWING and response.status == 200:
                try:
                    if alarm_needed(memory) and not self.alarms.has(op.chat_key):
                        self.alarms.set(op.chat_key, _now_ms())
                        self._wake.set()
                except (sqlite3.Error, OSError) as err:
                    # The write is committed: a compaction that cannot be scheduled now is
                    # scheduled by the chat's next write, so the answer stays 200.
                    log.warning("could not schedule compaction: %s", err)
            return response

    async def _pinned(self, chat_key: str, work):
        self.store.pinned.add(chat_key)
        try:
            return await work
        finally:
            if chat_key not in self._running:
                self.store.pinned.discard(chat_key)

    async def run_alarms(self) -> None:
        """Run due compaction alarms until cancelled (a few chats at a time)."""
        tasks = self._alarm_tasks
        while True:
            self._wake.clear()
            now = _now_ms()
            self._held = {k: until for k, until in self._held.items() if until > now}
            busy = self._running | set(self._held)
            timeout: float | None = None  # all slots busy: a finishing alarm wakes us
            try:
                free = MAX_ALARMS_IN_FLIGHT - len(self._running)
                for chat_key in self.alarms.due(now, busy, free) if free > 0 else []:
                    self._running.add(chat_key)
                    task = asyncio.create_task(self._run_alarm(chat_key))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if len(self._running) < MAX_ALARMS_IN_FLIGHT:
                    nxt = self.alarms.next_due(busy | self._running)
                    timeout = None if nxt is None else max(0.0, (nxt - _now_ms()) / 1000)
            except (sqlite3.Error, OSError) as err:  # the alarm table cannot be read: try again soon
                log.warning("alarm table unavailable: %s", err)
                timeout = 5.0
            if self._held:
                until = (min(self._held.values()) - now) / 1000
                timeout = until if timeout is None else min(timeout, until)
            if timeout == 0:
                continue
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancellation
            # that stops this loop, and the host's shutdown then waits for ever.
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _run_alarm(self, chat_key: str) -> None:
        self.store.pinned.add(chat_key)
        delay: int | None = 60_000
        try:
            if not self.store.exists(chat_key):
                self.alarms.delete(chat_key)
                return
            try:
                memory = self.store.open(chat_key)
                delay = await on_alarm(memory, self.summarize, *self.backoff)
            except Exception:
                log.exception("compaction failed chat=%s", chat_key)
                delay = 60_000
            if not self.store.exists(chat_key) or delay is None:
                self.alarms.delete(chat_key)
            else:
                self.alarms.set(chat_key, _now_ms() + delay)
        except (sqlite3.Error, OSError) as err:
            # The alarm table cannot be written (a full disk): its row stays due, so hold the
            # chat back in memory for the delay, or the loop would run it again at once.
            log.warning("could not reschedule compaction chat=%s: %s", chat_key, err)
            self._held[chat_key] = _now_ms() + (delay or 60_000)
        finally:
            self._running.discard(chat_key)
            self.store.pinned.discard(chat_key)
            self._wake.set()

    def app(self) -> web.Application:
        """The aiohttp application: one catch-all route into `respond`."""
        # Bodies over the API's limit are refused while reading, before they fill memory.
        app = web.Application(client_max_size=MAX_BODY_BYTES + 1)
        # [\s\S]: a percent-encoded line break in the path must reach `parse` too
        app.router.add_route("*", r"/{tail:[\s\S]*}", self._web_handler)
        return app

    async def _web_handler(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        request_id = _request_id(request.headers.get("x-request-id"))
        path, _, query = request.raw_path.partition("?")
        chat_key: str | None = None
        self.in_flight += 1
        try:
            body = await request.read()
            response, chat_key = await self._respond(
                Request(request.method, path, query, dict(request.headers), body)
            )
        except web.HTTPRequestEntityTooLarge:
            response = Response(413, {"error": f"request body over {MAX_BODY_BYTES} bytes"})
        except Exception as err:
            response = _storage_error(err) or Response(500, {"error": "internal error"})
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
        access_log.info(
            "request",
            extra={
                "fields": {
                    "request_id": request_id,
                    "method": request.method[:16],
                    "route": _route(path),
                    "chat": chat_key,
                    "status": response.status,
                    "ms": round((time.perf_counter() - started) * 1000, 2),
                }
            },
        )
        answer = web.Response(
            status=response.status, body=response.body(), headers={**JSON_HEADERS, "x-request-id": request_id}
        )
        if self.stopping:
            answer.force_close()  # the client reconnects, and finds the port closed
        return answer

    async def drain(self, timeout_s: float) -> bool:
        """Wait (up to `timeout_s`) until no request is in flight; True when none is left."""
        self.stopping = True
        while self.in_flight:
            self._idle.clear()
            try:
                async with asyncio.timeout(timeout_s):  # not wait_for: see run_alarms
                    await self._idle.wait()
            except TimeoutError:
                return False
        return True

    def close(self) -> None:
        """Close every chat database."""
        self.store.close()
        self.alarms.close()


class EmbeddedMemoryHost:
    """The local host started inside the current event loop on 127.0.0.1 (a free port).

    `async with EmbeddedMemoryHost(dir) as host:` gives `host.url` and `host.token`.
    """

    def __init__(
        self,
        data_dir: Path,
        token: str | None = None,
        port: int = 0,
        summarizer: Summarize | None = None,
        bind: str = "127.0.0.1",
        summary_base_url: str | None = None,
        summary_model: str | None = None,
        summary_api_key: str | None = None,
        retention: int | None = None,
        summary_timeout_s: float = 60.0,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
    ):
        self.data_dir = Path(data_dir)
        self.shutdown_timeout_s = shutdown_timeout_s
        self.token = token or secrets.token_urlsafe(32)
        self.port = port
        self.bind = bind
        self.summarizer = summarizer
        self.summary = (summary_base_url, summary_model, summary_api_key, summary_timeout_s)
        self.retention = retention
        self.backoff = (backoff_base_ms, backoff_max_ms)
        self.host: MemoryHost | None = None
        self._runner: web.AppRunner | None = None
        self._http: httpx.AsyncClient | None = None
        self._alarms: asyncio.Task | None = None
        self.url = ""

    async def _post(
        self, url: str, headers: dict[str, str], body: bytes, timeout_s: float
    ) -> tuple[int, dict[str, str], bytes]:
        assert self._http is not None
        r = await self._http.post(url, headers=headers, content=body, timeout=timeout_s)
        return r.status_code, dict(r.headers), r.content

    async def __aenter__(self) -> EmbeddedMemoryHost:
        base, model, key, timeout = self.summary
        self._http = httpx.AsyncClient()
        summarize = self.summarizer or make_summarizer(base, model, key, self._post, timeout)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.host = MemoryHost(
            self.data_dir,
            self.token,
            summarize=summarize,
            retention=self.retention,
            backoff_base_ms=self.backoff[0],
            backoff_max_ms=self.backoff[1],
        )
        self._alarms = asyncio.create_task(self.host.run_alarms())
        # The graceful wait is our own `drain`, before cleanup(): aiohttp's shutdown drops the
        # bytes that arrive after it starts, so a request whose body was still on its way would
        # hang until its timeout. What is left for cleanup() is at most such a stray request.
        self._runner = web.AppRunner(self.host.app(), access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{'127.0.0.1' if self.bind in ('0.0.0.0', '::') else self.bind}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            for site in list(self._runner.sites):
                await site.stop()  # no new connections
            if self.host is not None and not await self.host.drain(self.shutdown_timeout_s):
                log.warning(
                    "shutdown: %d requests still in flight after %.0fs",
                    self.host.in_flight,
                    self.shutdown_timeout_s,
                )
            await self._runner.cleanup()
        if self._alarms is not None and self.host is not None:
            await self.host.stop_alarms(self._alarms)
        if self._http is not None:
            await self._http.aclose()
        if self.host is not None:
            self.host.close()


def _request_id(given: str | None) -> str:
    """The caller's x-request-id when it is a short plain token, else a fresh one."""
    if given and len(given) <= 64 and all(c.isalnum() or c in "-_.:" for c in given):
        return given
    return uuid.uuid4().hex[:12]


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
        if len(rest) == 2 and rest[0] == "authors":
            rest = ["authors", "{author_id}"]
        return "/".join(["", "v1", "chats", "{chat}", *rest])[:80]
    return path[:80]


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message and any `fields`."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def _json_logging() -> None:
    """Send the host's logs to stderr as JSON lines (for `chatbot memory serve`)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    for name in ("memory_worker", "aiohttp", "httpx"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
        # httpx logs every summarizer call at INFO: only its warnings are worth a line
        logger.setLevel(logging.WARNING if name == "httpx" else logging.INFO)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_forever(host: str, port: int, data_dir: Path) -> int:
    """`chatbot memory serve`: serve until SIGINT/SIGTERM; returns the exit code."""
    token = os.environ.get("MEMORY_API_TOKEN", "").strip()
    if not token:
        if not _is_loopback(host):
            print("refusing to serve on a non-loopback address without MEMORY_API_TOKEN")
            return 2
        token = secrets.token_urlsafe(32)
        print(f"MEMORY_API_TOKEN not set; generated one for this run: {token}", flush=True)

    _json_logging()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        embedded = EmbeddedMemoryHost(
            data_dir,
            token=token,
            port=port,
            bind=host,
            summary_base_url=os.environ.get("SUMMARY_BASE_URL") or None,
            summary_model=os.environ.get("SUMMARY_MODEL") or None,
            summary_api_key=os.environ.get("SUMMARY_API_KEY") or None,
            retention=int(os.environ["MEMORY_RETENTION_MESSAGES"])
            if os.environ.get("MEMORY_RETENTION_MESSAGES")
            else None,
        )
        async with embedded:
            print(f"memory host serving {data_dir} on http://{host}:{port}", flush=True)
            log.info(
                "serving", extra={"fields": {"data": str(data_dir), "port": port, "version": host_version()}}
            )
            await stop.wait()
            assert embedded.host is not None
            log.info(
                "stopping: finishing in-flight requests",
                extra={"fields": {"in_flight": embedded.host.in_flight}},
            )
        # __aexit__ answered the in-flight requests, stopped the alarms, checkpointed every WAL.
        log.info("stopped cleanly")

    asyncio.run(run())
    return 0
