"""Export: everything a chat (or one person in it) has in memory, as JSON pages.

`GET /export` answers with a first page (metadata, settings, facts with their history,
notes, usage, the summary for a whole-chat export, and the first messages); the client
follows `next_after` with `?after=ID&upto=UPTO` until it is null. Pages are cut by keyset
on the message id, never by OFFSET, and bounded in rows and in text bytes, so a chat of
100,000 messages is never held in memory at once by either host, and every host serves
it as a plain JSON answer (no streaming body to adapt in the Durable Object).
`upto` (the newest id when the export began) keeps the pages one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from memory_engine.api import wire
from memory_engine.chat_state import author_usage_rows, topic_start
from memory_engine.notes import as_facts
from memory_engine.reminders import store as reminders
from memory_engine.storage import SqlStorage

FORMAT = "chatbot-memory-export/1"
DEFAULT_PAGE = 500
MAX_PAGE = 5000
PAGE_TEXT_BYTES = 4 * 1024 * 1024  # a page stops after this much message text
_BATCH = 100  # rows per query inside a page: at most 100 x 64 KiB in hand at once

MSG_FIELDS = "id, role, author, author_id, text, ts, message_id, reply_to_author_id"
FACT_HISTORY_FIELDS = "id, author, author_id, key, value, kind, updated_at, superseded_at"


def _message_filter(author_id: str | None) -> tuple[str, list[Any]]:
    """(WHERE clause, its params) choosing the exported messages."""
    if author_id is None:
        return "1 = 1", []
    # What forgetting them removes: their messages (any role: an import may mark some
    # `system`) and the bot's replies to them.
    return "(author_id = ? OR reply_to_author_id = ?)", [author_id, author_id]


def _as_exported(rows: list[dict[str, Any]]) -> list[wire.ExportedMessage]:
    # The one cast for exported messages: sqlite3 (and the Durable Object's SQL) give plain
    # dicts, and the SELECT of MSG_FIELDS over `messages` fixes their keys and types.
    return cast(list[wire.ExportedMessage], rows)


def message_page(
    sql: SqlStorage,
    author_id: str | None,
    after: int,
    upto: int,
    limit: int,
    max_bytes: int = PAGE_TEXT_BYTES,
) -> tuple[list[wire.ExportedMessage], int | None]:
    """Messages with after < id <= upto, oldest first; (page, next `after` or None when done)."""
    where, params = _message_filter(author_id)
    out: list[wire.ExportedMessage] = []
    size = 0
    cursor = after
    while len(out) < limit and size < max_bytes:
        want = min(_BATCH, limit - len(out))
        rows = _as_exported(
            sql.exec(
                f"SELECT {MSG_FIELDS} FROM messages WHERE id > ? AND id <= ? AND {where} ORDER BY id LIMIT ?",
                cursor,
                upto,
                *params,
                want,
            )
        )
        for row in rows:
            out.append(row)
            size += len(row["text"].encode("utf-8"))
            cursor = int(row["id"])
            if size >= max_bytes:
                break
        if len(rows) < want:
            return out, None
    more = sql.exec(
        f"SELECT 1 AS x FROM messages WHERE id > ? AND id <= ? AND {where} LIMIT 1", cursor, upto, *params
    )
    return out, (cursor if more else None)


def _count(sql: SqlStorage, table_where: str, *params: Any) -> int:
    return int(sql.exec(f"SELECT COUNT(*) AS n FROM {table_where}", *params)[0]["n"])


def export_header(
    sql: SqlStorage,
    chat_key: str,
    author_id: str | None,
    now: str,
    settings: wire.SettingsAnswer,
    summary: Callable[[], wire.SummaryAnswer],
    usage: Callable[[], Mapping[str, object]],
) -> wire.ExportPage:
    """Everything but the messages: metadata, settings, facts and notes with history, usage."""
    upto = int(sql.exec("SELECT COALESCE(MAX(id), 0) AS n FROM messages")[0]["n"])
    where, params = _message_filter(author_id)
    whose = "" if author_id is None else " AND author_id = ?"
    who = [] if author_id is None else [author_id]
    query = f"SELECT {FACT_HISTORY_FIELDS} FROM facts WHERE kind = ?{whose} ORDER BY id"
    facts = as_facts(sql.exec(query, "fact", *who))
    notes = as_facts(sql.exec(query, "note", *who))
    _, topic_at = topic_start(sql)
    out: wire.ExportPage = {
        "export": {
            "format": FORMAT,
            "chat_key": chat_key,
            "author_id": author_id,
            "generated_at": now,
            "upto": upto,
            "counts": {
                "messages": _count(sql, f"messages WHERE id <= ? AND {where}", upto, *params),
                "facts": len(facts),
                "notes": len(notes),
            },
        },
        "settings": {**settings, "topic_started_at": topic_at},
        "facts": facts,
        "notes": notes,
        "reminders": reminders.export_rows(sql, author_id),
        "messages": [],  # the caller pages them in
        "next_after": None,
    }
    if author_id is None:
        out["summary"] = summary()
        out["usage"] = dict(usage())
    else:
        out["usage"] = {"days": author_usage_rows(sql, author_id)}
    return out


def export_page(
    sql: SqlStorage,
    chat_key: str,
    author_id: str | None,
    now: str,
    after: int | None,
    upto: int | None,
    limit: int,
    settings: Callable[[], wire.SettingsAnswer],
    summary: Callable[[], wire.SummaryAnswer],
    usage: Callable[[], Mapping[str, object]],
) -> wire.ExportPage:
    """One page of the export: the header and first messages, or (with `after`) more messages."""

    def run() -> wire.ExportPage:
        if after is None:
            out = export_header(sql, chat_key, author_id, now, settings(), summary, usage)
            end = int(out["export"]["upto"])
        else:
            end = (
                upto
                if upto is not None
                else int(sql.exec("SELECT COALESCE(MAX(id), 0) AS n FROM messages")[0]["n"])
            )
            out = {
                "export": {"format": FORMAT, "chat_key": chat_key, "author_id": author_id, "upto": end},
                "messages": [],
                "next_after": None,
            }
        messages, next_after = message_page(sql, author_id, after or 0, end, limit)
        out["messages"] = messages
        out["next_after"] = next_after
        return out

    # One read transaction: the header's counts and its first page agree.
    return sql.transaction(run)
