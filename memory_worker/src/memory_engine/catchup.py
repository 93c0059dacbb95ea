"""'What did I miss?': the messages of a chat since someone's last message, bounded.

Since the asker's last message in the chat (or, when they have none, the last day), the
newest `limit` messages at most, oldest first. Imported history counts like live messages
(its `author_id` and `ts` are kept), so a catch-up works on an imported group too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

from memory_engine.api import wire

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory

DEFAULT_LIMIT = 200
MAX_LIMIT = 500
COLUMNS = "id, role, author, author_id, text, ts, message_id"


class CatchupAnswer(TypedDict):
    """What was said since the asker's last message (`since`: which mark was used)."""

    since: Literal["last_message", "last_day"]
    since_ts: str
    total: int
    messages: list[wire.Message]


def catchup(memory: ChatMemory, author_id: str, limit: int = DEFAULT_LIMIT) -> CatchupAnswer:
    """The messages after `author_id`'s last one (or of the last day), at most `limit`, oldest first."""
    sql = memory.sql
    last = "SELECT id, ts FROM messages WHERE author_id = ? AND role = 'user' ORDER BY id DESC LIMIT 1"
    mine = sql.exec(last, author_id)
    since: Literal["last_message", "last_day"]
    params: list[Any]
    if mine:
        since, after, since_ts = "last_message", int(mine[0]["id"]), str(mine[0]["ts"])
        where, params = "id > ?", [after]
    else:
        since, since_ts = "last_day", _day_before(memory)
        where, params = "ts > ?", [since_ts]
    total = int(sql.exec(f"SELECT COUNT(*) AS n FROM messages WHERE {where}", *params)[0]["n"])
    rows = sql.exec(f"SELECT {COLUMNS} FROM messages WHERE {where} ORDER BY id DESC LIMIT ?", *params, limit)
    rows.reverse()
    return {"since": since, "since_ts": since_ts, "total": total, "messages": _as_messages(rows)}


def _as_messages(rows: list[dict[str, Any]]) -> list[wire.Message]:
    # The one cast here: sqlite3 (and the Durable Object's SQL) give plain dicts, and the
    # SELECT of COLUMNS over `messages` fixes their keys and types to Message's.
    return cast(list[wire.Message], rows)


def _day_before(memory: ChatMemory) -> str:
    from memory_engine.engine import utc_iso

    return utc_iso(memory.clock() - timedelta(days=1))
