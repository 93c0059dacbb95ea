"""`remaining` on an import's batches (issue 22): rows the import deletes itself are held, not
written, and the database is exactly the one the same import without the hint gives.

Each case imports the same batches into two chats, one with `remaining` on each batch and
one without, and compares everything the chat keeps (every column of messages, facts and
state, the ids' counter and the full-text index), across seeds, batch sizes, bot answers to
deleted and kept messages, corrections, long texts, rows already in the chat, re-imports,
and hints that are wrong: too big, too small, changing, or a client that stops (then
whatever reads the chat next settles the hold). A small retention cap stands for the 50,000.
"""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_engine import ChatMemory
from memory_engine.imports import hold as import_hold
from memory_engine.index.pending import HOLD, ensure_indexed, ensure_settled
from memory_worker.local import EmbeddedMemoryHost, SqliteStorage

CAP = 60
SAYS = ["I live in Lisbon", "I live in Porto", "my favorite food is pizza", "I work as a nurse"]
SAYS += [
    "sorry, Osaka",
    "no wait, Oslo",
    "I mean Rome",
    "my favorite food is ramen",
    "I have a dog named Rex",
]


def history(n: int, seed: int, prefix: str = "h", start: int = 0) -> list[dict[str, Any]]:
    """n messages by three people and a bot; facts, corrections, long texts, answers to earlier ones."""
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    quiet = 0  # a stretch of bot messages only: the last person's message may be gone by then
    for i in range(start, start + n):
        who = rnd.choice(["ann", "bob", "cy", ""]) if rnd.random() > 0.03 else "dee"  # dee: rarely
        quiet = quiet - 1 if quiet > 0 else (rnd.randint(60, 200) if rnd.random() < 0.01 else 0)
        role = "assistant" if quiet or rnd.random() < 0.25 else "user"
        text = rnd.choice(SAYS) if rnd.random() < 0.4 else f"trail summit ferry w{i}"
        if rnd.random() < 0.05:
            text = "long " * rnd.randint(300, 3000)  # past the archive's characters per call
        m = {
            "role": role,
            "text": text,
            "author": "Bot" if role == "assistant" else who.title(),
            "author_id": "" if role == "assistant" else who,
            "message_id": f"{prefix}{i}",
            "ts": f"2021-{1 + i % 12:02d}-0{1 + i % 9}T10:00:00.000Z",
        }
        if role == "assistant" and out and rnd.random() < 0.6:
            m["reply_to_message_id"] = rnd.choice(out[-rnd.choice([3, 40, 200]) :])["message_id"]
        if role == "assistant" and rnd.random() < 0.1:
            m["reply_to_author_id"] = "bob"
        out.append(m)
    return out


def chat(cap: int = CAP) -> ChatMemory:
    return ChatMemory(SqliteStorage(":memory:"), retention=cap)


def dump(m: ChatMemory) -> dict[str, Any]:
    """Everything the chat keeps, once what an import left pending is settled and indexed."""
    ensure_settled(m.sql)
    ensure_indexed(m.sql)
    sql = m.sql
    return {
        "messages": sql.rows("SELECT * FROM messages ORDER BY id"),
        "facts": sql.rows("SELECT * FROM facts ORDER BY id"),
        "state": sql.rows("SELECT key, value FROM state WHERE key != 'schema' ORDER BY key"),
        "counter": sql.rows("SELECT name, seq FROM sqlite_sequence ORDER BY name"),
        "index": sql.rows("SELECT rowid, * FROM messages_fts ORDER BY rowid"),
    }


Batches = list[list[dict[str, Any]]]


def send(m: ChatMemory, parts: Batches, hints: list[int | None] | None, stop: int | None = None) -> list[Any]:
    """Import the batches (`more` on all but the last; `hints`: each one's `remaining`); the answers."""
    answers = []
    for n, part in enumerate(parts[:stop]):
        more = n < len(parts) - 1
        answers.append(m.import_messages(part, more=more, remaining=None if hints is None else hints[n]))
    return answers


def cut(messages: list[dict[str, Any]], sizes: list[int]) -> list[list[dict[str, Any]]]:
    parts, at = [], 0
    while at < len(messages):
        size = sizes[len(parts) % len(sizes)]
        parts.append(messages[at : at + size])
        at += size
    return parts


def true_hints(parts: list[list[dict[str, Any]]], last: int | None = 0) -> list[int | None]:
    """Each batch's `remaining`; the last one's is `last` (`chatbot import` sends none there)."""
    left = sum(len(p) for p in parts)
    out: list[int | None] = []
    for part in parts:
        left -= len(part)
        out.append(left)
    return [*out[:-1], last]


