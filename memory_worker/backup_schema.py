"""What a restore checks in each database of a backup: the schema the migrations make.

A backup's file is run by the host once restored, so an object the migrations never made
(a trigger that rewrites every new message, a view) or one they made and is gone (the
search table) must not get in, nor a database from a newer version (a migration this code
does not know, a `user_version` it never sets). The reference is built in memory from the
same migrations, for the versions the file records (an older backup lacks the newer ones,
which the host applies when it opens the chat).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from memory_engine.storage import MIGRATIONS
from memory_worker.local.alarms import ALARMS_SCHEMA

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
)
# An object's shape: a table's columns (in any order: migrations that land out of number
# order add columns in another order), or the normalised SQL of anything else.
Shape = tuple[str, str, object]


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def _objects(conn: sqlite3.Connection) -> dict[str, Shape]:
    found: dict[str, Shape] = {}
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    for kind, name, table, sql in rows:
        shape: object = " ".join(str(sql or "").split())
        if kind == "table" and not str(sql or "").upper().startswith("CREATE VIRTUAL"):
            columns = conn.execute(
                'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_xinfo(?)', (name,)
            )
            shape = tuple(sorted(tuple(str(v) for v in c) for c in columns.fetchall()))
        found[name] = (kind, table, shape)
    return found


def _reference(statements: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    return conn


def _differs(conn: sqlite3.Connection, reference: sqlite3.Connection) -> str | None:
    for pragma in ("user_version", "application_id"):
        value, wanted = (c.execute(f"PRAGMA {pragma}").fetchone()[0] for c in (conn, reference))
        if value != wanted:
            return f"{pragma} is {value} (the migrations make {wanted})"
    have, want = _objects(conn), _objects(reference)
    for name in sorted(have.keys() - want.keys()):
        return f"it holds a {have[name][0]} `{name}` the migrations never make"
    for name in sorted(want.keys() - have.keys()):
        return f"its {want[name][0]} `{name}` is missing"
    for name in sorted(have):
        if have[name] != want[name]:
            return f"its {have[name][0]} `{name}` is not the one the migrations make"
    return None


def chat_schema_problem(conn: sqlite3.Connection) -> str | None:
    """Why a chat database's schema is not what the migrations make (None: it is)."""
    try:
        recorded = {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}
    except (sqlite3.Error, ValueError, TypeError):
        return "it has no readable record of its migrations (schema_migrations)"
    known = {version for version, _, _ in MIGRATIONS}
    if unknown := sorted(recorded - known):
        return f"it records migration {unknown[0]}, which this version does not know (a newer backup?)"
    statements = [MIGRATIONS_TABLE]
    for version, _, steps in sorted(MIGRATIONS, key=lambda m: m[0]):
        if version in recorded:
            statements.extend(steps)
    reference = _reference(statements)
    try:
        return _differs(conn, reference)
    finally:
        reference.close()


def alarms_schema_problem(conn: sqlite3.Connection) -> str | None:
    """Why the alarm table's schema is not the one the host makes (None: it is)."""
    reference = _reference([ALARMS_SCHEMA])
    try:
        return _differs(conn, reference)
    finally:
        reference.close()
