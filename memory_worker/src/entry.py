"""The Cloudflare Python Worker: the `Default` entrypoint and the `ChatMemorySQLite` Durable Object.

Both are thin shells over `memory_engine`, which holds every rule:

- `Default.fetch` answers `GET /health` and every refusal (401, 404, 405, 400, 413) with the
  shared `parse`, and forwards a valid call, with its body, to the chat's own Durable Object
  (`env.CHAT_MEMORY`, one per chat key) over RPC (`serve(method, url, authorization, body)`,
  as Cloudflare advises): plain values cross, no second Request is built. `/dashboard` goes
  to `dashboard_shell.py`.
- `ChatMemorySQLite.serve` parses again (the object trusts no caller) and runs `execute` on
  its `ChatMemory` over `DurableObjectSql` (`ctx.storage.sql` / `transactionSync` as the
  engine's `SqlStorage`). Compaction and reminders run from the object's one alarm, set by
  the engine's rule (`reminders.store.next_wake`); a reminder write whose alarm could not be
  set is answered, and the alarm is set again on the next request and on a timer.

Only this file imports `workers` (and `pyodide`); tests run it under `tests/fakes/workers/`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from http import HTTPMethod
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from workers import DurableObject, Request, WorkerEntrypoint, fetch, python_to_rpc

from memory_engine import ChatMemory, execute, parse
from memory_engine import Request as ApiRequest
from memory_engine import Response as ApiResponse
from memory_engine.api.http import JSON_HEADERS, MAX_BODY_BYTES
from memory_engine.api.http_types import request_of
from memory_engine.api.routes import Kind
from memory_engine.api.validation import BODY_TOO_LARGE
from memory_engine.compaction.compact import Summarize, alarm_needed, backing_off, make_summarizer, on_alarm
from memory_engine.reminders import store as reminders
from memory_engine.settings import retention_setting

try:  # JS null as Pyodide may hand it back (rows, alarms); None where the runtime maps it
    from js import Array as _JsArray
    from js import Response as _JsResponse
    from pyodide.ffi import create_proxy, to_js
    from pyodide.ffi import jsnull as _JSNULL
except ImportError:  # pragma: no cover - only outside a Worker without the test fake
    _JSNULL = None
    _JsArray = _JsResponse = None

    def to_js(obj: Any) -> Any:
        """Outside Pyodide a value needs no conversion (nor a callable a proxy)."""
        return obj

    create_proxy = to_js


log = logging.getLogger("memory_worker.entry")
T = TypeVar("T")

UNEXPECTED_FAILURE_RETRY_MS = 60_000  # a compaction failing unplanned: tried again, never no alarm
SUMMARY_TIMEOUT_S = 60.0
DISPATCH_OFFER_URL = "https://dispatch/v1/dispatch/offer"  # where due reminders are offered
HANDOVER_RETRY_MS = 5_000  # due reminders the dispatch object did not take: tried again soon
# A reminders' alarm not set: tried again after these pauses, and on the object's next request.
ALARM_RETRY_DELAYS_S = (1.0, 5.0, 30.0, 120.0)


def _is_null(value: Any) -> bool:
    return value is None or value is _JSNULL


def now_ms() -> int:
    """The object's clock in ms (reminders' due times are on it; tests replace it)."""
    return int(time.time() * 1000)


def _var(env: Any, name: str) -> str | None:
    """A var or secret of the Worker, None when unset or empty."""
    value = getattr(env, name, None)
    if _is_null(value) or value == "":
        return None
    return str(value)


def _to_sql(value: Any) -> Any:
    # Durable Object SQL binds strings, numbers, null and ArrayBuffers only: a bool is an
    # integer to SQLite (as in sqlite3), None must arrive as null, not `undefined`.
    if isinstance(value, bool):
        return int(value)
    if value is None:
        return _JSNULL
    if isinstance(value, (bytes, bytearray, memoryview)):
        return to_js(value)  # a Uint8Array; a Python bytes would cross as a proxy
    return value


def _plain(values: list[Any]) -> list[Any]:
    # to_py() leaves JS null as `jsnull`; the engine wants None (a scan in C first: most
    # rows hold no null at all).
    return [None if v is _JSNULL else v for v in values] if _JSNULL in values else values


def _plain_dict(row: dict[str, Any]) -> dict[str, Any]:
    return {k: None if v is _JSNULL else v for k, v in row.items()} if _JSNULL in row.values() else row


def _erased(query: str, *params: Any) -> Any:
    raise RuntimeError("the chat was erased: this ChatMemory is closed")


class DurableObjectSql:
    """The engine's `SqlStorage` over a Durable Object's `ctx.storage`.

    It talks to the JS storage object itself: the SDK's wrapper of `ctx.storage` (1.9)
    sends every argument through `python_to_rpc` and copies every result through
    `python_from_rpc` (a deep walk per row and value), which on Pyodide cost more CPU
    than the SQL itself. Here a row array crosses with one `to_py()`.
    """

    def __init__(self, storage: Any):
        self._storage = python_to_rpc(storage)  # the JS object under the SDK's wrapper
        self._sql = self._storage.sql
        # The JS functions called per statement, looked up once (a lookup crosses into JS).
        self._exec = self._sql.exec
        self._array_from = _JsArray.from_
        self._depth = 0
        self._fn: Callable[[], Any] | None = None
        self._result: Any = None  # what the last transaction's function returned, or raised
        self._error: BaseException | None = None
        # One JS proxy of one callable for every transactionSync, made once: a proxy per
        # call would be one more object for the JS garbage collector to release.
        self._run_fn = create_proxy(self._run)

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one statement with `ctx.storage.sql.exec`; every row as a plain dict."""
        cursor = self._exec(query, *map(_to_sql, params))
        return [_plain_dict(row) for row in cursor.toArray().to_py()]

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement; every row as a tuple in column order (`cursor.raw()`)."""
        cursor = self._exec(query, *map(_to_sql, params))
        # workerd's raw() is a bare iterator: Array.from drains it in JS, one crossing.
        return [tuple(_plain(row)) for row in self._array_from(cursor.raw()).to_py()]

    def close(self) -> None:
        """Refuse every later statement: the object's storage was erased under this adapter."""
        self._exec = _erased

    def _run(self) -> None:
        fn, self._fn = self._fn, None
        assert fn is not None  # set by the caller just before transactionSync runs this
        self._depth += 1
        try:
            self._result = fn()
        except BaseException as err:
            self._error = err
            raise  # so the runtime rolls the transaction back
        finally:
            self._depth -= 1
        # Returns None: the result need not cross JS and back.

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside `ctx.storage.transactionSync` (a nested call joins the outer one)."""
        if self._depth:
            return fn()
        self._fn, self._error = fn, None
        try:
            self._storage.transactionSync(self._run_fn)
        except BaseException:
            error, self._error = self._error, None
            if error is not None:
                raise error from None  # the runtime re-raises it as a JS error; the engine wants its own
            raise
        finally:
            self._fn = None
        result, self._result = self._result, None
        return cast(T, result)


async def post_with_fetch(
    url: str, headers: dict[str, str], body: bytes, timeout_s: float
) -> tuple[int, dict[str, str], bytes]:
    """POST through the runtime's `fetch`: (status, lower-case headers, body)."""

    async def go() -> tuple[int, dict[str, str], bytes]:
        resp = await fetch(url, method=HTTPMethod.POST, headers=headers, body=body.decode("utf-8"))
        data = await resp.bytes()
        return resp.status, {k.lower(): v for k, v in resp.headers.items()}, data

    # `fetch` has no timeout of its own in Workers. asyncio.timeout rather than wait_for,
    # which on CPython 3.11 (the tests) can swallow a cancellation.
    async with asyncio.timeout(timeout_s):
        return await go()