def same(parts, hints, stop=None, before=None, cap=CAP) -> dict[str, Any]:
    """Import into a plain chat and a hinted one (after `before` batches in both); both dumps equal."""
    plain, hinted = chat(cap), chat(cap)
    for m in (plain, hinted):
        for batch in before or []:
            m.import_messages(batch)
    plain_answers = send(plain, parts, None, stop)
    hinted_answers = send(hinted, parts, hints, stop)
    assert hinted_answers == plain_answers
    expected = dump(plain)
    assert dump(hinted) == expected
    assert not hinted.sql.rows("SELECT key FROM state WHERE key LIKE 'import_hel%' OR key = ?", HOLD)
    return expected


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sizes", [[7], [25], [40, 3, 26], [200]])
@pytest.mark.parametrize("cap", [CAP, 12])  # 12: fewer than the archive leaves un-summarized
def test_the_hinted_import_keeps_exactly_what_the_plain_one_does(seed, sizes, cap):
    parts = cut(history(500 + seed * 37, seed), sizes)
    kept = same(parts, true_hints(parts, last=None if seed % 2 else 0), cap=cap)
    assert len(kept["messages"]) <= 30 + cap and kept["facts"]  # the cap cut it, facts outlive it


@pytest.mark.parametrize("last", [0, None])
def test_the_hint_saves_the_rows_the_cap_deletes(last):
    parts = cut(history(400, 1), [20])
    m, writes = chat(), []
    rows = "INSERT INTO messages("
    m.sql.conn.set_trace_callback(lambda s: writes.append(s) if s.startswith(rows) else None)
    send(m, parts, true_hints(parts, last))
    inserted = len(writes)  # executemany traces once per row
    assert inserted <= CAP, inserted  # the kept rows, not 400
    assert dump(m) == same(parts, true_hints(parts, last))


