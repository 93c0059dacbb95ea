"""The workerd side: Durable Object storage, namespaces, alarms, and a harness to run a Worker.

Not part of the SDK: these are the JS objects the SDK wraps, with the behaviour of
Cloudflare's runtime that the memory worker depends on.

- `ctx.storage.sql` is `sql.SqlStorage` (its cursor, authorizer and bindings are there).
- `DurableObjectStorage.transactionSync(fn)`: all of fn's writes or none (nests).
- `deleteAll()` empties the whole database (not the alarm).
- Alarms: `setAlarm(ms | Date)`, `getAlarm()`, `deleteAlarm()` return promises; one
  alarm per object, persisted with the object (it survives `restart()`).
  `FakeWorkerd.run_alarms()` fires due ones (one fired before its time moves the Worker's
  clock, `FakeWorkerd.now_ms`, on to it): the alarm is cleared, `alarm(alarmInfo)` runs,
  and if it raises the runtime retries with exponential backoff (2 s, 4 s, ..., 6 retries),
  as Cloudflare does.
- `DurableObjectNamespace`: `idFromName`, `idFromString`, `newUniqueId`, `get`,
  `getByName`; a stub's `fetch` delivers a copy of the request to the object's `fetch`,
  any other name on it calls that RPC method of the object (its arguments through
  `python_from_rpc`, its result through `python_to_rpc`); one instance per id, created
  on first use, its constructor given `(ctx, env)`.
- `FakeWorkerd`: builds `env` (the namespace, vars, secrets), calls the entry's
  `Default.fetch` per request (uncaught errors answer 500 and are kept in `errors`).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import secrets
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.workers._js import (
    JsException,
    JsPromise,
    JsProxy,
    JsReadableStream,
    JsRequest,
    JsResponse,
    js_object,
    jsnull,
)
from tests.fakes.workers.rpc import python_from_rpc, python_to_rpc
from tests.fakes.workers.sql import SqlStorage

ALARM_RETRIES = 6
ALARM_FIRST_BACKOFF_MS = 2000
# The names workerd calls as event handlers, never as RPC methods.
HANDLERS = frozenset({"fetch", "alarm", "webSocketMessage", "webSocketClose", "webSocketError"})


def now_ms() -> int:
    """Date.now()."""
    return int(time.time() * 1000)


class DurableObjectStorage(JsProxy):
    """`ctx.storage`: SQL, transactionSync, alarms."""

    def __init__(self, path: Path, alarms: dict[str, int], key: str):
        super().__init__("DurableObjectStorage")
        object.__setattr__(self, "_sql", SqlStorage(path))
        object.__setattr__(self, "_depth", 0)
        object.__setattr__(self, "_alarms", alarms)
        object.__setattr__(self, "_key", key)

    @property
    def sql(self) -> SqlStorage:
        """The SQL API."""
        return self._sql

    def transactionSync(self, fn: Callable[[], Any]) -> Any:
        """Run fn synchronously; all of its writes commit together, or none if it throws."""
        depth = self._depth
        name = f"_cf_txn_{depth}"
        self._sql._run_internal(f"SAVEPOINT {name}")
        object.__setattr__(self, "_depth", depth + 1)
        try:
            result = fn()
        except BaseException:
            self._sql._run_internal(f"ROLLBACK TO {name}")
            self._sql._run_internal(f"RELEASE {name}")
            # A Python error raised in fn crosses into JS as a PythonError, and Pyodide
            # (314, checked under tests/hosts/test_pyodide.py's runtime) hands the ORIGINAL
            # exception back to the Python caller of transactionSync; a JS error stays one.
            raise
        finally:
            object.__setattr__(self, "_depth", depth)
        self._sql._run_internal(f"RELEASE {name}")
        return result

    def getAlarm(self, options: Any = None) -> JsPromise:
        """Promise of the scheduled time (ms) or null."""
        return JsPromise(self._alarms.get(self._key, jsnull))

    def setAlarm(self, scheduled_time: Any, options: Any = None) -> JsPromise:
        """Schedule (or move) this object's one alarm."""
        if hasattr(scheduled_time, "getTime"):
            scheduled_time = scheduled_time.getTime()
        if isinstance(scheduled_time, bool) or not isinstance(scheduled_time, (int, float)):
            return JsPromise(error=JsException("TypeError", "setAlarm() expects a number or Date"))
        self._alarms[self._key] = int(scheduled_time)
        return JsPromise(jsnull)

    def deleteAlarm(self, options: Any = None) -> JsPromise:
        """Cancel the alarm."""
        self._alarms.pop(self._key, None)
        return JsPromise(jsnull)

    def deleteAll(self, options: Any = None) -> JsPromise:
        """Delete every table and key (the alarm stays: Cloudflare keeps it too)."""
        if self._depth:
            return JsPromise(error=JsException("Error", "deleteAll() cannot run inside a transaction"))
        self._sql._wipe()
        return JsPromise(jsnull)