# Requests and answers cross as the JS objects themselves: the SDK's Request and Response
# wrappers (headers as an `email` message, signature checks, a second wrapper around a
# stub's answer) cost about as much CPU on Pyodide as the engine's SQL of a turn.
async def _api_request(request: Any) -> ApiRequest | ApiResponse:
    """The engine's view of a JS Request: method, path, query, the Authorization header, body.

    The engine reads no other header (`api.http.authorized`); fetching only that one saves
    walking every header across the boundary. A body over the API's limit is refused (413)
    before it is read whole, as the local host refuses it.
    """
    authorization = request.headers.get("authorization")
    # No body (a GET): nothing to await, and an await costs Pyodide's event loop two turns.
    body = b"" if _is_null(request.body) else await _read_body(request)
    if body is None:
        return ApiResponse(413, {"error": BODY_TOO_LARGE})
    auth = None if _is_null(authorization) else str(authorization)
    return request_of(str(request.method), str(request.url), auth, body)


async def _read_body(request: Any) -> bytes | None:
    """The body's bytes, or None when it is over MAX_BODY_BYTES.

    `arrayBuffer()` would hold a body of any size in memory (Pyodide's heap, then a copy)
    before the length could be checked. So a declared Content-Length over the limit is
    refused unread, and the stream is read chunk by chunk and dropped once it passes the
    limit (no Content-Length, or one that lies). The declared length frames the body, as in
    HTTP: once that much has arrived, no further read waits for the stream's end.
    With a declared length the chunks are copied into one buffer of that size (the body is
    held about once at the peak: an object has 128 MB); without one they are joined.
    """
    declared = "" if _is_null(length := request.headers.get("content-length")) else str(length)
    expected = int(declared) if declared.isascii() and declared.isdigit() else -1  # -1: unknown
    if expected > MAX_BODY_BYTES:
        return None
    reader = request.body.getReader()
    buffer = bytearray(expected) if expected > 0 else None
    chunks: list[bytes] = []
    size = 0
    while size != expected:
        step = await reader.read()
        if step.done:
            break
        chunk = step.value
        n = int(chunk.byteLength)  # before it is copied into Python's heap: it may be huge
        if size + n > MAX_BODY_BYTES:
            await reader.cancel()
            return None
        if buffer is None:
            chunks.append(chunk.to_bytes())
        elif size + n <= len(buffer):
            chunk.assign_to(memoryview(buffer)[size : size + n])  # JS to the buffer, no bytes between
        else:  # longer than it said: kept whole (the limit still holds)
            del buffer[size:]
            buffer += chunk.to_bytes()
        size += n
    if buffer is None:
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    del buffer[size:]  # shorter than it said: what arrived
    # The engine only measures and decodes the body: a bytes copy would hold it twice again.
    return cast(bytes, buffer)


