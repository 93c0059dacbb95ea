"""Deferred indexing: the rows an import stored and has not indexed yet, and building their index.

A batch of an import that says more batches follow (`more`) stores its rows and facts but
leaves them out of the full-text index: the id range it stored is kept in the chat's state
(`index_pending` = "lo:hi"), and the index of whatever is still there is built once, in one
statement, by the import's last batch. Once is cheaper than per batch: FTS5 buffers one big
insert into one segment (fewer merges), and the rows the retention cap deletes during the
import are never indexed, so never unindexed either (26 of 120 us an imported message at
200k, with the 50k cap). Until then the retention and the forgetting leave the pending rows
out of the index's work (`retrieval.unindex_messages`' `pending`), and anything that reads or
extends the index first builds it (`ensure_indexed`): a crash between batches, or a client
that never sends its last one, never leaves a message unsearchable. The rows are indexed
from the archive as it is then, so each one's neighbours are exactly those a live index
would give it (tests/engine/test_pending_index.py).

The newest messages wait too (the tail): up to TAIL_MAX of them, which a turn's retrieval
leaves out anyway (they are among its recent messages), are indexed together when one more
arrives (`index_behind`), each complete (its after-context is the message after it). Each
commit that writes to FTS5 adds a segment and some of FTS5's merge work: writing its message
and updating the previous one's row was 13% of the instructions of a turn at 10k messages
and 60% of the pages it wrote (benchmarks/README.md has the figures). Every message
up to the index's newest row is indexed and none after it (`retrieval.indexed_upto`), so
what waits is a range of ids (`unindexed`) that the forgetting leaves out of its work, as an
import's pending rows. What could find a waiting message indexes the tail first: a search
(`ensure_searchable`), a turn right after a topic start or with a repeated message (the
engine). A message indexed while it was the newest has no after-context: the next message
indexes it again.
"""

from __future__ import annotations

import json
import weakref
from contextlib import suppress
from typing import Any, TypedDict, cast

from memory_engine import chat_state
from memory_engine.index.retrieval import (
    INDEXED_UPTO_SQL,
    SHIPPED,
    RetrievalSettings,
    index_messages,
    indexed_upto,
)
from memory_engine.storage import SqlStorage

PENDING = "index_pending"
# How many of the newest messages may wait out of the index: no more than any mode's recent
# messages (engine.RECENT_BY_MODE, 4 at least), which a turn's retrieval excludes.
TAIL_MAX = 4

# The open databases known to have nothing pending: a turn then reads no state for it. Only
# an import makes rows pending, and it drops its database from here first.
_CLEAN: weakref.WeakSet[SqlStorage] = weakref.WeakSet()


def pending(sql: SqlStorage) -> tuple[int, int] | None:
    """The (lo, hi) ids of the rows an import stored without indexing them, or None."""
    rows = sql.exec("SELECT value FROM state WHERE key = ?", PENDING)
    if not rows or not rows[0]["value"]:
        return None
    lo, _, hi = str(rows[0]["value"]).partition(":")
    return int(lo), int(hi)


def add_pending(sql: SqlStorage, first_id: int, last_id: int) -> None:
    """Mark the rows first_id..last_id as stored and not indexed (after those already pending)."""
    forget_clean(sql)
    span = pending(sql)
    lo = span[0] if span else first_id
    chat_state.put(sql, PENDING, f"{lo}:{last_id}")


def build_pending(sql: SqlStorage, knobs: RetrievalSettings = SHIPPED) -> bool:
    """Index the pending rows that are still stored, in one statement; True when any were pending."""
    span = pending(sql)
    if span is None:
        return False
    lo, hi = span
    # The retention or a forgetting may have deleted the first ones: the window starts at
    # the oldest left, and the message before it gains its words (as a live index links it).
    first = sql.exec("SELECT MIN(id) AS id FROM messages WHERE id >= ? AND id <= ?", lo, hi)[0]["id"]
    if first is not None:
        index_messages(sql, int(first), hi, knobs=knobs)
    sql.exec("DELETE FROM state WHERE key = ?", PENDING)
    return True


def ensure_indexed(sql: SqlStorage, knobs: RetrievalSettings = SHIPPED) -> None:
    """Settle an import's hold and build what it left pending, in its own transaction; call it
    before reading the index.

    Costs nothing once the database is known to have nothing pending. Call it outside any
    transaction: the database is marked as clean only once the build has committed.
    """
    if sql in _CLEAN:  # False for a storage that cannot be weakly referenced
        return
    sql.transaction(lambda: (settle(sql), build_pending(sql, knobs)))
    with suppress(TypeError):  # a storage that cannot be weakly referenced: its state is read each time
        _CLEAN.add(sql)


# The index's newest id and the newest message's id, in one statement (NULL: none).
_ENDS = f"SELECT ({INDEXED_UPTO_SQL}) AS upto, (SELECT MAX(id) FROM messages) AS newest"


def _ends(sql: SqlStorage) -> tuple[int, int]:
    row = sql.exec(_ENDS)[0]
    return int(row["upto"] or 0), int(row["newest"] or 0)


def unindexed(sql: SqlStorage) -> tuple[int, int] | None:
    """The (lo, hi) ids of the messages not in the index yet (an import's pending rows, the tail), or None."""
    upto, newest = _ends(sql)
    return (upto + 1, newest) if newest > upto else None


