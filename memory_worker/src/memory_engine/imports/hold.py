"""Rows an import would delete itself are never written: `remaining`, and the hold.

A chat keeps at most `retention` messages: of a 200,000-message import into a chat capped at
50,000, 150,000 rows would be inserted, archived and deleted again by the retention cap before
the import ends. When each batch says how many messages of the import are still to come
(`remaining`), the rows that will be gone by then are *held*: their facts are extracted,
their ids used up and whom they answer worked out as always, but the row waits in the
chat's state (one JSON text a batch) instead of the messages table.

The host never relies on the hint for what it keeps. It follows, in memory, exactly what
the import without the hold does to the archive after each batch (the retention's cut, the
archive mark, whom an answer answers, what an author said before a correction) and writes
that; a held row is dropped only once that cut has passed it. When the hint is wrong, the
client stops, the host restarts or anything else reads the chat first, `settle` writes back
the held rows the archive would still hold: the database is always the one the import
without the hint gives (tests/engine/test_import_hold.py compares them whole).

A hold starts only where following it is simple and exact: the chat holds no message and
nothing pending, every message has a message_id "<prefix><number>" with the numbers
increasing (so none repeats another: none is skipped), and the storage inserts by `many`
and can be weakly referenced (the local host; the Durable Object stores every row).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from memory_engine.api import wire
from memory_engine.compaction.compact import BATCH_MESSAGES, IMPORT_TAIL, KEEP_UNSUMMARIZED, archive_mark
from memory_engine.facts.answers import may_address, may_answer
from memory_engine.facts.extract import states_nothing
from memory_engine.forgetting import RETENTION_STEP
from memory_engine.index.pending import (
    HELD,
    HELD_INSERT,
    HOLD,
    PENDING,
    SESSIONS,
    Hold,
    add_pending,
    build_pending,
    forget_settled,
    held,
    settle,
)
from memory_engine.index.retrieval import drop_counts
from memory_engine.storage import SqlStorage, rows_of

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory

_MESSAGE_ID = re.compile(r"(.*?)([1-9][0-9]*|0)")  # a prefix and a number: one string for each pair
_NEWEST = KEEP_UNSUMMARIZED + IMPORT_TAIL + 1  # the rows `archive_backlog` reads after a batch


@dataclass
class _Session:
    """What the import without the hold would find in the archive, as far as a batch reads it."""

    next_id: int
    cut: int  # the rows up to this id would be deleted by now; the later ones of the import stored
    prefix: str
    number: int  # of the last message_id
    recent: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=_NEWEST))  # (id, length)
    said: dict[str, tuple[int, str]] = field(default_factory=dict)  # author_id -> their newest (id, text)
    ids: dict[str, tuple[int, str]] = field(default_factory=dict)  # message_id -> (id, author_id)
    last_user: tuple[int, str] | None = None  # (id, author_id) of the newest user message
    busy: bool = False  # a batch is being taken: still True after one that failed (rolled back)


_SESSIONS = SESSIONS  # storage -> its hold's _Session (`settle` drops it with the hold)


def take(
    memory: ChatMemory,
    messages: list[wire.ImportedMessage],
    rows: list[tuple[Any, ...]],
    more: bool,
    remaining: int | None,
) -> wire.ImportAnswer | None:
    """Import the batch holding the rows the import will delete itself; None: import it as
    usual (a hold this batch does not continue is settled first)."""
    sql = memory.sql
    hold, session = held(sql), cast("_Session | None", _SESSIONS.get(sql))
    numbers = _numbers(rows)
    if hold is not None:
        continues = (
            session is not None
            and not session.busy  # (what a failed batch left in it was rolled back in the database)
            and (session.next_id, session.cut) == (hold["next"], hold["cut"])
            and (remaining is not None or not more)  # (the last batch need not say 0)
            and numbers is not None
            and numbers[0] == session.prefix
            and numbers[1][0] > session.number
        )
        if not continues:
            settle(sql)
            return None
    else:
        if (
            remaining is None
            or not more
            or numbers is None
            or len(rows) + remaining <= memory.retention
            or getattr(sql, "many", None) is None
            or rows_of(sql, "SELECT 1 FROM messages LIMIT 1")
            or memory.state(PENDING) is not None
        ):
            return None
        first = counter(sql) + 1
        session = _Session(next_id=first, cut=first - 1, prefix=numbers[0], number=-1)
        hold = {"next": first, "cut": first - 1, "blobs": []}
        try:
            _SESSIONS[sql] = session
        except TypeError:  # a storage that cannot be weakly referenced: no session, no hold
            return None
        forget_settled(sql)
    assert session is not None and numbers is not None
    return _batch(memory, session, hold, messages, rows, numbers[1], more, remaining)


def _batch(
    memory: ChatMemory,
    s: _Session,
    hold: Hold,
    messages: list[wire.ImportedMessage],
    rows: list[tuple[Any, ...]],
    numbers: list[int],
    more: bool,
    remaining: int | None,
) -> wire.ImportAnswer:
    """One batch of a hold: as `bulk.import_messages` stores it, less the rows to hold."""
    sql, first = memory.sql, s.next_id
    s.busy = True
    last = first + len(rows) - 1
    gone = s.cut  # the import without the hold has deleted the rows up to here, none after
    # Facts in order, as they are applied once the batch's rows are in (an earlier message
    # of the same author, when it is still there, is what a correction corrects).
    follows: list[tuple[int, str] | None] = []  # the newest user message before each one
    ids, said, apply_facts = s.ids, s.said, memory.apply_facts
    for k, (role, author, author_id, text, ts, message_id, _) in enumerate(rows):
        new_id = first + k
        ids[message_id] = (new_id, author_id)
        follows.append(s.last_user)
        if role == "user":
            prior = said.get(s.last_user[1]) if s.last_user is not None else None
            chat_before = (
                (prior[1], s.last_user[1]) if prior and s.last_user and prior[0] == s.last_user[0] else None
            )
            if (
                not states_nothing(text)
                or may_answer(text, chat_before[0] if chat_before else None)
                or may_address(text)
            ):
                before = said.get(author_id)  # their previous message, if it is still there
                previous = before[1] if before is not None and before[0] > gone else None
                apply_facts(text, author, author_id, new_id, ts, previous, chat_before)
            said[author_id] = (new_id, text)
            s.last_user = (new_id, author_id)
    # (id, length) of the newest rows: SQLite's length() stops at a NUL
    s.recent.extend(
        (first + k, len(row[3]) if "\0" not in row[3] else row[3].index("\0"))
        for k, row in enumerate(rows[-_NEWEST:], len(rows) - min(len(rows), _NEWEST))
    )
    out = []
    for k, (m, row) in enumerate(zip(messages, rows, strict=True)):
        answers = row[6]
        if row[0] == "assistant" and answers is None:  # as `bulk.attribute_replies` says
            asked = m.get("reply_to_message_id")
            if asked and not m.get("reply_to_author_id"):
                target = s.ids.get(asked)
                answers = (target[1] or None) if target is not None and target[0] > gone else None
            before = follows[k]
            if answers is None and before is not None and before[0] > gone:
                answers = before[1] or None
        out.append((first + k, *row[:6], answers))
    # The rows that will be gone when the import ends, if the hint is right, are held.
    keep_from = last + (remaining or 0) - memory.retention + 1
    kept = [row for row in out if row[0] >= keep_from]
    many: Callable[[str, list[tuple[Any, ...]]], None] = getattr(sql, "many")  # noqa: B009 (a hold has it)
    if kept:
        many(HELD_INSERT, kept)
    else:
        _use_ids_upto(sql, last)
    add_pending(sql, first, last)
    s.cut = _archive_and_retain(memory, s, last, len(rows))
    if s.cut > gone:
        sql.exec("DELETE FROM messages WHERE id <= ?", s.cut)  # rows stored on an earlier, bigger hint
    blobs = []
    for lo, hi in hold["blobs"]:
        if hi <= s.cut:
            sql.exec("DELETE FROM state WHERE key = ?", f"{HELD}{lo}")
        else:
            blobs.append([lo, hi])
    held_rows = [row for row in out if row[0] < keep_from and row[0] > s.cut]
    if held_rows:
        blob = json.dumps(held_rows, ensure_ascii=False, check_circular=False, separators=(",", ":"))
        memory.set_state(f"{HELD}{held_rows[0][0]}", blob)
        blobs.append([held_rows[0][0], held_rows[-1][0]])
    s.next_id, s.number, s.busy = last + 1, numbers[-1], False
    memory.set_state(HOLD, json.dumps({"next": s.next_id, "cut": s.cut, "blobs": blobs}))
    if not more:  # its end: what would still be there is written (nothing, when the hint was right)
        settle(sql)
        build_pending(sql, memory.retrieval)
    return {"imported": len(rows), "skipped": 0}


def _archive_and_retain(memory: ChatMemory, s: _Session, last: int, stored: int) -> int:
    """`archive_backlog` and `apply_retention` after a batch, as the archive without the hold has
    them (its rows: every id after the cut up to `last`); the new cut."""
    upto = memory.summarized_upto()
    newest = [row for row in reversed(s.recent) if row[0] > upto and row[0] > s.cut]
    mark = archive_mark(newest[:_NEWEST], 1, min(IMPORT_TAIL, BATCH_MESSAGES), KEEP_UNSUMMARIZED)
    if mark is not None:
        memory.set_state("summarized_upto", str(mark))
        upto = mark
    excess = min(last - s.cut - memory.retention, max(stored, RETENTION_STEP))
    if excess <= 0:
        return s.cut
    drop_counts(memory.sql)  # as `unindex_upto` does; its statements find no indexed row (all pending)
    # The `excess`-th summarized row after the cut, or the mark when there are fewer.
    return max(s.cut, s.cut + excess if s.cut + excess <= upto else upto)


def _numbers(rows: list[tuple[Any, ...]]) -> tuple[str, list[int]] | None:
    """The prefix and the increasing numbers of the batch's message_ids, or None."""
    mids = [row[5] or "" for row in rows]
    bare = "".join(mids)
    if bare.isdecimal() and bare.isascii() and all(mids) and all(m[0] != "0" for m in mids):  # most: numbers
        plain = list(map(int, mids))
        return ("", plain) if all(map(int.__lt__, plain, plain[1:])) else None
    prefix: str | None = None
    numbers: list[int] = []
    for row in rows:
        mid = row[5] or ""
        if mid.isdecimal() and mid.isascii() and (mid[0] != "0" or mid == "0"):  # most: a bare number
            found_prefix, number = "", int(mid)
        else:
            found = _MESSAGE_ID.fullmatch(mid)
            if found is None:
                return None
            found_prefix, number = found[1], int(found[2])
        if (prefix is not None and found_prefix != prefix) or (numbers and number <= numbers[-1]):
            return None
        prefix = found_prefix
        numbers.append(number)
    return (prefix, numbers) if prefix is not None else None


def counter(sql: SqlStorage) -> int:
    """The newest id the messages table ever gave (its AUTOINCREMENT counter; 0 before any)."""
    found = rows_of(sql, "SELECT seq FROM sqlite_sequence WHERE name = 'messages'")
    return int(found[0][0]) if found else 0


def _use_ids_upto(sql: SqlStorage, last: int) -> None:
    """Advance the AUTOINCREMENT counter to `last`, as storing rows up to that id would."""
    if rows_of(sql, "SELECT 1 FROM sqlite_sequence WHERE name = 'messages'"):
        sql.exec("UPDATE sqlite_sequence SET seq = ? WHERE name = 'messages'", last)
    else:
        sql.exec("INSERT INTO sqlite_sequence(name, seq) VALUES ('messages', ?)", last)
