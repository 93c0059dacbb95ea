"""Per-chat state beside the messages: the persona, the topic start, today's usage per author.

Each lives in the chat's own database (the `state` table and `usage_daily_author`), so it
survives restarts and is gone with the chat. Functions take the engine's `SqlStorage`.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import cast

from memory_engine.api import wire
from memory_engine.storage import SqlStorage
from memory_engine.usage import ModelCall

MAX_PERSONA_CHARS = 2000
AUTHOR_USAGE_DAYS_KEPT = 8  # "today" needs one day; a week is there for /usage and debugging

PERSONA = "persona"
TOPIC_AFTER = "topic_after_id"
TOPIC_AT = "topic_started_at"
_PERSONA, _TOPIC_AFTER, _TOPIC_AT = PERSONA, TOPIC_AFTER, TOPIC_AT  # the keys in the state table


def _get(sql: SqlStorage, key: str) -> str | None:
    rows = sql.exec("SELECT value FROM state WHERE key = ?", key)
    return rows[0]["value"] if rows else None


def put(sql: SqlStorage, key: str, value: str | None) -> None:
    """Set one value of the chat's key-value state."""
    sql.exec(
        "INSERT INTO state(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        key,
        value,
    )


# -- persona ---------------------------------------------------------------------------


def persona(sql: SqlStorage) -> str:
    """The chat's persona (its own instructions for the model); "" when none is set."""
    return _get(sql, _PERSONA) or ""


read_persona = persona  # for functions whose parameter is named `persona`


def set_persona(sql: SqlStorage, text: str) -> None:
    """Store the persona; blank text resets it to the bot's default."""
    if text.strip():
        put(sql, _PERSONA, text)
    else:
        sql.exec("DELETE FROM state WHERE key = ?", _PERSONA)


# -- topic start -----------------------------------------------------------------------


def topic_start(sql: SqlStorage) -> tuple[int, str | None]:
    """(id of the newest message before the topic start, its ts); (0, None) without one."""
    rows = sql.exec("SELECT key, value FROM state WHERE key IN (?, ?)", _TOPIC_AFTER, _TOPIC_AT)
    values = {r["key"]: r["value"] for r in rows}
    return int(values.get(_TOPIC_AFTER) or 0), values.get(_TOPIC_AT)


def start_topic(sql: SqlStorage, now: str) -> wire.TopicAnswer:
    """Mark a new topic: recent messages from now on begin after the newest one stored."""

    def run() -> wire.TopicAnswer:
        newest = int(sql.exec("SELECT COALESCE(MAX(id), 0) AS n FROM messages")[0]["n"])
        put(sql, _TOPIC_AFTER, str(newest))
        put(sql, _TOPIC_AT, now)
        return {"topic_started_at": now, "after_id": newest}

    return sql.transaction(run)


# -- usage per author ------------------------------------------------------------------


def record_author_usage(sql: SqlStorage, author_id: str, call: ModelCall) -> None:
    """Count one model call against the person it answered (for per-person daily caps)."""
    if not author_id:
        return
    sql.exec(
        "INSERT INTO usage_daily_author(day, author_id, calls, errors, prompt_tokens, "
        "completion_tokens, cost_usd) VALUES (?, ?, 1, ?, ?, ?, ?) "
        "ON CONFLICT(day, author_id) DO UPDATE SET calls = calls + 1, errors = errors + excluded.errors, "
        "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
        "completion_tokens = completion_tokens + excluded.completion_tokens, "
        "cost_usd = cost_usd + excluded.cost_usd",
        call.day,
        author_id,
        0 if call.ok else 1,
        call.prompt_tokens,
        call.completion_tokens,
        call.cost_usd,
    )
    # Bounded: a range delete on the primary key, usually of nothing.
    sql.exec("DELETE FROM usage_daily_author WHERE day < ?", _days_before(call.day, AUTHOR_USAGE_DAYS_KEPT))


def _days_before(day: str, n: int) -> str:
    return (date.fromisoformat(day) - timedelta(days=n)).isoformat()


def count_message(sql: SqlStorage, author_id: str, day: str, prune: bool = True) -> None:
    """Count one live user message against its author and the chat for UTC `day` (the caps).

    With `prune` False the counters of days past the kept week are left for a later call
    (the turn prunes once per day it sees, not on every message).
    """
    # Counters, not a COUNT over the day's messages: a busy day must not cost a scan per turn.
    sql.exec(
        "INSERT INTO messages_daily(day, author_id, messages) VALUES (?, ?, 1) "
        "ON CONFLICT(day, author_id) DO UPDATE SET messages = messages + 1",
        day,
        author_id,
    )
    sql.exec(
        "INSERT INTO messages_daily_chat(day, messages) VALUES (?, 1) "
        "ON CONFLICT(day) DO UPDATE SET messages = messages + 1",
        day,
    )
    if not prune:
        return
    old = _days_before(day, AUTHOR_USAGE_DAYS_KEPT)
    sql.exec("DELETE FROM messages_daily WHERE day < ?", old)  # a range on the key, usually empty
    sql.exec("DELETE FROM messages_daily_chat WHERE day < ?", old)


def forget_author_usage(sql: SqlStorage, author_id: str) -> None:
    """Drop what is counted against one person (part of forgetting them)."""
    sql.exec("DELETE FROM usage_daily_author WHERE author_id = ?", author_id)
    sql.exec("DELETE FROM messages_daily WHERE author_id = ?", author_id)


def author_usage_rows(sql: SqlStorage, author_id: str) -> list[wire.DayUsage]:
    """The per-day usage kept for one person, oldest day first."""
    rows = sql.exec(
        "SELECT day, calls, errors, prompt_tokens, completion_tokens, cost_usd "
        "FROM usage_daily_author WHERE author_id = ? ORDER BY day",
        author_id,
    )
    return cast(list[wire.DayUsage], rows)  # the SELECT names DayUsage's keys


def usage_today_author(sql: SqlStorage, author_id: str, day: str) -> wire.AuthorUsage:
    """Today's (UTC `day`) user messages and model calls/cost of one author, and the chat's
    user messages today: what daily caps are checked against. Counts include the message
    of the turn being answered; imported history is not counted (it was not sent today)."""
    # One statement (a turn reads this on every message): three primary-key lookups.
    row = sql.exec(
        "SELECT (SELECT messages FROM messages_daily WHERE day = ? AND author_id = ?) AS mine, "
        "(SELECT messages FROM messages_daily_chat WHERE day = ?) AS chat, "
        "u.calls AS calls, u.errors AS errors, u.cost_usd AS cost "
        "FROM (SELECT 1) LEFT JOIN usage_daily_author u ON u.day = ? AND u.author_id = ?",
        day,
        author_id,
        day,
        day,
        author_id,
    )[0]
    return {
        "day": day,
        "author_id": author_id,
        "messages": int(row["mine"] or 0),
        "calls": int(row["calls"] or 0),
        "errors": int(row["errors"] or 0),
        "cost_usd": round(float(row["cost"] or 0.0), 8),
        "chat_messages": int(row["chat"] or 0),
    }


# This module's tables: emptied when the chat is forgotten.
TABLES = ("usage_daily_author", "messages_daily", "messages_daily_chat")