class DurableObjectId(JsProxy):
    """An object id: 64 hex digits; `name` when made by `idFromName`."""

    def __init__(self, hex_id: str, name: Any = jsnull):
        super().__init__("DurableObjectId", {"name": name})
        object.__setattr__(self, "_hex", hex_id)

    def toString(self) -> str:
        """The id as hex."""
        return self._hex

    def equals(self, other: DurableObjectId) -> bool:
        """Same object?"""
        return self._hex == other._hex


class DurableObjectState(JsProxy):
    """`ctx` of a Durable Object."""

    def __init__(self, obj_id: DurableObjectId, storage: DurableObjectStorage, on_abort: Callable):
        super().__init__("DurableObjectState", {"id": obj_id, "storage": storage})
        object.__setattr__(self, "_on_abort", on_abort)

    def waitUntil(self, promise: Any) -> None:
        """Accepted and ignored, as in Durable Objects."""

    async def blockConcurrencyWhile(self, callback: Callable) -> Any:
        """Run callback (the fake delivers nothing else meanwhile by construction of the test)."""
        return await callback()

    def abort(self, reason: Any = None) -> None:
        """Drop the instance: the next request builds a new one."""
        self._on_abort()


class ExecutionContext(JsProxy):
    """`ctx` of a Worker entrypoint."""

    def __init__(self) -> None:
        super().__init__("ExecutionContext")
        object.__setattr__(self, "tasks", [])

    def waitUntil(self, promise: Any) -> None:
        """Keep the task so the harness can await it."""
        self.tasks.append(promise)

    def passThroughOnException(self) -> None:
        """No origin to fall back to here."""


class DurableObjectStub(JsProxy):
    """A stub: `fetch(input, init)` reaches the object; any other name is an RPC method of it."""

    def __init__(self, namespace: DurableObjectNamespace, obj_id: DurableObjectId):
        super().__init__("DurableObject", {"id": obj_id, "name": obj_id.name})
        object.__setattr__(self, "_ns", namespace)
        object.__setattr__(self, "_obj_id", obj_id)

    def fetch(self, input: Any, init: Any = None, **options: Any) -> Any:
        """Deliver a request to the object's fetch; a promise of a JS Response (keyword
        arguments are the init object, as Pyodide passes them)."""
        return self._ns._deliver(self._obj_id, input, init or options)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or name == "then":  # not a promise; private names stay private
                raise
        return lambda *args: self._ns._call(self._obj_id, name, args)


class DurableObjectNamespace(JsProxy):
    """The `CHAT_MEMORY` binding: ids and stubs of the class's objects."""

    def __init__(self, runtime: FakeWorkerd, cls: type):
        super().__init__("DurableObjectNamespace")
        object.__setattr__(self, "_runtime", runtime)
        object.__setattr__(self, "_cls", cls)

    def idFromName(self, name: str) -> DurableObjectId:
        """The id for a name (always the same)."""
        return DurableObjectId(hashlib.sha256(str(name).encode("utf-8")).hexdigest(), str(name))

    def idFromString(self, hex_id: str) -> DurableObjectId:
        """An id from its hex form."""
        if not re.fullmatch(r"[0-9a-f]{64}", hex_id):
            raise JsException("TypeError", "Invalid Durable Object ID")
        return DurableObjectId(hex_id)

    def newUniqueId(self, options: Any = None) -> DurableObjectId:
        """A fresh random id."""
        return DurableObjectId(secrets.token_hex(32))

    def get(self, obj_id: DurableObjectId, options: Any = None) -> DurableObjectStub:
        """The stub of an object."""
        return DurableObjectStub(self, obj_id)

    def getByName(self, name: str, options: Any = None) -> DurableObjectStub:
        """The stub of the object with this name."""
        return self.get(self.idFromName(name))

    async def _deliver(self, obj_id: DurableObjectId, input: Any, init: dict[str, Any]) -> JsResponse:
        if isinstance(input, JsRequest):
            # The request crosses to the object: the caller's body is consumed.
            body = (await input.arrayBuffer()).to_bytes() if input.body is not None else None
            request = JsRequest(
                input.url,
                init.get("method", input.method),
                init.get("headers", input.headers),
                init.get("body", body),
            )
        else:
            request = JsRequest.new(str(input), **init)
        instance = self._runtime._instance(self._cls, obj_id)
        return await self._runtime._call_fetch(instance, request, where=f"object {obj_id.name}")

    async def _call(self, obj_id: DurableObjectId, name: str, args: tuple[Any, ...]) -> Any:
        instance = self._runtime._instance(self._cls, obj_id)
        return await self._runtime._call_rpc(instance, name, args)


class _Env(JsProxy):
    def __init__(self, bindings: dict[str, Any]):
        super().__init__("Object", bindings)


