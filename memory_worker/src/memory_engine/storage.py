"""The one storage interface the engine talks to, and the numbered schema migrations.

The interface has the shape of Cloudflare's `ctx.storage.sql.exec(query, *params)`: the
Durable Object shell adapts its cursor to it, the local host adapts `sqlite3`. Rows come
back as plain dicts, column name to value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class SqlStorage(Protocol):
    """A chat's own SQLite database.

    `exec` runs one statement with `?` parameters and returns every row as a dict.
    `transaction` runs `fn` so that all of its statements commit together or not at all
    (the Durable Object's `transactionSync`; BEGIN/COMMIT in the local host). No
    statement passed to `exec` may be BEGIN, COMMIT or SAVEPOINT: the Durable Object
    refuses them.
    """

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one SQL statement; return its rows as dicts."""

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically and return its result."""


# Append-only: never edit a shipped migration; add the next number instead.
MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "messages, full-text index, facts, usage, state",
        [
            """CREATE TABLE messages (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                role TEXT NOT NULL,
                author TEXT NOT NULL DEFAULT '',
                author_id TEXT NOT NULL DEFAULT '',
                text TEXT NOT NULL,
                ts TEXT NOT NULL,
                message_id TEXT UNIQUE
            )""",
            "CREATE INDEX messages_author ON messages(author_id)",
            # Its own copy of the text: deletes stay simple (rowid = messages.id), and
            # `context` can carry a neighbour's words without touching the archive.
            """CREATE VIRTUAL TABLE messages_fts USING fts5(
                body, author, context,
                tokenize = 'porter unicode61 remove_diacritics 2'
            )""",
            """CREATE TABLE facts (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                author TEXT NOT NULL,
                author_id TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                superseded_at TEXT,
                source_message INTEGER
            )""",
            "CREATE INDEX facts_current ON facts(author_id, key) WHERE superseded_at IS NULL",
            """CREATE TABLE router_usage (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                ts TEXT NOT NULL,
                tier TEXT NOT NULL,
                model TEXT NOT NULL,
                prompt_tokens INTEGER NOT NULL,
                completion_tokens INTEGER NOT NULL,
                latency_ms REAL,
                cost_usd REAL NOT NULL,
                ok INTEGER NOT NULL,
                error TEXT,
                message_id TEXT,
                author_id TEXT
            )""",
            """CREATE TABLE usage_daily (
                day TEXT NOT NULL,
                tier TEXT NOT NULL,
                calls INTEGER NOT NULL DEFAULT 0,
                errors INTEGER NOT NULL DEFAULT 0,
                prompt_tokens INTEGER NOT NULL DEFAULT 0,
                completion_tokens INTEGER NOT NULL DEFAULT 0,
                cost_usd REAL NOT NULL DEFAULT 0,
                PRIMARY KEY (day, tier)
            )""",
            "CREATE INDEX router_usage_message ON router_usage(message_id)",
            "CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT)",
        ],
    ),
    (
        2,
        "index of current facts in insertion order (the prompt's facts query)",
        ["CREATE INDEX facts_current_by_id ON facts(id) WHERE superseded_at IS NULL"],
    ),
    (
        3,
        "assistant messages name the author they answer (forgetting a person removes them)",
        [
            "ALTER TABLE messages ADD COLUMN reply_to_author_id TEXT",
            "CREATE INDEX messages_reply_to ON messages(reply_to_author_id) "
            "WHERE reply_to_author_id IS NOT NULL",
        ],
    ),
]


def migrate(sql: SqlStorage, now: str) -> int:
    """Apply every migration not yet recorded in `schema_migrations`; return the version."""
    sql.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    rows = sql.exec("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations")
    current = int(rows[0]["v"]) if rows else 0
    for version, name, statements in MIGRATIONS:
        if version <= current:
            continue

        def apply(statements=statements, version=version, name=name) -> None:
            for statement in statements:
                sql.exec(statement)
            sql.exec(
                "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                version,
                name,
                now,
            )

        sql.transaction(apply)
        current = version
    return current
