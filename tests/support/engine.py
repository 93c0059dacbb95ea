"""The memory engine in process, for retrieval and index tests."""

from __future__ import annotations

from pathlib import Path

from memory_engine import ChatMemory
from memory_engine.index import retrieval
from memory_worker.local import SqliteStorage

# How many messages have an index row or wait for one (the tail: every message after the
# index's newest row), less any index row whose message is gone. A consistent database gives
# its count of messages.
INDEXED_OR_TAIL = (
    "SELECT (SELECT COUNT(*) FROM messages WHERE id IN (SELECT rowid FROM messages_fts) "
    "OR id > (SELECT COALESCE(MAX(rowid), 0) FROM messages_fts)) "
    "- (SELECT COUNT(*) FROM messages_fts WHERE rowid NOT IN (SELECT id FROM messages)) AS n"
)


def memory(tmp_path: Path | None = None) -> ChatMemory:
    """A fresh chat memory over SqliteStorage (in memory unless a directory is given)."""
    return ChatMemory(SqliteStorage(":memory:" if tmp_path is None else tmp_path / "chat.sqlite3"))


def bulk_indexed(m: ChatMemory) -> ChatMemory:
    """A fresh chat memory holding m's archive (the same ids), indexed at once (m is left as it was)."""
    copy = memory()
    rows = m.sql.exec("SELECT id, role, author, author_id, text, ts, message_id FROM messages ORDER BY id")
    for r in rows:
        copy.sql.exec(
            "INSERT INTO messages(id, role, author, author_id, text, ts, message_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            *r.values(),
        )
    if rows:
        retrieval.index_messages(copy.sql, rows[0]["id"], rows[-1]["id"])
    return copy


def ids_of(m: ChatMemory, query: str, k: int = 10) -> list[str]:
    """The message_ids `search` returns for `query`, best first."""
    return [r["message_id"] for r in m.search(query, k)["results"]]


def add(m: ChatMemory, *rows: tuple[str, str] | tuple[str, str, str]) -> None:
    """Import (author, text[, ts]) rows with message ids m1, m2, ..."""
    start = len(m.sql.exec("SELECT id FROM messages"))
    m.import_messages(
        [
            {
                "role": "user",
                "author": row[0],
                "author_id": row[0].lower(),
                "text": row[1],
                "message_id": f"m{start + n + 1}",
                **({"ts": row[2]} if len(row) > 2 else {}),
            }
            for n, row in enumerate(rows)
        ]
    )


FILLER = [
    ("Zed", "the weather is grey and wet again"),
    ("Yan", "my tea went cold while I was typing"),
    ("Zed", "the bus was late this morning"),
    ("Yan", "planning to repaint the kitchen soon"),
]


def fts_row(m: ChatMemory, message_id: str) -> dict:
    """The FTS5 row of one message: every column."""
    return m.sql.exec(
        "SELECT body, author, context_before, context_after, date FROM messages_fts "
        "WHERE rowid = (SELECT id FROM messages WHERE message_id = ?)",
        message_id,
    )[0]
