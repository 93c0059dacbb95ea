"""`ctx.storage.sql` as workerd gives it: `SqlStorage` and its cursor, on sqlite3.

- `SqlStorage.exec(query, *bindings)` -> `SqlStorageCursor` (`toArray()`, `one()`,
  `raw()`, `next()`, iteration, `columnNames`, `rowsRead`, `rowsWritten`), backed by a
  real sqlite3 database file per object. An authorizer refuses what the Durable Object
  refuses: BEGIN/COMMIT/ROLLBACK/SAVEPOINT/RELEASE (use `transactionSync`), ATTACH,
  PRAGMAs outside a small allow-list, SQL functions outside the allowed set, `_cf_`
  tables. Bindings must be string, number, null/undefined or ArrayBuffer (a boolean or a
  BigInt is a TypeError); numbers come back through Pyodide's rule (integral -> int).
  One statement per `exec` (the real one also runs `;`-separated scripts: stricter here).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.workers._js import (
    JsArrayBuffer,
    JsBigInt,
    JsException,
    JsIterator,
    JsProxy,
    js_array,
    js_number,
    js_object,
    jsnull,
    to_js_value,
)

# The PRAGMAs and SQL functions a Durable Object allows (workerd's documented allow-lists):
# one file, read by the Node runtime's storage (memory_worker/pyodide/storage.mjs) too.
_ALLOWED = json.loads(
    (Path(__file__).resolve().parents[3] / "memory_worker/pyodide/durable_object_sql.json").read_text("utf-8")
)
ALLOWED_FUNCTIONS = frozenset(_ALLOWED["functions"])
ALLOWED_PRAGMAS = frozenset(_ALLOWED["pragmas"])


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