class FakeWorkerd:
    """Runs one Worker module: its `Default` entrypoint and its Durable Object class."""

    def __init__(
        self,
        module: Any,
        data_dir: Path,
        vars: dict[str, str] | None = None,
        binding: str = "CHAT_MEMORY",
        class_name: str = "ChatMemorySQLite",
        entrypoint: str = "Default",
        wrap_requests: bool = False,
    ):
        self.module = module
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.entrypoint = getattr(module, entrypoint)
        self.namespace = DurableObjectNamespace(self, getattr(module, class_name))
        self.env = _Env({binding: self.namespace, **(vars or {})})
        self.instances: dict[str, Any] = {}
        self.names: dict[str, str] = {}  # id -> name, so alarms after a restart know it
        self.storages: dict[str, DurableObjectStorage] = {}
        self.alarms: dict[str, int] = {}
        self.alarm_retries: dict[str, int] = {}
        self.alarm_runs: list[tuple[str, str]] = []  # (object name, "ok" | error text)
        self.errors: list[str] = []
        self.wrap_requests = wrap_requests
        self.clock_offset_ms = 0
        if callable(getattr(module, "now_ms", None)):
            module.now_ms = self.now_ms  # the Worker's Date.now() (a test may put its own clock)

    def now_ms(self) -> int:
        """Date.now() inside the Worker: the wall clock, moved on by `run_alarms` (below)."""
        return now_ms() + self.clock_offset_ms

    # -- objects -------------------------------------------------------------------------

    def _instance(self, cls: type, obj_id: DurableObjectId) -> Any:
        key = obj_id.toString()
        if isinstance(obj_id.name, str):
            self.names[key] = obj_id.name
        instance = self.instances.get(key)
        if instance is None:
            storage = self.storages.get(key)
            if storage is None:
                storage = DurableObjectStorage(self.data_dir / f"{key}.sqlite3", self.alarms, key)
                self.storages[key] = storage
            state = DurableObjectState(obj_id, storage, lambda: self.instances.pop(key, None))
            instance = cls(state, self.env)
            self.instances[key] = instance
        return instance

    def restart(self) -> None:
        """Evict every object (a deploy or a crash): storage and alarms stay."""
        self.instances.clear()
        for storage in self.storages.values():
            storage._sql.close()
        self.storages.clear()

    def close(self) -> None:
        """Close every database."""
        self.restart()

    def _wrap(self, request: JsRequest) -> Any:
        from tests.fakes.workers.request import Request

        return Request(request) if self.wrap_requests else request

    async def _call_fetch(self, instance: Any, request: JsRequest, where: str) -> JsResponse:
        try:
            result = await instance.fetch(self._wrap(request))
            if hasattr(result, "js_object"):
                result = result.js_object
            if not isinstance(result, JsResponse):
                raise TypeError(f"fetch returned {type(result).__name__}, not a Response")
            return result
        except Exception:
            self.errors.append(f"{where}: {traceback.format_exc()}")
            return JsResponse("Internal Server Error", 500)

    async def _call_rpc(self, instance: Any, name: str, args: tuple[Any, ...]) -> Any:
        """Call an RPC method as workerd's Python entrypoint helper does: each argument
        through `python_from_rpc`, the result through `python_to_rpc`; an error is thrown
        to the caller (no Response stands in for it)."""
        method = None if name in HANDLERS else getattr(instance, name, None)
        if not callable(method):
            raise JsException("TypeError", f'The RPC receiver does not implement the method "{name}".')
        result = method(*(python_from_rpc(arg) for arg in args))
        if inspect.isawaitable(result):
            result = await result
        return python_to_rpc(result)

    # -- the Worker ----------------------------------------------------------------------

    async def fetch(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: bytes | JsReadableStream | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One request to the Worker's entrypoint: (status, headers, body); a body given as a
        `JsReadableStream` arrives in its chunks, as one the client streams."""
        request = JsRequest(url, method, headers or {}, body if body else None)
        instance = self.entrypoint(ExecutionContext(), self.env)
        response = await self._call_fetch(instance, request, where="worker")
        data = (await response.arrayBuffer()).to_bytes()
        return response.status, dict(response.headers), data

    # -- alarms --------------------------------------------------------------------------

    def alarm_of(self, name: str) -> int | None:
        """The scheduled alarm (ms) of the object with this name, or None."""
        return self.alarms.get(self.namespace.idFromName(name).toString())

    async def run_alarms(self, now: int | None = None) -> int:
        """Fire every alarm due at `now` (ms; default: every alarm); how many ran."""
        due = [k for k, t in self.alarms.items() if now is None or t <= now]
        for key in due:
            # An alarm never runs before its time: firing one early (a test's way to skip the
            # wait) moves the Worker's clock on to it, as waiting would have.
            self.clock_offset_ms += max(0, self.alarms.pop(key) - self.now_ms())
            obj_id = DurableObjectId(key, self.names.get(key, jsnull))
            instance = self._instance(self.namespace._cls, obj_id)
            retry = self.alarm_retries.get(key, 0)
            info = js_object({"retryCount": retry, "isRetry": retry > 0})
            try:
                await instance.alarm(info)
            except Exception as exc:
                self.alarm_runs.append((obj_id.name, repr(exc)))
                if retry < ALARM_RETRIES and key not in self.alarms:
                    self.alarm_retries[key] = retry + 1
                    self.alarms[key] = self.now_ms() + ALARM_FIRST_BACKOFF_MS * 2**retry
                continue
            self.alarm_retries.pop(key, None)
            self.alarm_runs.append((obj_id.name, "ok"))
        return len(due)
