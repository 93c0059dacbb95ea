"""The reads and the write of a turn that the engine does in one statement each."""

from __future__ import annotations

from typing import Any

from . import chat_state
from .storage import SqlStorage, rows_of

MSG_COLUMNS = "id, role, author, author_id, text, ts, message_id"
# The state keys a turn reads.
TURN_STATE = ("mode", "summary", chat_state.TOPIC_AFTER, chat_state.TOPIC_AT, chat_state.PERSONA)


def turn_state(sql: SqlStorage) -> dict[str, str | None]:
    """The state a turn reads (mode, summary, topic start, persona), in one statement."""
    marks = ",".join("?" * len(TURN_STATE))
    return dict(rows_of(sql, f"SELECT key, value FROM state WHERE key IN ({marks})", *TURN_STATE))


def newest(sql: SqlStorage, n: int) -> list[dict[str, Any]]:
    """The newest `n` stored messages, oldest first."""
    rows = sql.exec(f"SELECT {MSG_COLUMNS} FROM messages ORDER BY id DESC LIMIT ?", n)
    rows.reverse()
    return rows


def insert_user_message(
    sql: SqlStorage, text: str, author: str, author_id: str, message_id: str | None, ts: str
) -> int | None:
    """Store a user message, not indexed yet; its id, or None when its message_id is stored already."""
    rows = rows_of(
        sql,
        "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
        "VALUES ('user', ?, ?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING RETURNING id",
        author,
        author_id,
        text,
        ts,
        message_id,
    )
    return int(rows[0][0]) if rows else None
