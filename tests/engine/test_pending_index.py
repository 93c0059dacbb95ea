"""Deferred indexing of imports (`more`): the same index as indexing each batch, never unsearchable.

An import whose batches say `more` stores rows without indexing them and builds their index
once, with its last batch. Each test compares against the eager path (every batch indexed as
it comes) and against the index rebuilt from scratch over the archive as it is: same FTS
rows, neighbours across batch boundaries and the retention cut included. The engine runs on
the local host's SqliteStorage, in memory or on a file (the crash cases reopen it).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_engine import ChatMemory
from memory_engine.index import retrieval
from memory_engine.index.pending import PENDING
from memory_worker.local import EmbeddedMemoryHost, SqliteStorage
from tests.support import bulk_indexed, ids_of

LISTING = "SELECT rowid, body, author, context_before, context_after, date FROM messages_fts ORDER BY rowid"
WORDS = [
    "trail",
    "summit",
    "water",
    "map",
    "station",
    "rain",
    "boots",
    "tent",
    "coffee",
    "ferry",
    "bike",
    "route",
    "photo",
    "river",
    "bridge",
]


def chat(path: Path | None = None, retention: int = 10_000) -> ChatMemory:
    """A chat memory over SqliteStorage (a file when given), with a retention cap."""
    return ChatMemory(SqliteStorage(":memory:" if path is None else path), retention=retention)


def history(n: int, seed: int = 3, start: int = 0) -> list[dict[str, Any]]:
    """n imported messages by three people (and some bot answers), with ids and month-spread ts."""
    rnd = random.Random(seed)
    out = []
    for i in range(start, start + n):
        who = rnd.choice(["ann", "bob", "cy"])
        role = "assistant" if rnd.random() < 0.2 else "user"
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 8)))
        out.append(
            {
                "role": role,
                "text": f"{words} w{i}",
                "author": "bot" if role == "assistant" else who.title(),
                "author_id": "" if role == "assistant" else who,
                "message_id": f"h{i}",
                "ts": f"2021-{1 + i % 12:02d}-0{1 + i % 9}T10:00:00.000Z",
            }
        )
    return out


def batches(messages: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """The messages cut into batches of `size`."""
    return [messages[i : i + size] for i in range(0, len(messages), size)]


def import_all(m: ChatMemory, messages: list[dict[str, Any]], size: int, deferred: bool) -> None:
    """Import in batches: each indexed as it comes (eager), or `more` on all but the last."""
    parts = batches(messages, size)
    for n, part in enumerate(parts):
        m.import_messages(part, more=deferred and n < len(parts) - 1)


def listing(m: ChatMemory) -> list[dict[str, Any]]:
    """Every FTS row, by rowid."""
    return m.sql.exec(LISTING)


def count(m: ChatMemory, where: str = "1") -> int:
    """How many stored messages match `where`."""
    return int(m.sql.exec(f"SELECT COUNT(*) AS n FROM messages WHERE {where}")[0]["n"])


def rebuilt(m: ChatMemory) -> list[dict[str, Any]]:
    """The FTS rows a from-scratch index of the archive as it is now would hold (m is left as it was).

    Up to m's newest indexed message: a live chat's newest messages wait for a batch (the tail).
    """
    upto = retrieval.indexed_upto(m.sql)
    return [r for r in listing(bulk_indexed(m)) if r["rowid"] <= upto]


def pending_of(m: ChatMemory) -> str | None:
    """The chat's pending-index mark (None: nothing pending)."""
    rows = m.sql.exec("SELECT value FROM state WHERE key = ?", PENDING)
    return rows[0]["value"] if rows else None


@pytest.mark.parametrize("size", [7, 40, 1000])
def test_a_deferred_import_indexes_exactly_what_indexing_each_batch_does(size):
    messages = history(300)
    eager, deferred = chat(), chat()
    for m in (eager, deferred):  # a live chat before the import: its last row gains the import's words
        m.turn("before the import we talked about kayaks", author="Ann", author_id="ann", message_id="live")
    import_all(eager, messages, size, deferred=False)
    import_all(deferred, messages, size, deferred=True)
    assert pending_of(deferred) is None
    assert listing(deferred) == listing(eager) == rebuilt(eager)
    assert len(listing(deferred)) == 301
    assert "w0" in listing(deferred)[0]["context_after"]  # the live row's after-context


