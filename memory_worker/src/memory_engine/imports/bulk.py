"""Bulk import: old history in one transaction, a few statements per batch, archived but for its tail.

The rows go in with one INSERT per chunk (`json_each` over the chunk as one JSON text: no
statement per message, and no more bound parameters than a Durable Object takes), or with
one statement over every row's values where the storage offers `many` (the local host's
`executemany`: no JSON to write and parse). They are indexed with one more statement: for
the batch, or, when the batch says more follow, for the whole import once its last batch
comes (`index.pending`). Only facts cost work per message, and most messages state none
(the extractor's cheap gates say so).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from memory_engine.api import wire
from memory_engine.compaction.compact import IMPORT_TAIL, archive_backlog
from memory_engine.errors import MemoryEngineError
from memory_engine.facts.answers import may_address, may_answer
from memory_engine.facts.extract import states_nothing
from memory_engine.forgetting import RETENTION_STEP
from memory_engine.imports.hold import counter, take
from memory_engine.index.pending import add_pending, build_pending
from memory_engine.storage import SqlStorage, rows_of

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory

# One INSERT takes at most this many characters of JSON: a Durable Object refuses a value over
# 2 MB, and a chunk this big already costs the statement's overhead less than 1%.
CHUNK_CHARS = 900_000
_COLUMNS = "role, author, author_id, text, ts, message_id, reply_to_author_id"
_INSERT = (
    f"INSERT INTO messages({_COLUMNS}) "
    "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), "
    "json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'), "
    "json_extract(value, '$[6]') FROM json_each(?) "
    # WHERE true: without it SQLite could read ON CONFLICT as a join's ON.
    "WHERE true ORDER BY key ON CONFLICT(message_id) DO NOTHING RETURNING id, message_id"
)


def import_messages(
    memory: ChatMemory, messages: list[wire.ImportedMessage], more: bool = False, remaining: int | None = None
) -> wire.ImportAnswer:
    """Store many messages at once, idempotent by message_id; keeps their `ts`; archives old history.

    With `more` (more batches of the same import follow) the rows are indexed with the
    import's last batch, or before anything reads the index, whichever comes first. With
    `remaining` (how many messages of the import follow this batch), rows the import would
    delete itself may be held instead of stored (`imports.hold`): the same database in the end.
    """
    now = memory.now()
    rows = [_row(m, now) for m in messages]

    def run() -> wire.ImportAnswer:
        if getattr(memory.sql, "many", None) is not None:  # only the local host holds rows
            taken = take(memory, messages, rows, more, remaining)
            if taken is not None:
                return taken
        stored = list(_stored(memory.sql, rows))
        answers: list[tuple[int, str]] = []  # (assistant row, the message_id it answers)
        chat_before: tuple[str, str] | None = None  # the previous user message: an answer's question
        for new_id, i in stored:
            m, (role, author, author_id, text, ts, _, _) = messages[i], rows[i]
            if role == "user":
                # (most messages: the rules would find nothing)
                if (
                    not states_nothing(text)
                    or may_answer(text, chat_before[0] if chat_before else None)
                    or may_address(text)
                ):
                    memory.apply_facts(text, author, author_id, new_id, ts, True, chat_before)
                chat_before = (text, author_id)
            elif (
                role == "assistant"
                and (answered := m.get("reply_to_message_id"))
                and not m.get("reply_to_author_id")
            ):
                answers.append((new_id, answered))
        if stored:
            first_id, last_id = stored[0][0], stored[-1][0]
            # Ids in [first, last] are all this import's, since one chat runs one request at
            # a time: they are indexed below in one statement, or with the import's last batch.
            add_pending(memory.sql, first_id, last_id)
            attribute_replies(memory.sql, first_id, last_id, answers)
            # Old history is archived, not summarized: only the import's newest tail costs
            # a summarizer call.
            archive_backlog(memory, batches=1, max_messages=IMPORT_TAIL)
            # Before the index is built: the rows the cap deletes now are never indexed.
            memory.apply_retention(limit=max(len(stored), RETENTION_STEP))
        if not more:
            build_pending(memory.sql, memory.retrieval)
        return {"imported": len(stored), "skipped": len(messages) - len(stored)}

    return memory.sql.transaction(run)


class ImportForgotten(MemoryEngineError):
    """The chat, or someone in it, was forgotten since the import's first batch: it must stop."""


def _run_key(import_id: str) -> str:
    return f"import_run:{import_id}"


