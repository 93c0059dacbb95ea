"""An import's rows go in alike through both insert paths: the local host's `many` and JSON chunks.

The local host's SqliteStorage offers `many` (sqlite3 `executemany`); a storage without it
(the Durable Object's) gets one INSERT ... FROM json_each per chunk. Same rows, same ids,
same answers, repeats skipped alike (across batches, inside one batch, and message ids left
out), facts and index included.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from memory_engine import ChatMemory
from memory_worker.local import SqliteStorage

T = TypeVar("T")
ALL = "SELECT * FROM messages ORDER BY id"
FTS = "SELECT rowid, * FROM messages_fts ORDER BY rowid"
FACTS = "SELECT author_id, key, value, source_message, superseded_at FROM facts ORDER BY id"


def CLOCK() -> datetime:
    """A fixed clock: both chats stamp the messages that carry no ts alike."""
    return datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


def numbered(m: ChatMemory) -> tuple[list[dict[str, Any]], ...]:
    """Messages, index rows and facts, each message id replaced by its position."""
    position = {r["id"]: n for n, r in enumerate(m.sql.exec(ALL))}
    messages = [{**r, "id": position[r["id"]]} for r in m.sql.exec(ALL)]
    index = [{**r, "rowid": position[r["rowid"]]} for r in m.sql.exec(FTS)]
    facts = [{**r, "source_message": position.get(r["source_message"], -1)} for r in m.sql.exec(FACTS)]
    return messages, index, facts


class JsonOnly:
    """SqliteStorage without `many` (nor `rows`): what the Durable Object's storage offers."""

    def __init__(self) -> None:
        self.inner = SqliteStorage(":memory:")

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one statement; rows as dicts."""
        return self.inner.exec(query, *params)

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run fn atomically."""
        return self.inner.transaction(fn)


def batch(rnd: random.Random, start: int, n: int) -> list[dict[str, Any]]:
    """n messages, some repeating an earlier or a same-batch message_id, some without one."""
    out = []
    for i in range(start, start + n):
        r = rnd.random()
        mid = None if r < 0.1 else f"x{rnd.randrange(start)}" if r < 0.25 and start else f"x{i}"
        if 0.25 <= r < 0.3 and out:
            mid = out[-1]["message_id"]  # a repeat inside the batch
        who = rnd.choice(["ann", "bob"])
        text = rnd.choice(
            ["I live in Oslo", "my name is Ann", "I love tea", "sorry, Lisbon", "see the ferry"]
        )
        out.append(
            {
                "role": "user",
                "text": f"{text} {i}",
                "author": who.title(),
                "author_id": who,
                "message_id": mid,
            }
        )
    return out


def test_both_insert_paths_store_the_same_rows_and_answer_alike():
    fast = ChatMemory(SqliteStorage(":memory:"), clock=CLOCK, retention=150)
    plain = ChatMemory(JsonOnly(), clock=CLOCK, retention=150)
    assert hasattr(fast.sql, "many") and not hasattr(plain.sql, "many")
    rnd = random.Random(4)
    start = 0
    for n in (30, 1, 45, 60, 20, 80):
        messages = batch(rnd, start, n)
        more = n != 80
        assert fast.import_messages(messages, more) == plain.import_messages(messages, more)
        start += n
    # Again: the messages without an id are stored again (nothing says they are repeats), and
    # those the retention cap dropped meanwhile (their ids went with them); the rest are skipped.
    unnamed = sum(m["message_id"] is None for m in messages)
    again = fast.import_messages(messages)
    assert again == plain.import_messages(messages) and 0 < unnamed <= again["imported"] < 40
    # The same rows in the same order; the ids may differ (an INSERT that skips a repeat by
    # ON CONFLICT still uses up an id; `many` looks the repeats up first), so they are compared
    # by position, and so are the index's rowids and the facts' source messages.
    assert numbered(fast) == numbered(plain)
    assert len(fast.sql.exec(ALL)) == 150  # the retention cap was reached: rows went in both


def test_message_ids_holding_a_nul_or_any_unicode_are_found_again():
    # The local host's repeat lookup sent the ids as one JSON text to json_each, and SQLite
    # before 3.45 reads "\u0000" there as an empty string: an id holding a NUL was never found,
    # and its INSERT broke the UNIQUE constraint (a 500 for the whole batch; found by the
    # HTTP fuzz soak).
    ids = ["\x00", "a\x00b", "\u2028", "😀", "", "x", "x\x00"]
    messages = [
        {"role": "user", "text": f"t{i}", "author": "A", "author_id": "a", "message_id": mid}
        for i, mid in enumerate(ids)
    ]
    m = ChatMemory(SqliteStorage(":memory:"), clock=CLOCK)
    assert m.import_messages(messages) == {"imported": len(ids), "skipped": 0}
    assert m.import_messages(messages) == {"imported": 0, "skipped": len(ids)}
    assert sorted(r["message_id"] for r in m.sql.exec(ALL)) == sorted(ids)
    assert m.turn("again", message_id="a\x00b")["id"] == 2  # the stored one, not a second