def test_rows_stay_out_of_the_index_until_the_last_batch():
    m = chat()
    parts = batches(history(60), 20)
    m.import_messages(parts[0], more=True)
    m.import_messages(parts[1], more=True)
    assert listing(m) == [] and pending_of(m) == "1:40"
    m.import_messages(parts[2])
    assert pending_of(m) is None and len(listing(m)) == 60


@pytest.mark.parametrize("retention", [25, 130, 299])
def test_the_retention_cut_during_a_deferred_import_leaves_the_eager_index(retention):
    # The cap deletes rows while they are pending, indexed rows before them, or both.
    messages = history(400, seed=5)
    eager, deferred = chat(retention=retention), chat(retention=retention)
    for m in (eager, deferred):
        m.import_messages(history(50, seed=9, start=1000))  # indexed before the import
    import_all(eager, messages, 37, deferred=False)
    import_all(deferred, messages, 37, deferred=True)
    assert count(deferred) == count(eager) < 450
    assert listing(deferred) == listing(eager) == rebuilt(deferred)
    assert len(listing(deferred)) == count(deferred)


def test_a_crash_between_batches_leaves_the_rows_searchable_after_a_reopen(tmp_path):
    path = tmp_path / "chat.sqlite3"
    messages = history(120)
    m = chat(path)
    m.import_messages(messages[:50], more=True)
    m.import_messages(messages[50:100], more=True)
    m.sql.conn.close()  # the host dies: its last batch never comes
    again = chat(path)
    assert pending_of(again) == "1:100" and listing(again) == []
    # The first read builds the pending index, then answers: the imported words are found.
    assert ids_of(again, "w77")[0] == "h77"
    assert pending_of(again) is None and listing(again) == rebuilt(again)
    # The client comes back and sends the rest (a repeat of the second batch among it).
    again.import_messages(messages[50:])
    assert len(listing(again)) == 120 and listing(again) == rebuilt(again)
    eager = chat()
    eager.import_messages(messages)
    # The same rows but for their ids (the repeats used up some): same words, same neighbours.
    assert [{**r, "rowid": 0} for r in listing(again)] == [{**r, "rowid": 0} for r in listing(eager)]


def test_search_and_turn_right_after_a_batch_with_more_find_its_messages():
    m = chat()
    zeppelin = {"role": "user", "text": "the zeppelin lands at noon", "message_id": "z"}
    m.import_messages([*history(30), zeppelin], more=True)
    assert ids_of(m, "zeppelin")[0] == "z"  # a read builds what is pending first
    m.import_messages(history(30, start=100), more=True)
    got = m.turn("when does the zeppelin land?", author="Bob", author_id="bob", message_id="q")
    assert [r["message_id"] for r in got["retrieved"]][:1] == ["z"]
    assert pending_of(m) is None and listing(m) == rebuilt(m)


def test_a_reply_after_pending_rows_is_indexed_after_them():
    m = chat()
    m.import_messages(history(30), more=True)
    m.reply("glad to help with the lighthouse", tier="light", model="x", message_id="r")
    assert listing(m) == rebuilt(m) and len(listing(m)) == 30  # the reply waits for a batch (the tail)
    assert ids_of(m, "lighthouse")[:1] == ["r"]  # or for a search
    assert listing(m) == rebuilt(m) and len(listing(m)) == 31


def test_forgetting_a_person_with_pending_rows_leaves_nothing_of_theirs():
    messages = history(200, seed=11)
    messages.insert(120, {"role": "user", "text": "my code is quixotic", "author": "Ann", "author_id": "ann"})
    eager, deferred = chat(retention=150), chat(retention=150)
    parts = batches(messages, 30)
    for m in (eager, deferred):
        for part in parts[:-1]:
            m.import_messages(part, more=m is deferred)
        assert m.forget_author("ann")["messages"] > 10  # in the deferred chat, rows indexed and pending
        assert count(m, "author_id = 'ann'") == 0
    assert pending_of(deferred) is not None
    for m in (eager, deferred):
        m.import_messages([x for x in parts[-1] if x["author_id"] != "ann"])  # builds the index: without her
    assert pending_of(deferred) is None
    assert listing(deferred) == listing(eager) == rebuilt(deferred)
    words = " ".join(" ".join(str(v) for v in r.values()) for r in listing(deferred))
    assert "quixotic" not in words and " w120" in words
    assert ids_of(deferred, "quixotic") == []