def check_batch(memory: ChatMemory, import_id: str, batch: int) -> None:
    """Check a batch of the import `import_id` (`batch`: 1 for its first) before it is stored.

    The first batch notes the chat's forget generation (`summary_epoch`, which every
    forgetting renews); a later one is refused (ImportForgotten) when the chat has no note of
    the import (the whole chat was forgotten: its state went with it) or its generation
    changed (someone was): the import's later batches must not put back what was forgotten."""
    epoch = memory.state("summary_epoch", "0") or "0"
    if batch == 1:
        memory.set_state(_run_key(import_id), epoch)
        return
    if memory.state(_run_key(import_id)) != epoch:
        raise ImportForgotten(
            "this chat, or someone in it, was forgotten since the import's first batch: "
            "the import stops here (this batch was not stored)"
        )


def end_run(memory: ChatMemory, import_id: str) -> None:
    """The import's last batch is stored: its note goes."""
    memory.sql.exec("DELETE FROM state WHERE key = ?", _run_key(import_id))


def _row(m: wire.ImportedMessage, now: str) -> tuple[Any, ...]:
    """A message as the INSERT's columns (an assistant message may say whom it answers)."""
    role = m["role"]
    return (
        role,
        m.get("author") or ("assistant" if role == "assistant" else ""),
        m.get("author_id") or "",
        m["text"],
        m.get("ts") or now,
        m.get("message_id"),
        (m.get("reply_to_author_id") or None) if role == "assistant" else None,
    )


def _chunks(rows: list[tuple[Any, ...]]) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive rows whose texts hold at most CHUNK_CHARS characters together."""
    start = size = 0
    for i, row in enumerate(rows):
        size += len(row[3]) + 200
        if size > CHUNK_CHARS and i > start:
            yield start, i
            start, size = i, len(row[3]) + 200
    if start < len(rows):
        yield start, len(rows)


def _stored(sql: SqlStorage, rows: list[tuple[Any, ...]]) -> Iterator[tuple[int, int]]:
    """Insert the rows; (new id, index in `rows`) of each one stored, in order (a known message_id is not)."""
    many = getattr(sql, "many", None)
    if many is not None:
        yield from _stored_many(sql, many, rows)
        return
    for start, end in _chunks(rows):
        returned = sorted(rows_of(sql, _INSERT, json.dumps(rows[start:end], ensure_ascii=False)))
        # The stored rows are the chunk's rows in order, less those whose message_id was known:
        # a row is the next one stored when its message_id is the next one returned.
        i = start
        for new_id, message_id in returned:
            while rows[i][5] != message_id:
                i += 1
            yield int(new_id), i
            i += 1


# How many message ids one lookup binds (SQLite allows 999 or more; a Durable Object 100,
# but this path is the local host's).
_LOOKUP_CHUNK = 500


def _stored_many(
    sql: SqlStorage, many: Callable[[str, list[tuple[Any, ...]]], None], rows: list[tuple[Any, ...]]
) -> Iterator[tuple[int, int]]:
    """`_stored` through a storage that runs one statement over many rows (`many(query, rows)`).

    The local host's sqlite3 `executemany` binds each row's values as they are: no JSON text
    to write and parse again (14 -> 10 us a row). It returns no rows, so the repeats are
    looked up first (one statement), and the new ids follow from the AUTOINCREMENT counter:
    a chat runs one request at a time, so they are the counter's next ones, in order.
    """
    ids = [row[5] for row in rows if row[5] is not None]
    known: set[str] = set()
    # Bound as values, not as one JSON text for json_each: SQLite before 3.45 (the sqlite3 of
    # many Pythons) reads "\u0000" there as the end of the string, so a message_id holding a NUL
    # was never found, and its INSERT broke the UNIQUE constraint (a 500 for the whole batch).
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[start : start + _LOOKUP_CHUNK]
        marks = ", ".join("?" * len(chunk))
        found = rows_of(sql, f"SELECT message_id FROM messages WHERE message_id IN ({marks})", *chunk)
        known.update(message_id for (message_id,) in found)
    kept: list[int] = []
    for i, row in enumerate(rows):
        if row[5] is not None:
            if row[5] in known:
                continue
            known.add(row[5])  # a repeat inside the batch is skipped, as ON CONFLICT would
        kept.append(i)
    if not kept:
        return
    first = counter(sql) + 1
    many(f"INSERT INTO messages({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", [rows[i] for i in kept])
    if counter(sql) != first + len(kept) - 1:
        raise RuntimeError("message ids were not assigned in order")  # never: one writer per chat
    for n, i in enumerate(kept):
        yield first + n, i


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
