"""Bulk import: old history in one transaction, indexed in one statement, archived but for its tail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .compaction import IMPORT_TAIL, archive_backlog
from .forgetting import RETENTION_STEP
from .retrieval import index_messages
from .storage import SqlStorage

if TYPE_CHECKING:
    from .engine import ChatMemory


def import_messages(memory: ChatMemory, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Store many messages at once, idempotent by message_id; keeps their `ts`; archives old history."""
    now = memory.now()

    def run() -> dict[str, int]:
        imported = skipped = 0
        first_id = last_id = None
        answers: list[tuple[int, str]] = []  # (assistant row, the message_id it answers)
        for m in messages:
            role = m["role"]
            author = m.get("author") or ("assistant" if role == "assistant" else "")
            author_id = m.get("author_id") or ""
            ts = m.get("ts") or now
            new_id = memory.insert_message(
                role,
                m["text"],
                author,
                author_id,
                m.get("message_id"),
                ts,
                index=False,
                reply_to_author_id=m.get("reply_to_author_id") if role == "assistant" else None,
            )
            if new_id is None:
                skipped += 1
                continue
            imported += 1
            first_id = new_id if first_id is None else first_id
            last_id = new_id
            if role == "user":
                memory.apply_facts(m["text"], author, author_id, new_id, ts)
            elif role == "assistant" and m.get("reply_to_message_id") and not m.get("reply_to_author_id"):
                answers.append((new_id, m["reply_to_message_id"]))
        if first_id is not None and last_id is not None:
            # One statement for the batch: ids in [first, last] are all this import's,
            # since one chat runs one request at a time.
            index_messages(memory.sql, first_id, last_id)
            attribute_replies(memory.sql, first_id, last_id, answers)
            # Old history is archived, not summarized: only the import's newest tail costs
            # a summarizer call.
            archive_backlog(memory, batches=1, max_messages=IMPORT_TAIL)
            memory.apply_retention(limit=max(imported, RETENTION_STEP))
        return {"imported": imported, "skipped": skipped}

    return memory.sql.transaction(run)


def attribute_replies(sql: SqlStorage, first_id: int, last_id: int, answers: list[tuple[int, str]]) -> None:
    """Say whose message each imported assistant message answers (see `ChatMemory.reply`)."""
    for row_id, answered in answers:
        sql.exec(
            "UPDATE messages SET reply_to_author_id = "
            "(SELECT NULLIF(a.author_id, '') FROM messages a WHERE a.message_id = ?) WHERE id = ?",
            answered,
            row_id,
        )
    # The rest answer the user message before them, as a live reply does by default.
    sql.exec(
        "UPDATE messages SET reply_to_author_id = (SELECT NULLIF(p.author_id, '') FROM messages p "
        "WHERE p.id < messages.id AND p.role = 'user' ORDER BY p.id DESC LIMIT 1) "
        "WHERE id >= ? AND id <= ? AND role = 'assistant' AND reply_to_author_id IS NULL",
        first_id,
        last_id,
    )
