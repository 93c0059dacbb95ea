"""Forgetting a person leaves nothing of theirs: not in search, summary, facts, `/why`, nor the file.

The engine runs on a real SQLite file through the local host's `SqliteStorage`, which opens
it with `PRAGMA secure_delete = ON`; the WAL is checkpointed after the forgetting, as the
local host does after one.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_engine import ChatMemory
from memory_engine.compaction.compact import compact_once, offline_summarize
from memory_worker.local import SqliteStorage

# Marta's distinctive words: her name, her dog's, her project's, her street's, her town's.
HERS = ("Marta", "Pimento", "Lumenwick", "Quayside", "Trondheim")
# Bob's: they must all survive her forgetting.
HIS = ("Saffron", "Orrery", "Bergamot")

MARTA = [
    "Hi, my name is Marta.",
    "I live in Trondheim, near the harbour.",
    "My dog Pimento is a very energetic beagle.",
    "I work on a project called Lumenwick, a lamp that follows the sun.",
    "Pimento stole my sandwich again this morning.",
    "Lumenwick needs a new hinge design before Friday.",
    "I walk Pimento along Quayside every evening.",
    "The Lumenwick prototype burned out a resistor.",
    "Trondheim gets so dark in winter, which is why Lumenwick matters to me.",
    "Pimento loves the snow on Quayside.",
]


class Clock:
    """A clock that moves one second per reading (stable, ordered timestamps)."""

    def __init__(self) -> None:
        self.t = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


def secure_storage(path: Path) -> SqliteStorage:
    """The host's storage on a file: freed pages are zeroed (with them not, the file-bytes check fails)."""
    storage = SqliteStorage(path)
    assert storage.exec("PRAGMA secure_delete")[0]["secure_delete"] == 1
    return storage


def group_chat(memory: ChatMemory) -> None:
    """Marta tells the bot about herself over 33 messages, Bob over 9; the bot answers both."""
    for i in range(33):
        mid = f"m{i}"
        memory.turn(MARTA[i % len(MARTA)], author="Marta", author_id="m1", message_id=mid)
        if i % 3 == 0:  # answers naming what she said; one says only whose message it answers
            text = "What I know about you: name: Marta, dog: Pimento, project: Lumenwick (Quayside)."
            if i % 2:
                memory.reply(text, "light", "m", message_id=f"r{mid}", reply_to_message_id=mid)
            else:
                memory.reply(text, "light", "m", reply_to_message_id=mid, reply_to_author_id="m1")
        if i % 4 == 1:
            bid = f"b{i}"
            memory.turn(
                f"Bob here: my cat Saffron knocked over the Orrery model, update {i}.",
                author="Bob",
                author_id="b1",
                message_id=bid,
            )
            memory.reply(
                "Sorry about the Orrery, Bob; Saffron sounds like a Bergamot-scented menace.",
                "light",
                "m",
                reply_to_message_id=bid,
            )
    # The last turn is hers, so `/why` (the last prompt) quotes her.
    memory.turn("Remember Pimento and Lumenwick for me.", author="Marta", author_id="m1", message_id="mlast")


def compact_all(memory: ChatMemory) -> None:
    """Compact until nothing is left to summarize but the newest few."""
    while asyncio.run(compact_once(memory, offline_summarize, force=True)):
        pass