# The headers of every answer as a JS array of pairs, converted on first use: a plain value,
# not an object of one request (a Response copies it).
_JSON_HEADERS: list[Any] = []


def _response(answer: ApiResponse) -> Any:
    """The engine's answer as a JS Response (its JSON body copied once, as bytes)."""
    if answer.headers:  # rare (a 405's Allow): converted for this answer
        headers = to_js([list(item) for item in {**JSON_HEADERS, **answer.headers}.items()])
        return _JsResponse.new(to_js(answer.body()), status=answer.status, headers=headers)
    if not _JSON_HEADERS:
        _JSON_HEADERS.append(to_js([list(item) for item in JSON_HEADERS.items()]))
    return _JsResponse.new(to_js(answer.body()), status=answer.status, headers=_JSON_HEADERS[0])


# What the dashboard's shell (dashboard_shell.py) uses of this module.
var, is_null, read_body, json_response, JsResponse = _var, _is_null, _read_body, _response, _JsResponse


class ChatMemorySQLite(DurableObject):
    """One chat's memory: its own SQLite database, its compaction alarm."""

    def __init__(self, ctx: Any, env: Any):
        super().__init__(ctx, env)
        self._memory: ChatMemory | None = None
        self._summarize: Summarize | None = None
        self._alarm_running = False  # calls may run while the alarm awaits its summarizer
        # A reminder write whose alarm could not be set: the reminder is committed (a retry
        # of add_reminder would add it twice), so the alarm is set again until it holds.
        # Unsure at first too: an object evicted before its retry held forgot the failure.
        self._alarm_unsure = True
        self._alarm_retry: asyncio.Task[None] | None = None

    def memory(self) -> ChatMemory:
        """The chat's ChatMemory, built (and its schema migrated) on first use."""
        if self._memory is None:
            retention, notes = retention_setting(lambda name: _var(self.env, name))
            for note in notes:
                log.warning(note)
            sql = DurableObjectSql(self.ctx.storage)
            self._memory = ChatMemory(sql, retention=retention)
        return self._memory

    def summarizer(self) -> Summarize:
        """The configured summarizer (the offline one without SUMMARY_BASE_URL)."""
        if self._summarize is None:
            env = self.env
            self._summarize = make_summarizer(
                _var(env, "SUMMARY_BASE_URL"),
                _var(env, "SUMMARY_MODEL"),
                _var(env, "SUMMARY_API_KEY"),
                post_with_fetch,
                SUMMARY_TIMEOUT_S,
            )
        return self._summarize

    async def serve(self, method: str, url: str, authorization: str | None, body: Any = None) -> Any:
        """Answer one API call sent over RPC by the Worker or another object: a JS Response.

        `body` arrives as workerd's `python_from_rpc` gives a Uint8Array (a memoryview) or
        None; it is passed on as it is: the engine only measures and decodes it, and a bytes
        copy would hold an import's body (up to 32 MB) once more.
        """
        auth = None if authorization is None else str(authorization)
        api = request_of(str(method), str(url), auth, b"" if body is None else cast(bytes, body))
        op = parse(api, _var(self.env, "MEMORY_API_TOKEN") or "")
        if isinstance(op, ApiResponse):
            return _response(op)
        memory = self.memory()
        if self._alarm_unsure:
            await self._reminders_alarm(memory, "a later request")
        if op.kind.sets_alarm:  # its alarm hands reminders over under this key
            memory.record_chat_key(op.chat_key)
        try:
            answer = await execute(op, memory, self.summarizer())
        except Exception:
            log.exception("internal error chat=%s op=%s", op.chat_key, op.name)
            return _response(ApiResponse(500, {"error": "internal error"}))
        if answer.status == 200:
            await self._after(op.name, op.kind, memory)
            import dashboard_shell  # the directory of chats hears of the write

            await dashboard_shell.report(self.env, op.chat_key, op.name, op.args, self._memory)
        return _response(answer)

    async def _after(self, name: str, effects: Kind, memory: ChatMemory) -> None:
        # Scheduling must never fail the call that was already recorded. The reminders' alarm
        # is set on its own: an error while scheduling compaction must not leave a reminder
        # without its alarm (it would wait for some later write).
        try:
            await self._after_write(effects, memory)
        except Exception:
            log.exception("could not schedule compaction after %s", name)
        if effects.sets_alarm:
            await self._reminders_alarm(memory, name)

    async def _reminders_alarm(self, memory: ChatMemory, after: str) -> bool:
        """Set the alarm by the next reminder; on failure mark it unsure and retry soon."""
        try:
            await self._alarm_by(reminders.next_alarm_ms(memory.sql))
        except Exception:
            log.exception("could not set the reminders' alarm after %s", after)
            self._alarm_unsure = True
            if self._alarm_retry is None or self._alarm_retry.done():
                self._alarm_retry = asyncio.create_task(self._retry_reminders_alarm())
            return False
        self._alarm_unsure = False
        return True

    async def _retry_reminders_alarm(self) -> None:
        # Nothing else may touch a quiet chat for days. The runtime may evict the object
        # before a pause ends; its next instance checks the alarm on its first request.
        for delay in ALARM_RETRY_DELAYS_S:
            await asyncio.sleep(delay)
            if not self._alarm_unsure or self._memory is None:
                return  # set meanwhile (a request, the alarm's own end), or the chat erased
            if await self._reminders_alarm(self._memory, "a retry"):
                return

    async def _after_write(self, effects: Kind, memory: ChatMemory) -> None:
        """Free an erased chat's storage, or make the alarm ring for a compaction now due."""
        storage = self.ctx.storage
        if effects.erases_chat:
            # The rows are gone; free the object's storage entirely, as the local host
            # deletes the chat's database file. The schema is rebuilt on next use.
            await storage.deleteAlarm()
            await storage.deleteAll()
            # Closed, as the local host closes the deleted file: a compaction awaiting its
            # summarizer holds this ChatMemory and must not commit the erased chat's
            # summary into the one that follows.
            if isinstance(memory.sql, DurableObjectSql):
                memory.sql.close()
            self._memory = None
        elif effects.grows and not self._alarm_running and alarm_needed(memory):
            # While the alarm runs, a write has nothing to add: when it ends it sets the
            # next one from what is left then (`on_alarm`).
            await self._alarm_by(now_ms(), compaction_of=memory)

    async def _alarm_by(self, at: int | None, compaction_of: ChatMemory | None = None) -> None:
        """Make the object's one alarm ring no later than `at` (compaction and reminders share it);
        for a compaction (`compaction_of`), not while it waits out a failed one's backoff."""
        if at is None:
            return
        current = await self.ctx.storage.getAlarm()
        current = None if _is_null(current) else int(current)
        if reminders.moves_alarm(current, at, compaction_of is not None and backing_off(compaction_of)):
            await self.ctx.storage.setAlarm(at)

    async def alarm(self, alarm_info: Any = None) -> None:
        """Hand due reminders to the dispatch object, run a due compaction; set the next alarm."""
        self._alarm_running = True
        try:
            await self._alarm()
        finally:
            self._alarm_running = False

    async def _alarm(self) -> None:
        memory = self.memory()
        retry_at = None
        try:
            await self._hand_over(memory)
        except Exception:
            log.exception("reminder hand-over failed")
            retry_at = now_ms() + HANDOVER_RETRY_MS
        try:
            # The object's clock: a backoff's end is stored on it, as reminders' due times are.
            delay = await on_alarm(memory, self.summarizer(), now_ms=now_ms)
        except Exception:
            log.exception("compaction failed unexpectedly")
            delay = UNEXPECTED_FAILURE_RETRY_MS
        current = self._memory  # None when the chat was erased meanwhile (and not written again)
        # Read after the compaction's await: a reminder added or cancelled meanwhile left the
        # alarm to this run. Nothing between here and the set awaits, so no call slips in.
        at = None if current is None else reminders.next_wake(current.sql, now_ms(), delay, retry_at)
        if at is None:
            await self.ctx.storage.deleteAlarm()  # one a reminder write set meanwhile, now covered
        else:
            await self.ctx.storage.setAlarm(at)
        self._alarm_unsure = False  # set by next_wake, from every reminder as it is now

    async def _hand_over(self, memory: ChatMemory) -> None:
        """Queue the due reminders in the dispatch object (idempotent by key), then mark them handed."""
        chat_key = memory.state("chat_key") or ""
        items = reminders.due_items(memory.sql, chat_key, now_ms()) if chat_key else []
        if items:
            token = _var(self.env, "MEMORY_API_TOKEN") or ""
            body = reminders.offer_body(items)
            resp = await call_object(
                self.env, reminders.DISPATCH_KEY, HTTPMethod.POST, DISPATCH_OFFER_URL, f"Bearer {token}", body
            )
            if int(resp.status) != 200:
                raise RuntimeError(f"the dispatch object answered {resp.status}")
            memory.sql.transaction(lambda: reminders.mark_handed(memory.sql, items))


