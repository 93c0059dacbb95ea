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


def _canon(column: str) -> str:
    """SQL for facts.canonical_key of `column`, as it was when migration 8 shipped."""
    for variant, spelling in (
        ("colour", "color"),
        ("flavour", "flavor"),
        ("favourite", "favorite"),
        ("colors", "color"),
    ):
        column = f"replace({column}, '{variant}', '{spelling}')"
    return column


def rows_of(sql: SqlStorage, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement; its rows as tuples in column order (name every column: distinct names).

    A storage may offer `rows(query, *params)` that skips building a dict per row (the hot
    paths read many rows and name none of their columns); any other one is adapted.
    """
    rows = getattr(sql, "rows", None)
    if rows is not None:
        return list(rows(query, *params))
    return [tuple(r.values()) for r in sql.exec(query, *params)]


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
    (
        4,
        "full-text index with the turns around each message and its month and year",
        [
            # Frozen copy of retrieval.index_messages's statement at the time (tested equal):
            # a shipped migration never changes, while retrieval.py may.
            "DROP TABLE messages_fts",
            """CREATE VIRTUAL TABLE messages_fts USING fts5(
                body, author, context_before, context_after, date,
                tokenize = 'porter unicode61 remove_diacritics 2'
            )""",
            """INSERT INTO messages_fts(rowid, body, author, context_before, context_after, date)
            SELECT id, text, author,
                substr(COALESCE(lag(text, 2) OVER w, ''), 1, 500) || ' '
                    || substr(COALESCE(lag(text, 1) OVER w, ''), 1, 500),
                substr(COALESCE(lead(text, 1) OVER w, ''), 1, 500),
                COALESCE((CASE substr(ts, 6, 2)
                    WHEN '01' THEN 'january'
                    WHEN '02' THEN 'february'
                    WHEN '03' THEN 'march'
                    WHEN '04' THEN 'april'
                    WHEN '05' THEN 'may'
                    WHEN '06' THEN 'june'
                    WHEN '07' THEN 'july'
                    WHEN '08' THEN 'august'
                    WHEN '09' THEN 'september'
                    WHEN '10' THEN 'october'
                    WHEN '11' THEN 'november'
                    WHEN '12' THEN 'december'
                END) || ' ' || substr(ts, 1, 4), '')
            FROM messages WINDOW w AS (ORDER BY id)""",
        ],
    ),
    (
        5,
        "fact kinds (notes), per-author daily usage, indexes for today's counts",
        [
            "ALTER TABLE facts ADD COLUMN kind TEXT NOT NULL DEFAULT 'fact'",
            "CREATE INDEX facts_notes ON facts(id) WHERE kind = 'note' AND superseded_at IS NULL",
            # Today's messages of one author / of the chat, without a scan of the archive.
            "CREATE INDEX messages_author_ts ON messages(author_id, ts)",
            "CREATE INDEX messages_ts ON messages(ts)",
            # router_usage keeps a window of rows; caps need whole days per author.
            """CREATE TABLE usage_daily_author (
                day TEXT NOT NULL,
                author_id TEXT NOT NULL,
                calls INTEGER NOT NULL DEFAULT 0,
                errors INTEGER NOT NULL DEFAULT 0,
                prompt_tokens INTEGER NOT NULL DEFAULT 0,
                completion_tokens INTEGER NOT NULL DEFAULT 0,
                cost_usd REAL NOT NULL DEFAULT 0,
                PRIMARY KEY (day, author_id)
            )""",
        ],
    ),
    (
        6,
        "daily message counters per author and per chat (the caps read two rows, not a day's messages)",
        [
            """CREATE TABLE messages_daily (
                day TEXT NOT NULL,
                author_id TEXT NOT NULL,
                messages INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (day, author_id)
            )""",
            """CREATE TABLE messages_daily_chat (
                day TEXT PRIMARY KEY,
                messages INTEGER NOT NULL DEFAULT 0
            )""",
        ],
    ),
    (
        8,
        "fact keys spelled one way (favourite_colour -> favorite_color): the newest current value stays",
        [
            # A frozen copy of facts.canonical_key in SQL. Of one author's current facts under
            # one key spelled two ways, all but the newest are superseded; then keys are respelled.
            f"""UPDATE facts SET superseded_at = updated_at
            WHERE superseded_at IS NULL AND kind = 'fact' AND id < (
                SELECT MAX(f.id) FROM facts f
                WHERE f.superseded_at IS NULL AND f.kind = 'fact' AND f.author_id = facts.author_id
                AND {_canon("f.key")} = {_canon("facts.key")})""",
            f"UPDATE facts SET key = {_canon('key')} WHERE key != {_canon('key')}",
        ],
    ),
    (
        7,
        "reminders, and the reminder dispatch queue (used by the dispatch object only)",
        [
            """CREATE TABLE reminders (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                author TEXT NOT NULL DEFAULT '',
                author_id TEXT NOT NULL DEFAULT '',
                text TEXT NOT NULL,
                due_at INTEGER NOT NULL,
                tz TEXT NOT NULL DEFAULT 'UTC',
                every TEXT,
                created_at TEXT NOT NULL,
                handed_due INTEGER,
                state TEXT NOT NULL DEFAULT 'pending',
                sent_count INTEGER NOT NULL DEFAULT 0,
                last_sent_at INTEGER,
                last_late INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX reminders_pending ON reminders(due_at) WHERE state = 'pending'",
            "CREATE INDEX reminders_author ON reminders(author_id)",
            """CREATE TABLE reminder_dispatch (
                key TEXT PRIMARY KEY,
                chat_key TEXT NOT NULL,
                reminder_id INTEGER NOT NULL,
                due_at INTEGER NOT NULL,
                offered_at INTEGER NOT NULL,
                lease_owner TEXT,
                lease_until INTEGER NOT NULL DEFAULT 0,
                not_before INTEGER NOT NULL DEFAULT 0,
                attempts INTEGER NOT NULL DEFAULT 0,
                done_at INTEGER
            )""",
            "CREATE INDEX reminder_dispatch_open ON reminder_dispatch(due_at) WHERE done_at IS NULL",
        ],
    ),
    (
        9,
        "no index of messages by (author_id, ts): unread since the daily counters (6); every row paid for it",
        [
            # Its one reader was the caps' scan of a person's messages of the day (migration 6
            # replaced it with counters). A message's lookups by author use messages_author
            # (in id order, which the newest-first reads want); each insert and delete of a
            # message kept this one up to date for nothing: 2-4 us a row of an import.
            "DROP INDEX IF EXISTS messages_author_ts",
        ],
    ),
    (
        10,
        "the directory of chats and the dashboard's login state (used by the directory object only)",
        [
            """CREATE TABLE directory_chats (
                chat_key TEXT PRIMARY KEY,
                title TEXT NOT NULL DEFAULT '',
                messages INTEGER NOT NULL DEFAULT 0,
                last_ts TEXT NOT NULL DEFAULT ''
            )""",
            "CREATE INDEX directory_chats_last ON directory_chats(last_ts)",
            """CREATE TABLE directory_people (
                chat_key TEXT NOT NULL,
                author_id TEXT NOT NULL,
                PRIMARY KEY (chat_key, author_id)
            )""",
            """CREATE TABLE directory_usage (
                chat_key TEXT NOT NULL,
                day TEXT NOT NULL,
                tier TEXT NOT NULL,
                calls INTEGER NOT NULL DEFAULT 0,
                errors INTEGER NOT NULL DEFAULT 0,
                cost_usd REAL NOT NULL DEFAULT 0,
                PRIMARY KEY (chat_key, day, tier)
            )""",
            # Covering: the overview's chart sums every chat's days from the index alone.
            "CREATE INDEX directory_usage_day ON directory_usage(day, tier, calls, errors, cost_usd)",
            """CREATE TABLE dashboard_auth (
                kind TEXT NOT NULL,
                key TEXT NOT NULL,
                until INTEGER NOT NULL,
                count INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (kind, key)
            )""",
        ],
    ),
]


def migrate(sql: SqlStorage, now: str) -> int:
    """Apply every migration not yet recorded in `schema_migrations`; return the version."""
    sql.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    # Every version not recorded runs, in order: branches that add migrations in parallel
    # may land out of number order, and a database at 4 must still get 3 when it lands.
    applied = {int(r["version"]) for r in sql.exec("SELECT version FROM schema_migrations")}
    for version, name, statements in sorted(MIGRATIONS, key=lambda m: m[0]):
        if version in applied:
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
        applied.add(version)
    return max(applied, default=0)