def index_tail(sql: SqlStorage, below: int | None = None, knobs: RetrievalSettings = SHIPPED) -> int:
    """Index the messages not indexed yet (those below id `below` only, when given, with no
    after-context from it); the index's newest id then."""
    upto, newest = _ends(sql)
    hi = newest if below is None else min(newest, below - 1)
    if hi <= upto:
        return upto
    index_messages(sql, upto + 1, hi, link=False, end=hi, newest=upto, knobs=knobs)
    return indexed_upto(sql)


def ensure_searchable(sql: SqlStorage, knobs: RetrievalSettings = SHIPPED) -> None:
    """`ensure_indexed`, then the tail indexed too, in its own transaction: before a search."""
    ensure_indexed(sql, knobs)
    if unindexed(sql) is not None:
        # A search is a read: when the write fails (a full disk: nothing was written), it
        # still answers, from the rest of the index. (The engine knows no storage's errors.)
        with suppress(Exception):
            sql.transaction(lambda: index_tail(sql, knobs=knobs))


def index_behind(
    sql: SqlStorage, current_id: int, before: list[int], upto: int, knobs: RetrievalSettings = SHIPPED
) -> None:
    """After message `current_id` is stored (a turn's, after its retrieval): index the tail when due.

    `before`: the ids of the messages before it, oldest first (TAIL_MAX of them at least, when
    there are); `upto`: the index's newest id. The message before it, when it was indexed
    while it was the newest, is indexed again with its after-context.
    """
    if not before:
        return
    waiting = [i for i in before if i > upto]
    if before[-1] == upto:
        index_messages(sql, upto, upto, link=False, end=current_id, newest=upto, knobs=knobs)
    elif len(waiting) >= TAIL_MAX or (waiting and len(waiting) == len(before) and waiting[0] > upto + 1):
        index_messages(sql, waiting[0], before[-1], link=False, end=current_id, newest=upto, knobs=knobs)


def index_after_reply(sql: SqlStorage, new_id: int, knobs: RetrievalSettings = SHIPPED) -> None:
    """`index_behind` for a message stored on its own (a reply): reads what it needs."""
    rows = sql.exec("SELECT id FROM messages WHERE id < ? ORDER BY id DESC LIMIT ?", new_id, TAIL_MAX + 1)
    index_behind(sql, new_id, [int(r["id"]) for r in reversed(rows)], indexed_upto(sql), knobs)


def forget_clean(sql: SqlStorage) -> None:
    """Say that the database may have pending rows again (an import is about to store some)."""
    with suppress(TypeError):  # one that cannot be weakly referenced was never added
        _CLEAN.discard(sql)


# -- rows an import held (`imports.hold`): written back when anything else reads the chat -

HOLD = "import_hold"  # state: a Hold as JSON


class Hold(TypedDict):
    """An import's hold: the next id it gives, the cut (rows at or below it go), its blobs' id ranges."""

    next: int
    cut: int
    blobs: list[list[int]]


HELD = "import_held:"  # + a blob's first id: the rows of one batch held, as JSON
HELD_COLUMNS = "id, role, author, author_id, text, ts, message_id, reply_to_author_id"
HELD_INSERT = f"INSERT INTO messages({HELD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
# The databases known to hold no rows of an import (only the local host holds any).
_SETTLED: weakref.WeakSet[SqlStorage] = weakref.WeakSet()
# What a hold's import noted in memory (`imports.hold._Session`: each author's last words, whom
# each message_id is by), dropped with the hold: a /forgetme that settles it leaves none behind.
SESSIONS: weakref.WeakKeyDictionary[SqlStorage, Any] = weakref.WeakKeyDictionary()


def held(sql: SqlStorage) -> Hold | None:
    """The import hold of this database, or None."""
    rows = sql.exec("SELECT value FROM state WHERE key = ?", HOLD)
    return cast(Hold, json.loads(rows[0]["value"])) if rows and rows[0]["value"] else None


def settle(sql: SqlStorage) -> bool:
    """Write back the held rows the archive would still hold (those past the cut), and end the
    hold: the database is then the one the import without it gives. True when there was one."""
    with suppress(TypeError):  # a storage that cannot be weakly referenced never had a session
        SESSIONS.pop(sql, None)
    hold = held(sql)
    if hold is None:
        return False
    many = getattr(sql, "many", None)
    for lo, hi in hold["blobs"]:
        key = f"{HELD}{lo}"
        if hi > hold["cut"]:
            blob = sql.exec("SELECT value FROM state WHERE key = ?", key)[0]["value"]
            rows = [tuple(row) for row in json.loads(blob) if row[0] > hold["cut"]]
            if many is not None:
                many(HELD_INSERT, rows)
            else:  # (only a storage with `many` holds rows)
                for row in rows:
                    sql.exec(HELD_INSERT, *row)
        sql.exec("DELETE FROM state WHERE key = ?", key)
    sql.exec("DELETE FROM state WHERE key = ?", HOLD)
    return True


def ensure_settled(sql: SqlStorage) -> None:
    """`settle` in its own transaction, once per open database; call it before anything but an
    import's next batch reads or changes the chat (outside any transaction)."""
    if sql in _SETTLED or getattr(sql, "many", None) is None:  # the Durable Object never holds
        return
    sql.transaction(lambda: settle(sql))
    with suppress(TypeError):
        _SETTLED.add(sql)


def forget_settled(sql: SqlStorage) -> None:
    """Say that the database may hold rows of an import again (one is about to)."""
    with suppress(TypeError):
        _SETTLED.discard(sql)
