"""The workerd side: Durable Object storage, namespaces, alarms, and a harness to run a Worker.

Not part of the SDK: these are the JS objects the SDK wraps, with the behaviour of
Cloudflare's runtime that the memory worker depends on.

- `SqlStorage.exec(query, *bindings)` -> `SqlStorageCursor` (`toArray()`, `one()`,
  `raw()`, `next()`, iteration, `columnNames`, `rowsRead`, `rowsWritten`), backed by a
  real sqlite3 database file per object. An authorizer refuses what the Durable Object
  refuses: BEGIN/COMMIT/ROLLBACK/SAVEPOINT/RELEASE (use `transactionSync`), ATTACH,
  PRAGMAs outside a small allow-list, SQL functions outside the allowed set, `_cf_`
  tables. Bindings must be string, number, null/undefined or ArrayBuffer (a boolean or a
  BigInt is a TypeError); numbers come back through Pyodide's rule (integral -> int).
  One statement per `exec` (the real one also runs `;`-separated scripts: stricter here).
- `DurableObjectStorage.transactionSync(fn)`: all of fn's writes or none (nests).
- `deleteAll()` empties the whole database (not the alarm).
- Alarms: `setAlarm(ms | Date)`, `getAlarm()`, `deleteAlarm()` return promises; one
  alarm per object, persisted with the object (it survives `restart()`).
  `FakeWorkerd.run_alarms()` fires due ones: the alarm is cleared, `alarm(alarmInfo)`
  runs, and if it raises the runtime retries with exponential backoff (2 s, 4 s, ...,
  6 retries), as Cloudflare does.
- `DurableObjectNamespace`: `idFromName`, `idFromString`, `newUniqueId`, `get`,
  `getByName`; a stub's `fetch` delivers a copy of the request to the object's `fetch`
  (one instance per id, created on first use, its constructor given `(ctx, env)`).
- `FakeWorkerd`: builds `env` (the namespace, vars, secrets), calls the entry's
  `Default.fetch` per request (uncaught errors answer 500 and are kept in `errors`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._js import (
    JsArrayBuffer,
    JsBigInt,
    JsException,
    JsIterator,
    JsPromise,
    JsProxy,
    JsRequest,
    JsResponse,
    js_array,
    js_number,
    js_object,
    jsnull,
    to_js_value,
)

# The SQL functions a Durable Object allows (workerd's allow-list, as documented:
# core scalar, aggregate, window, date/time, JSON, math, FTS5 auxiliary functions).
# fmt: off
ALLOWED_FUNCTIONS = frozenset([
    "abs", "changes", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex", "ifnull",
    "iif", "instr", "last_insert_rowid", "length", "like", "likelihood", "likely", "lower", "ltrim",
    "max", "min", "nullif", "octet_length", "printf", "quote", "random", "randomblob", "replace",
    "round", "rtrim", "sign", "soundex", "sqlite_source_id", "sqlite_version", "substr", "substring",
    "total_changes", "trim", "typeof", "unhex", "unicode", "unlikely", "upper", "zeroblob", "date",
    "time", "datetime", "julianday", "unixepoch", "strftime", "timediff", "current_date",
    "current_time", "current_timestamp", "avg", "count", "group_concat", "string_agg", "sum", "total",
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value", "acos", "acosh", "asin", "asinh", "atan", "atan2",
    "atanh", "ceil", "ceiling", "cos", "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2",
    "mod", "pi", "pow", "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc", "json",
    "jsonb", "json_array", "jsonb_array", "json_array_length", "json_error_position", "json_extract",
    "jsonb_extract", "json_insert", "jsonb_insert", "json_object", "jsonb_object", "json_patch",
    "jsonb_patch", "json_pretty", "json_remove", "jsonb_remove", "json_replace", "jsonb_replace",
    "json_set", "jsonb_set", "json_type", "json_valid", "json_quote", "json_group_array",
    "jsonb_group_array", "json_group_object", "jsonb_group_object", "json_each", "json_tree", "bm25",
    "highlight", "snippet", "fts5", "match",
])
# fmt: on

# fmt: off
ALLOWED_PRAGMAS = frozenset([
    "data_version", "defer_foreign_keys", "foreign_keys", "foreign_key_check", "foreign_key_list",
    "index_info", "index_list", "index_xinfo", "legacy_alter_table", "optimize", "quick_check",
    "table_info", "table_list", "table_xinfo",
])
# fmt: on

ALARM_RETRIES = 6
ALARM_FIRST_BACKOFF_MS = 2000


def now_ms() -> int:
    """Date.now()."""
    return int(time.time() * 1000)


def _sql_error(message: str) -> JsException:
    return JsException("Error", f"{message}: SQLITE_AUTH")


class SqlStorageCursor(JsProxy):
    """The result of `sql.exec`: rows as JS objects, or raw arrays."""

    def __init__(self, columns: list[str], rows: list[tuple], rows_written: int):
        super().__init__(
            "SqlStorageCursor",
            {"columnNames": js_array(columns), "rowsRead": len(rows), "rowsWritten": rows_written},
        )
        object.__setattr__(self, "_columns", columns)
        object.__setattr__(self, "_rows", [tuple(_from_sqlite(v) for v in r) for r in rows])
        object.__setattr__(self, "_pos", 0)

    def _take(self) -> list[tuple]:
        rest = self._rows[self._pos :]
        object.__setattr__(self, "_pos", len(self._rows))
        return rest

    def _obj(self, row: tuple) -> JsProxy:
        return js_object(dict(zip(self._columns, row, strict=True)))

    def toArray(self) -> JsProxy:
        """Every remaining row as a JS object."""
        return js_array([self._obj(r) for r in self._take()])

    def one(self) -> JsProxy:
        """The only row; an error unless there is exactly one."""
        rows = self._take()
        if len(rows) != 1:
            raise JsException("Error", f"Expected exactly one result from SQL query, but got {len(rows)}.")
        return self._obj(rows[0])

    def raw(self) -> JsProxy:
        """The remaining rows as arrays of values, through a bare iterator (as in workerd)."""
        return JsIterator([js_array(list(r)) for r in self._take()])

    def next(self) -> JsProxy:
        """Iterator protocol: {done, value}."""
        if self._pos >= len(self._rows):
            return js_object({"done": True})
        row = self._rows[self._pos]
        object.__setattr__(self, "_pos", self._pos + 1)
        return js_object({"done": False, "value": self._obj(row)})

    def __iter__(self):
        return iter([self._obj(r) for r in self._take()])


def _from_sqlite(value: Any) -> Any:
    if value is None:
        return jsnull
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, bytes):
        return JsArrayBuffer(value)
    return value


def _to_sqlite(value: Any, index: int) -> Any:
    value = to_js_value(value)
    if value is None or value is jsnull:
        return None
    if isinstance(value, (bool, JsBigInt)):
        raise JsException(
            "TypeError",
            f"Failed to execute 'exec' on 'SqlStorage': parameter {index + 2} "
            f"is not of type 'string or number or ArrayBuffer or null'.",
        )
    if isinstance(value, JsArrayBuffer):
        return value.to_bytes()
    if isinstance(value, (str, int, float)):
        return value
    raise JsException("TypeError", f"Failed to execute 'exec' on 'SqlStorage': unsupported binding {value!r}")


class SqlStorage(JsProxy):
    """`ctx.storage.sql`: one sqlite3 database file."""

    def __init__(self, path: Path):
        super().__init__("SqlStorage")
        object.__setattr__(self, "_path", Path(path))
        object.__setattr__(self, "_internal", False)
        self._connect()

    def _connect(self) -> None:
        conn = sqlite3.connect(str(self._path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.set_authorizer(self._authorize)
        object.__setattr__(self, "_conn", conn)

    def _wipe(self) -> None:
        """Drop the whole database (deleteAll): the same object then sees an empty one."""
        self._conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(self._path) + suffix).unlink(missing_ok=True)
        self._connect()

    def _authorize(self, action: int, arg1: Any, arg2: Any, _db: Any, _trigger: Any) -> int:
        if self._internal:
            return sqlite3.SQLITE_OK
        if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
            return sqlite3.SQLITE_DENY
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in ALLOWED_PRAGMAS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in ALLOWED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        table = (
            arg1
            if action
            in (
                sqlite3.SQLITE_CREATE_TABLE,
                sqlite3.SQLITE_INSERT,
                sqlite3.SQLITE_UPDATE,
                sqlite3.SQLITE_DELETE,
                sqlite3.SQLITE_READ,
                sqlite3.SQLITE_DROP_TABLE,
            )
            else None
        )
        if isinstance(table, str) and table.lower().startswith("_cf_"):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def exec(self, query: str, *bindings: Any) -> SqlStorageCursor:
        """Run one statement; a cursor over its rows."""
        if re.match(r"\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b", query, re.I):
            raise _sql_error(
                "To execute a transaction, please use the state.storage.transaction() "
                "or state.storage.transactionSync() APIs instead of the SQL BEGIN "
                "TRANSACTION or SAVEPOINT statements"
            )
        params = [_to_sqlite(b, i) for i, b in enumerate(bindings)]
        before = self._conn.total_changes
        try:
            cur = self._conn.execute(query, params)
            rows = cur.fetchall()
        except sqlite3.DatabaseError as exc:
            raise JsException("Error", f"{exc}: SQLITE_ERROR") from None
        columns = [d[0] for d in cur.description or []]
        return SqlStorageCursor(columns, rows, self._conn.total_changes - before)

    @property
    def databaseSize(self) -> int:
        """Bytes used by the database."""
        object.__setattr__(self, "_internal", True)
        try:
            page_size = self._conn.execute("PRAGMA page_size").fetchone()[0]
            pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        finally:
            object.__setattr__(self, "_internal", False)
        return page_size * pages

    def _run_internal(self, statement: str) -> None:
        object.__setattr__(self, "_internal", True)
        try:
            self._conn.execute(statement)
        finally:
            object.__setattr__(self, "_internal", False)

    def close(self) -> None:
        """Close the database (the object is evicted)."""
        self._conn.close()


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
            # (314, checked under tests/test_pyodide.py's runtime) hands the ORIGINAL
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
    """A stub: `fetch(input, init)` reaches the object."""

    def __init__(self, namespace: DurableObjectNamespace, obj_id: DurableObjectId):
        super().__init__("DurableObject", {"id": obj_id, "name": obj_id.name})
        object.__setattr__(self, "_ns", namespace)
        object.__setattr__(self, "_obj_id", obj_id)

    def fetch(self, input: Any, init: Any = None, **options: Any) -> Any:
        """Deliver a request to the object's fetch; a promise of a JS Response (keyword
        arguments are the init object, as Pyodide passes them)."""
        return self._ns._deliver(self._obj_id, input, init or options)


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
        from .request import Request

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

    # -- the Worker ----------------------------------------------------------------------

    async def fetch(
        self, method: str, url: str, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request to the Worker's entrypoint: (status, headers, body)."""
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
            self.alarms.pop(key, None)
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
                    self.alarms[key] = now_ms() + ALARM_FIRST_BACKOFF_MS * 2**retry
                continue
            self.alarm_retries.pop(key, None)
            self.alarm_runs.append((obj_id.name, "ok"))
        return len(due)