async def call_object(
    env: Any, name: str, method: str, url: str, authorization: str | None, body: bytes
) -> Any:
    """Send one API call to the object named `name` over RPC (its `serve`); its JS Response.

    Through the JS stub under the SDK's wrapper, the arguments converted as the wrapper
    would (`python_to_rpc`: None as null, the body as a Uint8Array): the answer is passed on
    as it is, where the wrapper would copy it into the SDK's Response.
    """
    namespace = env.CHAT_MEMORY
    stub = python_to_rpc(namespace.get(namespace.idFromName(name)))
    auth = _JSNULL if authorization is None else authorization
    return await stub.serve(str(method), url, auth, to_js(body) if body else _JSNULL)


class Default(WorkerEntrypoint):
    """The Worker: health, refusals, and forwarding to the chat's Durable Object."""

    async def fetch(self, request: Any) -> Any:
        """Answer `/health` and refusals here; send valid calls to the chat's object (a JS Response)."""
        if isinstance(request, Request):  # the runtime may hand over the SDK's wrapper of the JS Request
            request = request.js_object
        if urlsplit(request.url).path.startswith("/dashboard"):  # the owner's pages, same origin
            import dashboard_shell

            return await dashboard_shell.serve(self.env, request)
        api = await _api_request(request)
        if isinstance(api, ApiResponse):  # a body over the limit, refused before it was read whole
            return _response(api)
        op = parse(api, _var(self.env, "MEMORY_API_TOKEN") or "")
        if isinstance(op, ApiResponse):
            return _response(op)
        # The body already read goes along: a clone() of the request before reading it
        # would tee its stream, which cost more than the copy.
        return await call_object(
            self.env, op.chat_key, api.method, request.url, api.headers.get("authorization"), api.body
        )


# The runtime calls a handler "relaxed" (extra arguments dropped): pyodide's relaxed_call reads
# inspect.signature of the bound method, cached by that method, and each request's `fetch` is
# bound to a new `Default`: worked out from the code object on every request (about half of
# that call's CPU). A signature set on the function is taken as it is.
setattr(Default.fetch, "__signature__", inspect.signature(Default.fetch))  # noqa: B010 - mypy: a function attribute