@pytest.mark.parametrize("stop", [1, 3, 9, 14])
@pytest.mark.parametrize("wrong", ["too big", "too small", "changing", "true"])
def test_a_wrong_hint_or_a_client_that_stops_loses_nothing(stop, wrong):
    parts = cut(history(300, 7), [20])
    hints = true_hints(parts)
    if wrong == "too big":
        hints = [h + 10_000 if h is not None else None for h in hints]
    elif wrong == "too small":
        hints = [(h or 0) // 3 for h in hints]
    elif wrong == "changing":
        hints = [(h or 0) + (500 if n % 2 else 0) for n, h in enumerate(hints)]
    same(parts, hints, stop=stop)  # the rest never comes: what reads next settles the hold
    same(parts, hints)


def test_rows_already_in_the_chat_and_a_second_import_are_stored_as_always():
    parts = cut(history(300, 4), [30])
    same(parts, true_hints(parts), before=[history(10, 9, prefix="x")])
    plain, hinted = chat(), chat()
    for m, hints in ((plain, None), (hinted, true_hints(parts))):
        send(m, parts, hints)
        send(m, parts, hints)  # again: over the cap, forgotten ids come back
    assert dump(hinted) == dump(plain)


def test_a_restarted_host_settles_the_hold_before_the_next_batch():
    parts = cut(history(300, 5), [25])
    hints = true_hints(parts)
    plain, hinted = chat(), chat()
    send(plain, parts, None)
    for n, part in enumerate(parts):
        if n == 4:
            import_hold._SESSIONS.clear()  # what the process knew is gone; the database is not
            assert hinted.state(HOLD) is not None
        hinted.import_messages(part, more=n < len(parts) - 1, remaining=hints[n])
    assert dump(hinted) == dump(plain)


def test_message_ids_that_do_not_increase_are_never_held():
    messages = history(300, 6)
    for n, m in enumerate(messages):
        m["message_id"] = f"h{(n * 7919) % 300}"  # all different, out of order
    parts = cut(messages, [20])
    m = chat()
    send(m, parts[:3], true_hints(parts)[:3])
    assert m.state(HOLD) is None and len(m.sql.rows("SELECT id FROM messages")) == 60
    same(parts, true_hints(parts))


async def test_over_http_the_hinted_import_equals_the_plain_one(tmp_path):
    """The route takes `remaining`; a turn after an unfinished hinted import sees it settled."""
    parts = cut(history(300, 8), [40])
    hints = true_hints(parts)
    dumps = []
    for name, with_hint in (("plain", False), ("hinted", True)):
        async with (
            EmbeddedMemoryHost(tmp_path / name, token="t", summarizer=None, retention=CAP) as host,
            httpx.AsyncClient(base_url=host.url, headers={"authorization": "Bearer t"}) as http,
        ):
            for n, part in enumerate(parts[:5]):
                body: dict[str, Any] = {"messages": part, "more": True}
                if with_hint:
                    body["remaining"] = hints[n]
                answer = await http.post("/v1/chats/telegram:-5/import", json=body)
                assert answer.status_code == 200 and answer.json()["imported"] == len(part)
            bad = await http.post("/v1/chats/telegram:-5/import", json={"messages": [], "remaining": -1})
            assert bad.status_code == 400 and "remaining" in bad.json()["error"]
            seen = []
            for path, query in [
                ("search", {"q": "ferry summit", "k": 50}),
                ("export", {}),
                ("facts", {"history": "true"}),
                ("stats", {}),
                ("summary", {}),
            ]:
                answer = await http.get(f"/v1/chats/telegram:-5/{path}", params=query)
                assert answer.status_code == 200, answer.text
                got = answer.json()
                got.get("export", {}).pop("generated_at", None)  # the time of the export
                seen.append(got)
            dumps.append(seen)
    assert dumps[0] == dumps[1]
    assert len(dumps[1][0]["results"]) > 10 and dumps[1][3]["total_messages"] == CAP


def test_a_batch_that_fails_midway_and_is_sent_again_changes_nothing():
    """The transaction rolls back what the batch did; the hold's memory of it is not trusted."""

    def said(i: int, who: str, text: str, role: str = "user") -> dict[str, Any]:
        m = {"role": role, "text": text, "author": who.title(), "author_id": who, "message_id": f"h{i}"}
        return m | {"ts": f"2021-03-0{1 + i % 9}T10:00:00.000Z"}

    messages = [said(i, "dee", f"trail summit w{i}") for i in range(300)]
    messages[240] = said(240, "ann", "I live in Lisbon")
    messages[249] = said(249, "bob", "who is coming")
    messages[250] = said(250, "", "noted", role="assistant")  # answers bob, the last before it
    messages[251] = said(251, "ann", "sorry, Osaka")  # corrects 240
    messages[260] = said(260, "ann", "I like tea")
    messages[265] = said(265, "cy", "the ferry at nine")  # the batch fails here, once
    parts = cut(messages, [25])  # batch 10 is 250-274, kept by the cap of 60
    hints = true_hints(parts, last=None)
    dumps = []
    for with_hint in (False, True):
        m = chat()
        for n, part in enumerate(parts):
            more, remaining = n < len(parts) - 1, hints[n] if with_hint else None
            if n == 10:
                real = m.apply_facts

                def failing(text, *args, real=real):
                    if text == "the ferry at nine":
                        raise OSError("disk full")  # what a host can meet midway
                    return real(text, *args)

                m.apply_facts = failing  # type: ignore[method-assign]
                with pytest.raises(OSError):
                    m.import_messages(part, more=more, remaining=remaining)
                del m.apply_facts
            m.import_messages(part, more=more, remaining=remaining)  # the client sends it again
        dumps.append(dump(m))
    assert dumps[1] == dumps[0] and len(dumps[0]["messages"]) == CAP
    assert ("ann", "location", "Osaka") in [(f[2], f[3], f[4]) for f in dumps[0]["facts"]]


async def test_a_person_forgotten_during_a_hinted_import_is_gone_from_the_files(tmp_path):
    """/forgetme between two batches: the held rows of that person are gone too, never written
    back by a later batch, the import's end or the host's close (nor left in the file's pages)."""
    messages = history(400, 11)
    for i, m in enumerate(messages):
        if m["author_id"] == "ann" and i < 240:
            m["text"] = f"zqann secret {i}"
        elif m["text"].startswith("long "):  # the summary the forget rebuilds stays in the host's process
            m["text"] = f"trail summit ferry w{i}"
    later = [m for m in messages[240:] if m["author_id"] != "ann"]
    for m in later:
        m.pop("reply_to_author_id", None)
    parts = [*cut(messages[:240], [40]), *cut(later, [40])]
    hints = true_hints(parts)
    for name, with_hint in (("plain", False), ("hinted", True)):
        async with (
            EmbeddedMemoryHost(tmp_path / name, token="t", summarizer=None, retention=CAP) as host,
            httpx.AsyncClient(base_url=host.url, headers={"authorization": "Bearer t"}) as http,
        ):
            for n, part in enumerate(parts):
                if n == 6:  # the first 240 are in: most of them held (the import says 160 follow)
                    assert holds(tmp_path / name) == with_hint
                    gone = await http.delete("/v1/chats/telegram:-5/authors/ann")
                    assert gone.status_code == 200, gone.text
                    assert not holds(tmp_path / name) and not secret_in(tmp_path / name)
                body: dict[str, Any] = {"messages": part, "more": n < len(parts) - 1}
                if with_hint:
                    body["remaining"] = hints[n]
                answer = await http.post("/v1/chats/telegram:-5/import", json=body)
                assert answer.status_code == 200, answer.text
            export = (await http.get("/v1/chats/telegram:-5/export")).text
            assert "zqann" not in export and "trail summit" in export
        assert not holds(tmp_path / name)
        assert not secret_in(tmp_path / name)


def secret_in(folder: Path) -> list[Path]:
    """The files under `folder` (databases, their WAL) holding any byte of ann's secrets."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    return [p for p in files if b"zqann" in p.read_bytes()]


def holds(folder: Path) -> bool:
    """Whether a chat's database under `folder` holds rows of an import (read beside the host)."""
    for path in folder.rglob("*.sqlite3"):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'state'").fetchall()
            if tables and db.execute("SELECT 1 FROM state WHERE key LIKE 'import_held:%'").fetchall():
                return True
    return False


@pytest.mark.parametrize("settle", [ensure_settled, ensure_indexed])
def test_a_hold_settled_by_anything_else_leaves_no_notes_in_the_process(settle):
    """What the host noted of the import (each author's last words, whom each message_id is by)
    goes with the hold: a /forgetme that settles it leaves none of their words in the process."""
    parts = cut(history(300, 3), [40])
    m = chat()
    for part, left in zip(parts[:4], true_hints(parts), strict=False):
        m.import_messages(part, more=True, remaining=left)
    assert m.state(HOLD) is not None and m.sql in import_hold._SESSIONS
    settle(m.sql)
    m.forget_author("ann")
    assert m.state(HOLD) is None and m.sql not in import_hold._SESSIONS


class _Unreferenced:
    """A storage that cannot be weakly referenced (and has no `many`: it never holds)."""

    __slots__ = ("inner",)

    def __init__(self) -> None:
        self.inner = SqliteStorage(":memory:")

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        return self.inner.exec(query, *params)

    def transaction(self, fn: Any) -> Any:
        return self.inner.transaction(fn)


def test_settling_a_storage_that_cannot_be_weakly_referenced():
    """`ensure_indexed` settles on any storage (pending_index's weak sets allow for one that
    cannot be weakly referenced; dropping a hold's session must too)."""
    m = ChatMemory(_Unreferenced(), retention=CAP)  # type: ignore[arg-type]
    ensure_indexed(m.sql)
    assert m.search("ferry summit")["results"] == [] and m.state(HOLD) is None


EVENTS = ["forget", "retry", "retry_prev", "turn", "search", "restart", "indexed", "other", "ahead"]


@pytest.mark.parametrize("seed", range(len(EVENTS)))
def test_anything_between_two_batches_of_a_hold_leaves_the_chat_as_without_the_hint(seed):
    """Between batches, at random: /forgetme, the same batch or the one before sent again, a live
    turn, a search, a restarted host, the idle index build, a second import (another prefix, or
    ids far ahead). Both chats end the same (a fixed clock: the turn's facts carry its time)."""
    rnd = random.Random(seed)
    parts = cut(history(rnd.randint(300, 600), seed), [rnd.choice([5, 20, 40])])
    hints = true_hints(parts, last=rnd.choice([0, None]))
    half = len(parts) // 2
    events = {rnd.randrange(1, half): EVENTS[seed], rnd.randrange(half, len(parts) - 1): EVENTS[seed - 4]}
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    dumps, during = [], set()
    for h in (None, hints):
        m = ChatMemory(SqliteStorage(":memory:"), clock=lambda: clock, retention=CAP)
        for n, part in enumerate(parts):
            more, left = n < len(parts) - 1, None if h is None else h[n]
            m.import_messages(part, more=more, remaining=left)
            event = events.get(n)
            if event and h is not None and m.state(HOLD) is not None:
                during.add(event)
            if event in ("forget", "turn", "search"):
                ensure_settled(m.sql)  # as http_api.execute does before any route but an import
            if event == "forget":
                m.forget_author(["ann", "bob", "cy"][n % 3])
            elif event == "retry":
                m.import_messages(part, more=more, remaining=left)
            elif event == "retry_prev" and n:
                m.import_messages(parts[n - 1], more=more, remaining=None if h is None else h[n - 1])
            elif event == "turn":
                m.turn("I live in Paris", "Zed", "zed", message_id=f"live{n}")
            elif event == "search":
                m.search("ferry")
            elif event == "restart":
                import_hold._SESSIONS.clear()
            elif event == "indexed":
                ensure_indexed(m.sql)
            elif event == "other":
                m.import_messages(
                    history(30, n, prefix="x", start=n * 100), more=True, remaining=None if h is None else 500
                )
            elif event == "ahead":
                m.import_messages(
                    history(30, n, start=5000 + n * 100), more=True, remaining=None if h is None else 300
                )
        dumps.append(dump(m))
    assert dumps[0] == dumps[1]
    assert EVENTS[seed] in during  # the first one met a hold