@pytest.mark.parametrize("seed", range(12))
def test_forgetting_a_person_indexes_each_survivor_as_a_fresh_index_would(seed):
    # Whoever goes (the newest messages among theirs), each survivor keeps its two nearest
    # surviving messages before it and the one after as context.
    m = chat()
    m.import_messages(history(40, seed=seed))
    rnd = random.Random(seed)
    for i in range(6):  # live turns and answers after the import: the tail a forgetting cuts
        who = rnd.choice(["ann", "bob", "cy"])
        m.turn(f"{rnd.choice(WORDS)} live {i}", author=who.title(), author_id=who, message_id=f"t{seed}-{i}")
        if rnd.random() < 0.5:
            m.reply(f"answer {i}", tier="light", model="x", message_id=f"r{seed}-{i}")
    m.forget_author(rnd.choice(["ann", "bob", "cy"]))
    assert listing(m) == rebuilt(m)


def test_forgetting_the_chat_drops_the_pending_rows_for_good(tmp_path):
    m = chat(tmp_path / "chat.sqlite3")
    vault = {"role": "user", "text": "the vault opens at dawn", "message_id": "v"}
    m.import_messages([*history(40), vault], more=True)
    m.forget_chat()
    assert pending_of(m) is None and listing(m) == []
    assert ids_of(m, "vault") == []
    m.import_messages(history(10, start=500))
    assert len(listing(m)) == 10 and ids_of(m, "vault") == []


def test_repeated_batches_stay_idempotent_by_message_id():
    m = chat()
    messages = history(90)
    m.import_messages(messages[:40], more=True)
    assert m.import_messages(messages[:40], more=True) == {"imported": 0, "skipped": 40}
    assert m.import_messages(messages[30:], more=False) == {"imported": 50, "skipped": 10}
    assert count(m) == 90
    assert listing(m) == rebuilt(m) and len(listing(m)) == 90
    # A last batch of repeats only (a retry after a lost answer) still builds what is pending.
    m.import_messages(history(20, start=300), more=True)
    assert m.import_messages(history(20, start=300)) == {"imported": 0, "skipped": 20}
    assert pending_of(m) is None and len(listing(m)) == 110
    # An empty last batch (the import's size was a multiple of the batch size) closes it too.
    m.import_messages(history(20, start=400), more=True)
    assert m.import_messages([]) == {"imported": 0, "skipped": 0}
    assert pending_of(m) is None and len(listing(m)) == 130


async def test_the_local_host_indexes_an_import_left_idle(tmp_path):
    # A client that stops sending after a batch with `more`: the host indexes what it stored
    # once the import has been idle (index_idle_s; 30 s by default), before any read asks.
    async with EmbeddedMemoryHost(tmp_path, summarizer=None) as host:
        assert host.host is not None
        headers = {"authorization": f"Bearer {host.token}"}
        async with httpx.AsyncClient(base_url=host.url, headers=headers) as http:
            host.host.index_idle_s = 3600.0
            body = {"messages": history(40), "more": True}
            assert (await http.post("/v1/chats/c1/import", json=body)).status_code == 200
            memory = host.host.store.open("c1")
            assert pending_of(memory) == "1:40" and listing(memory) == []
            host.host.index_idle_s = 0.0  # the next batch with `more` is the last one sent
            body = {"messages": history(10, start=40), "more": True}
            assert (await http.post("/v1/chats/c1/import", json=body)).status_code == 200
            deadline = asyncio.get_running_loop().time() + 30
            while pending_of(memory) is not None:
                assert asyncio.get_running_loop().time() < deadline, "the idle import was never indexed"
                await asyncio.sleep(0.01)  # polls the host's background work, bounded by the deadline
            assert len(listing(memory)) == 50 and listing(memory) == rebuilt(memory)


@pytest.mark.parametrize("cut", [1, 2, 37, 149, 150])
def test_retention_unindexes_like_the_general_unindex(cut):
    # unindex_upto (retention) against unindex_messages("id <= ?"), the path it replaced.
    a, b = chat(), chat()
    for m in (a, b):
        m.import_messages(history(150, seed=8))
    retrieval.unindex_upto(a.sql, cut)
    retrieval.unindex_messages(b.sql, "id <= ?", cut)
    for m in (a, b):
        m.sql.exec("DELETE FROM messages WHERE id <= ?", cut)
    assert listing(a) == listing(b) == rebuilt(a)
    assert len(listing(a)) == 150 - cut