def file_bytes(path: Path) -> bytes:
    """The database file and its WAL, as they are on disk."""
    data = path.read_bytes()
    wal = Path(str(path) + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def dump(path: Path) -> str:
    """`sqlite3`'s SQL dump of the file (shadow tables of the index included)."""
    conn = sqlite3.connect(path)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def found_in(text_or_bytes: str | bytes, word: str) -> bool:
    """The word, in any case, as text or as the hex a dump writes blobs in."""
    if isinstance(text_or_bytes, bytes):
        return word.lower().encode() in text_or_bytes.lower()
    low = text_or_bytes.lower()
    return word.lower() in low or word.lower().encode().hex() in low


def test_forgetting_a_person_leaves_nothing_of_theirs(tmp_path):
    path = tmp_path / "chat.sqlite3"
    storage = secure_storage(path)
    memory = ChatMemory(storage, clock=Clock())
    group_chat(memory)
    compact_all(memory)
    before = memory.summary()["summary"]
    # Everything the test looks for below is there before: each check can fail.
    assert all(w in before for w in ("Pimento", "Lumenwick")), before
    assert all(memory.search(w)["results"] for w in HERS + HIS)
    assert "Pimento" in memory.stats()["last_prompt"]
    assert {f["author_id"] for f in memory.facts(history=True)["facts"]} >= {"m1"}
    assert storage.checkpoint()
    assert all(found_in(file_bytes(path), w) for w in HERS)

    gone = memory.forget_author("m1")
    assert gone["messages"] == 34 and gone["replies"] == 11
    compact_all(memory)  # the summary made again from what remains
    assert storage.checkpoint()

    for word in HERS:
        assert memory.search(word, k=50)["results"] == [], word
    after = memory.summary()["summary"]
    assert after and not any(found_in(after, w) for w in HERS), after
    assert all(f["author_id"] != "m1" for f in memory.facts(history=True)["facts"])
    assert "last_prompt" not in memory.stats()
    asked = memory.turn("What do you remember of everyone here?", author="Bob", author_id="b1", mode="full")
    assert asked["summary"] == after and len(asked["recent"]) == 12
    assert not any(found_in(asked["prompt"], w) for w in HERS)
    assert storage.checkpoint()

    # ... nor anywhere in the file: the SQL dump, the raw bytes of the database and its WAL.
    storage.close()
    text, raw = dump(path), file_bytes(path)
    for word in HERS:
        assert not found_in(text, word), f"{word} in the dump"
        assert not found_in(raw, word), f"{word} in the file bytes"
    # Bob's messages and the bot's replies to him stay, searchable and in the file.
    for word in HIS:
        assert found_in(raw, word)
    reopened = SqliteStorage(path)
    found = ChatMemory(reopened, clock=Clock()).search("Orrery Saffron", k=50)["results"]
    reopened.close()
    assert sum(m["text"].startswith("Bob here") for m in found) == 8
    assert sum(m["text"].startswith("Sorry about the Orrery") for m in found) == 8


def test_a_reply_without_a_named_author_answers_the_newest_user_message(tmp_path):
    memory = ChatMemory(secure_storage(tmp_path / "c.sqlite3"), clock=Clock())
    memory.turn("my dog is called Pimento", author="Marta", author_id="m1", message_id="1")
    memory.reply("Pimento is a fine name", "light", "m")  # said nothing of whom it answers
    memory.turn("my cat is called Saffron", author="Bob", author_id="b1", message_id="2")
    memory.reply("Saffron too", "light", "m", reply_to_message_id="nope")  # unknown message
    memory.import_messages(
        [
            {"role": "user", "text": "Lumenwick ships soon", "author": "Marta", "author_id": "m1"},
            {"role": "user", "text": "Orrery too", "author": "Bob", "author_id": "b1", "message_id": "i2"},
            {"role": "assistant", "text": "good luck with Lumenwick"},  # answers Bob by position...
            {"role": "assistant", "text": "and the Orrery", "reply_to_message_id": "i2"},
            {"role": "assistant", "text": "Lumenwick rocks", "reply_to_author_id": "m1"},
        ]
    )
    assert memory.forget_author("m1")["replies"] == 2
    left = memory.search("Pimento Saffron Lumenwick Orrery", k=50)["results"]
    assert sorted(m["text"] for m in left) == sorted(
        [
            "my cat is called Saffron",
            "Saffron too",
            "Orrery too",
            "good luck with Lumenwick",
            "and the Orrery",
        ]
    )
