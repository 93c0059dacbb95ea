"""Compaction in the local host, against a fake OpenAI-compatible summarizer over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from memory_engine import ChatMemory
from memory_engine.compaction.compact import (
    BATCH_MESSAGES,
    IMPORT_TAIL,
    KEEP_UNSUMMARIZED,
    MAX_BACKLOG_CALLS,
    SECTIONS,
    SummarizerError,
    alarm_needed,
    commit,
    offline_summarize,
    offline_summary,
    on_alarm,
    prepare,
    summarizer_request,
    validate_summary,
)
from memory_engine.compaction.model_facts import split_reply
from memory_engine.compaction.offline import named_things
from memory_engine.forgetting import RETENTION_STEP
from memory_engine.prompt import HEADER
from memory_worker.local import EmbeddedMemoryHost, SqliteStorage
from tests.fakes.openai_server import Answer, FakeOpenAI, Garbage, Hang, RateLimit, ServerError
from tests.support import wait_until

CHAT = "telegram:-100"


def summary_echo(req) -> Answer:
    """A summarizer that folds every quoted message it was sent into Important Details."""
    user = req.messages[-1]["content"]
    previous = user.split("New messages (JSON lines):")[0]
    lines = [
        json.loads(line)["text"]
        for line in user.split("New messages (JSON lines):\n")[1].splitlines()
        if line.strip()
    ]
    cycle = len(re.findall(r"cycle-mark", previous)) + 1
    details = "\n".join(f"- {t}" for t in lines)
    kept = "\n".join(line for line in previous.splitlines() if line.startswith("- cycle-mark"))
    text = (
        f"{SECTIONS[0]}\n- chat\n\n{SECTIONS[1]}\n{kept}\n- cycle-mark {cycle}\n{details}\n\n"
        f"{SECTIONS[2]}\n- Completed: cycle {cycle}\n\n{SECTIONS[3]}\n- continue\n\n{SECTIONS[4]}\n- None"
    )
    return Answer(text=text)


@asynccontextmanager
async def host_with(fake: FakeOpenAI, data: Path, **kw):
    async with (
        EmbeddedMemoryHost(
            data,
            summary_base_url=fake.url,
            summary_model="light-sum",
            summary_api_key="sk-test",
            summary_timeout_s=kw.pop("timeout", 5.0),
            backoff_base_ms=kw.pop("backoff_base_ms", 1),
            backoff_max_ms=kw.pop("backoff_max_ms", 20),
            **kw,
        ) as host,
        httpx.AsyncClient(
            base_url=host.url, timeout=10, headers={"Authorization": f"Bearer {host.token}"}
        ) as client,
    ):
        yield host, client


async def say(
    client: httpx.AsyncClient, n: int, start: int = 0, author: str = "Ann", author_id: str = "1"
) -> None:
    for i in range(start, start + n):
        r = await client.post(
            f"/v1/chats/{CHAT}/turn",
            json={
                "text": f"note {i} from {author}: word{i}",
                "author": author,
                "author_id": author_id,
                "message_id": f"{author_id}-{i}",
            },
        )
        assert r.status_code == 200, r.text


async def summary_state(client):
    return (await client.get(f"/v1/chats/{CHAT}/summary")).json()


async def stats(client):
    return (await client.get(f"/v1/chats/{CHAT}/stats")).json()


async def test_two_cycles_merge_the_previous_summary_and_keep_five(tmp_path):
    async with FakeOpenAI() as fake:
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 26)
            first = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert first["summarized_upto"] == 21
            assert (await stats(client))["active_messages"] == 5
            for heading in SECTIONS:
                assert heading in first["summary"]
            assert "note 20 from Ann" in first["summary"] and "note 21 from" not in first["summary"]
            await say(client, 21, start=26)
            second = await wait_until(lambda: _compactions(client, 2), timeout=10)
            assert second["summarized_upto"] == 42
            # The second request carried the first summary, and the merge kept it.
            assert "cycle-mark 1" in fake.requests[1].messages[-1]["content"]
            assert "cycle-mark 1" in second["summary"] and "cycle-mark 2" in second["summary"]
            s = await stats(client)
            assert (s["total_messages"], s["active_messages"], s["archived_messages"]) == (47, 5, 42)
            assert fake.requests[0].model == "light-sum"
            assert fake.requests[0].headers.get("Authorization") == "Bearer sk-test"


def slow_until(gate: asyncio.Event):
    """A summarizer that answers `summary_echo` half a second late until `gate` is set: a
    compaction that is still running while the test sends more turns."""

    def slow(req) -> Answer:
        return summary_echo(req) if gate.is_set() else Answer(text=summary_echo(req).text, delay=0.5)

    return slow


async def _compactions(client, n):
    s = await summary_state(client)
    return s if s["compactions"] >= n else None


async def test_the_summary_is_in_the_memory_prompt(tmp_path):
    async with FakeOpenAI() as fake:
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 26)
            await wait_until(lambda: _compactions(client, 1), timeout=10)
            r = (await client.post(f"/v1/chats/{CHAT}/turn", json={"text": "hello again"})).json()
            prompt = r["prompt"]
            assert "Recent messages" not in prompt and prompt.index(HEADER) < prompt.index("## Objective")
            assert "cycle-mark 1" in r["summary"]


@pytest.mark.parametrize(
    "failure",
    [ServerError(500), RateLimit(retry_after=0.01), Garbage(), Answer(text="## Objective\nonly one section")],
    ids=["500", "429", "garbage", "missing-sections"],
)
async def test_a_summarizer_down_for_many_cycles_loses_nothing_then_recovers(tmp_path, failure):
    async with FakeOpenAI(default=failure) as fake, host_with(fake, tmp_path) as (_host, client):
        await say(client, 26)
        await fake.wait_requests(1)
        for batch in range(5):  # turns keep working while every compaction fails
            await say(client, 4, start=26 + 4 * batch)
        await fake.wait_requests(100, timeout=90)  # a hundred failed compactions (about 3 s when idle)
        s = await stats(client)
        assert s["total_messages"] == 46 and s["archived_messages"] == 0
        assert (await summary_state(client))["summary"] == ""
        fake.default = Answer()  # unused: the responder answers from now on
        fake.responder = summary_echo
        done = await wait_until(lambda: _compactions(client, 1), timeout=20)
        assert "## Next Move" in done["summary"]
        s = await stats(client)
        assert s["total_messages"] == 46


async def test_a_hanging_summarizer_never_holds_up_turns(tmp_path):
    async with FakeOpenAI(default=Hang()) as fake, host_with(fake, tmp_path, timeout=30) as (_host, client):
        await say(client, 26)
        await fake.wait_requests(1)
        started = time.monotonic()
        await say(client, 10, start=26)  # while the compaction waits on the summarizer
        assert time.monotonic() - started < 5
        assert (await stats(client))["total_messages"] == 36


async def test_messages_arriving_during_a_compaction_stay_unsummarized(tmp_path):
    gate = asyncio.Event()

    async with FakeOpenAI() as fake:
        fake.responder = slow_until(gate)
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 26)
            await fake.wait_requests(1)
            await say(client, 10, start=26)  # arrive while the summarizer is answering
            done = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert done["summarized_upto"] == 21
            s = await stats(client)
            assert (s["total_messages"], s["active_messages"]) == (36, 15)
            gate.set()


async def test_a_backlog_grown_during_a_compaction_gets_the_next_one_by_itself(tmp_path):
    # The turns that arrive while a compaction runs leave its alarm alone (it is running);
    # when it ends, it finds the backlog still past the threshold and sets the next one.
    async with FakeOpenAI() as fake:
        gate = asyncio.Event()
        fake.responder = slow_until(gate)
        async with host_with(fake, tmp_path) as (host, client):
            await say(client, 26)
            await fake.wait_requests(1)
            await say(client, 30, start=26)  # 56 kept, 21 summarized by the first: 35 > 25
            gate.set()
            done = await wait_until(lambda: _compactions(client, 2), timeout=10)
            assert done["summarized_upto"] > 21
            inner = host.host
            assert inner is not None
            assert await wait_until(lambda: inner.alarms.count() == 0, timeout=10)  # caught up


async def test_a_restart_with_a_pending_compaction_runs_it(tmp_path):
    async with FakeOpenAI(default=Hang()) as fake:
        async with host_with(fake, tmp_path, timeout=60) as (_host, client):
            await say(client, 26)
            await fake.wait_requests(1)  # the alarm is in flight when the host stops
            assert (await stats(client))["archived_messages"] == 0
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (_host, client):
            done = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert done["summarized_upto"] == 21


async def test_compact_now_waits_and_answers_502_on_failure(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(503)) as fake,
        host_with(fake, tmp_path, backoff_base_ms=10**9, backoff_max_ms=10**9) as (_host, client),
    ):
        await say(client, 10)
        r = await client.post(f"/v1/chats/{CHAT}/compact")
        assert r.status_code == 502 and "summarizer" in r.json()["error"]
        assert (await summary_state(client))["compactions"] == 0
        fake.responder = summary_echo
        r = await client.post(f"/v1/chats/{CHAT}/compact")
        assert r.status_code == 200
        assert r.json()["compactions"] == 1 and r.json()["summarized_upto"] == 5


async def test_offline_summarizer_compacts_without_an_endpoint(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path) as host,
        httpx.AsyncClient(base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}) as client,
    ):
        r = await client.post(
            f"/v1/chats/{CHAT}/turn",
            json={
                "text": "My name is Ann and I live in Oslo. See notes.md",
                "author": "Ann",
                "author_id": "1",
            },
        )
        assert r.status_code == 200
        await say(client, 30, start=1)
        done = await wait_until(lambda: _compactions(client, 1), timeout=10)
        validate_summary(done["summary"])
        assert "location = Oslo" in done["summary"] and "notes.md" in done["summary"]


async def test_forgetting_a_person_rebuilds_the_summary_without_their_words(tmp_path):
    async with FakeOpenAI() as fake:
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 13, author="Ann", author_id="1")
            await say(client, 13, start=100, author="Bob", author_id="2")
            first = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert "from Ann" in first["summary"]
            before = len(fake.requests)
            r = await client.delete(f"/v1/chats/{CHAT}/authors/1")
            assert r.status_code == 200 and r.json()["messages"] == 13
            r = await client.post(f"/v1/chats/{CHAT}/compact")
            assert r.status_code == 200
            after = await summary_state(client)
            assert "Ann" not in after["summary"] and "from Bob" in after["summary"]
            for req in fake.requests[before:]:
                assert "from Ann" not in json.dumps(req.body)
            facts = (await client.get(f"/v1/chats/{CHAT}/search", params={"q": "Ann word1"})).json()
            assert all("Ann" not in m["text"] for m in facts["results"])


async def test_retention_caps_the_archive(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path, retention=60) as host,
        httpx.AsyncClient(base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}) as client,
    ):
        msgs = [{"role": "user", "text": f"old message {i}", "message_id": f"o{i}"} for i in range(300)]
        assert (await client.post(f"/v1/chats/{CHAT}/import", json={"messages": msgs})).status_code == 200
        await say(client, 1, start=1000)

        async def capped():
            s = await stats(client)
            # the cap applies at each compaction; newer un-summarized messages come on top
            return s if s["active_messages"] <= 25 and s["archived_messages"] <= 60 - 5 else None

        s = await wait_until(capped, timeout=20)
        assert s["total_messages"] >= s["active_messages"]
        # the newest messages survive, the oldest summarized ones went
        found = (await client.get(f"/v1/chats/{CHAT}/search", params={"q": "message 299", "k": 3})).json()
        assert any(m["text"] == "old message 299" for m in found["results"])
        gone = (await client.get(f"/v1/chats/{CHAT}/search", params={"q": "old message", "k": 50})).json()
        assert all(m["text"] != "old message 0" for m in gone["results"])


def test_validation_refuses_bad_summaries():
    good = offline_summary("", [{"role": "user", "author": "A", "text": "I live in Rome.", "ts": "t"}])
    assert validate_summary(good) == good
    with pytest.raises(SummarizerError):
        validate_summary(good.replace("## Next Move", "## Later"))
    with pytest.raises(SummarizerError):
        validate_summary("\n\n".join(f"{h}\n" for h in SECTIONS))
    with pytest.raises(SummarizerError):
        validate_summary("x" * 20000)
    reordered = good.split("\n\n")
    reordered[0], reordered[1] = reordered[1], reordered[0]
    with pytest.raises(SummarizerError):
        validate_summary("\n\n".join(reordered))


# -- engine level: the Summarize callable directly, a real SQLite file -----------------------


def engine_memory(tmp_path: Path, **kw) -> ChatMemory:
    """A chat's memory on a real file through the local host's storage."""
    return ChatMemory(SqliteStorage(tmp_path / "chat.sqlite3"), **kw)


class CountingSummarizer:
    """A Summarize answering `reply(previous, messages)` (the offline summary by default), counting calls."""

    def __init__(self, reply=None):
        self.calls: list[list[dict]] = []
        self.reply = reply or offline_summary

    async def __call__(self, previous: str, messages: list[dict]) -> str:
        self.calls.append(messages)
        return self.reply(previous, messages)


def drain(memory: ChatMemory, summarize) -> None:
    """Run the due compactions, as the host's alarm does, until none is due."""
    while alarm_needed(memory):
        assert asyncio.run(on_alarm(memory, summarize)) is not None or not alarm_needed(memory)


DOG_TRIP_PROJECT = [
    "My dog Biscuit chewed the sofa again.",
    "We are planning a trip to Lisbon in May.",
    "I'm working on a project called Atlas, a hiking map.",
    "Biscuit hates the rain, he refuses to go out.",
    "I booked the flights to Lisbon yesterday.",
    "Atlas needs cached map tiles before the beta.",
    "I think Biscuit would love the beaches near Lisbon.",
    "The Atlas beta goes out next week, fingers crossed.",
    "Should I bring Biscuit to Lisbon or leave him with my sister Ana?",
    "Fixed the Atlas login bug today.",
]
OFFLINE_REPLY = "(offline: answering from memory only) Noted, answering from memory."


def test_the_offline_summary_names_the_dog_the_trip_and_the_project(tmp_path):
    memory = engine_memory(tmp_path)
    for i in range(30):
        memory.turn(DOG_TRIP_PROJECT[i % 10], author="Maya", author_id="7", message_id=str(i))
        memory.reply(OFFLINE_REPLY, "offline", "offline", reply_to_message_id=str(i))
    drain(memory, offline_summarize)
    summary = memory.summary()["summary"]
    validate_summary(summary)
    objective = summary.split(SECTIONS[1])[0]
    for named in ("Biscuit (dog)", "Lisbon (place)", "Atlas (project)", "Ana (sister)", "Maya"):
        assert named in objective, summary
    # Not the most frequent words, and not the offline bot's own boilerplate.
    for word in ("offline", "memory", "noted", "answering", "planning"):
        assert word not in summary.lower(), (word, summary)
    details = summary.split(SECTIONS[1])[1].split(SECTIONS[2])[0]
    assert "Biscuit" in details and "Atlas" in details and "Lisbon" in details


def test_named_things_tell_people_from_places():
    said = [
        {"role": "user", "author": "Ann", "text": "I talked to Carla about the trip to Porto."},
        {"role": "user", "author": "Ann", "text": 'Reading "The Overstory" on the train to Porto with Ben.'},
        {"role": "user", "author": "Bob", "text": "Ann, did you see the Orrery app? I met Carla in Rome."},
    ]
    found = {name: kind for name, kind, _ in named_things(said)}
    assert found["Porto"] == "place" and found["Rome"] == "place" and found["Orrery"] == "app"
    assert found["The Overstory"] == "title" and "Overstory" not in found
    assert found["Carla"] in (None, "place") and found["Ben"] is None
    assert "Ann" not in found and "Bob" not in found and "I" not in found  # speakers and pronouns


def fenced(summary: str, facts) -> str:
    """A model's compaction reply: the summary, then its facts block."""
    return summary + "\n\nFacts:\n```json\n" + json.dumps(facts) + "\n```\n"


def test_the_compaction_reply_carries_facts_merged_with_history(tmp_path):
    memory = engine_memory(tmp_path)
    memory.turn("I live in Lisbon.", author="Maya", author_id="7")
    memory.turn("hello from Bob", author="Bob", author_id="8")
    for i in range(25):
        memory.turn(f"note {i}: moved house, the dog settled in", author="Maya", author_id="7")
    facts = [
        {"author_id": "7", "key": "location", "value": "Porto"},
        {"author_id": "7", "key": "pets", "value": ["Biscuit (dog)"]},
        {"author_id": "7", "key": "Favourite Book", "value": "Dune"},
        {"author_id": 8, "key": "job", "value": "  baker  "},
        {"author_id": "999", "key": "name", "value": "a stranger, not in this chunk"},
        {"author_id": "7", "key": "shoe_size", "value": "38"},
        {"author_id": "7", "key": "name", "value": "x" * 500},
        "not an object",
    ]
    summarize = CountingSummarizer(lambda prev, msgs: fenced(offline_summary(prev, msgs), facts))
    drain(memory, summarize)
    assert len(summarize.calls) == 1
    summary = memory.summary()["summary"]
    assert validate_summary(summary) == summary and "```" not in summary and "Porto" not in summary
    current = {(f["author_id"], f["key"]): f["value"] for f in memory.facts()["facts"]}
    assert current == {
        ("7", "location"): "Porto",
        ("7", "pets"): "Biscuit (dog)",
        ("7", "favorite_book"): "Dune",
        ("8", "job"): "baker",
    }
    history = [f for f in memory.facts(history=True)["facts"] if f["key"] == "location"]
    assert [(f["value"], bool(f["superseded_at"])) for f in history] == [("Lisbon", True), ("Porto", False)]


def test_a_model_fact_never_overrides_a_newer_statement(tmp_path):
    memory = engine_memory(tmp_path)
    for i in range(27):
        memory.turn(f"note {i} about my week", author="Maya", author_id="7")
    job = prepare(memory)
    assert job is not None
    memory.turn("I live in Rome now.", author="Maya", author_id="7")  # while the model is answering
    assert commit(
        memory, job, offline_summary("", job.messages), [("7", "location", "Paris"), ("7", "likes", "tea")]
    )
    current = {f["key"]: f["value"] for f in memory.facts()["facts"]}
    assert current["location"] == "Rome" and current["likes"] == "tea"


@pytest.mark.parametrize(
    "reply",
    [
        '```json\n[{"author_id": "7", "key": "name"',  # cut off
        '```json\n{"author_id": "7", "key": "name", "value": "Maya"}\n```',  # not a list
        "```json\n[1, 2, [3]]\n```",
        '```\n[{"author_id": "7", "key": "name", "value": null}]\n```',
        "```json\nnot json at all\n```",
        "",
    ],
    ids=["truncated", "object", "not-facts", "null-value", "not-json", "no-block"],
)
def test_a_malformed_facts_block_never_fails_the_compaction(tmp_path, reply):
    memory = engine_memory(tmp_path)
    for i in range(27):
        memory.turn(f"note {i} about my week", author="Maya", author_id="7")
    drain(memory, CountingSummarizer(lambda prev, msgs: offline_summary(prev, msgs) + "\n\n" + reply))
    assert memory.summary()["compactions"] == 1
    assert memory.facts()["facts"] == []
    assert "not json" not in memory.summary()["summary"]


# 40k messages in `make test` (past SQLite's 32,766 bound variables, and 200 summarizer calls
# if the backlog were not bounded); the full 100k in `make soak`.
@pytest.mark.parametrize("size", [40_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_a_100k_import_costs_one_summarizer_call(tmp_path, size):
    memory = engine_memory(tmp_path, retention=200_000)
    summarize = CountingSummarizer()
    for start in range(0, size, 10_000):
        batch = [
            {
                "role": "user",
                "text": f"old {i} topic{i % 997}",
                "author": "Ann",
                "author_id": "1",
                "message_id": f"o{i}",
            }
            for i in range(start, start + 10_000)
        ]
        memory.import_messages(batch)
        drain(memory, summarize)  # the host's alarm may run between the requests of one import
    stats = memory.stats()
    # The history is archived (searchable, not summarized) but for the import's tail.
    tail = IMPORT_TAIL + KEEP_UNSUMMARIZED
    assert stats["active_messages"] == tail and stats["archived_messages"] == size - tail
    assert memory.search("old 12345")["results"][0]["text"].startswith("old 12345 ")
    assert summarize.calls == []  # an import alone makes no compaction due...
    memory.turn("and now, live", author="Ann", author_id="1")
    drain(memory, summarize)
    assert len(summarize.calls) == 1 <= MAX_BACKLOG_CALLS  # ... the next message one (the seed: 560)
    assert memory.stats()["active_messages"] == KEEP_UNSUMMARIZED
    # The rebuild after a forgetting, over every message, is bounded too.
    memory.forget_author("nobody")
    drain(memory, summarize)
    assert 1 < len(summarize.calls) <= 1 + MAX_BACKLOG_CALLS
    assert sum(len(c) for c in summarize.calls[1:]) <= MAX_BACKLOG_CALLS * BATCH_MESSAGES


def test_a_long_summarizer_outage_costs_a_bounded_number_of_calls(tmp_path):
    memory = engine_memory(tmp_path)

    async def down(previous, messages):
        raise SummarizerError("down")

    for i in range(1200):
        memory.turn(f"live message {i}", author="Ann", author_id="1")
        if i % 100 == 99:
            assert asyncio.run(on_alarm(memory, down))  # failed: retried later
    assert memory.summary()["compactions"] == 0
    summarize = CountingSummarizer()
    drain(memory, summarize)
    assert len(summarize.calls) <= MAX_BACKLOG_CALLS
    # Up to the newest five, everything is covered, archived or summarized; nothing is lost.
    assert memory.summary()["summarized_upto"] == 1195 and memory.stats()["total_messages"] == 1200
    assert memory.search("live message 3")["results"]


def test_retention_after_a_big_import_goes_in_small_steps(tmp_path):
    memory = engine_memory(tmp_path, retention=1000)
    memory.import_messages([{"role": "user", "text": f"old {i}"} for i in range(3000)])
    assert memory.stats()["total_messages"] == 1000  # an import deletes as many as it adds
    memory.retention = 100  # a lower cap: each compaction removes at most RETENTION_STEP
    totals = [1000]
    for i in range(60):
        memory.turn(f"live {i}")
        totals.append(memory.stats()["total_messages"])
        if alarm_needed(memory):
            asyncio.run(on_alarm(memory, offline_summarize))
            totals.append(memory.stats()["total_messages"])
    steps = [a - b for a, b in itertools.pairwise(totals) if b < a]
    assert steps and max(steps) <= RETENTION_STEP
    assert sum(steps) == 1060 - totals[-1] and totals[-1] < 200


def test_the_summarizer_request_asks_for_the_facts_block_in_the_same_call():
    body = summarizer_request(
        "light-sum",
        "",
        [
            {"role": "user", "author": "Maya", "author_id": "7", "text": "I live in Porto", "ts": "t"},
            {"role": "assistant", "author": "assistant", "author_id": "", "text": "noted", "ts": "t"},
        ],
    )
    system, user = (m["content"] for m in body["messages"])
    assert "fenced code block tagged json" in system and "favorite_" in system and "pets" in system
    lines = [json.loads(line) for line in user.split("New messages (JSON lines):\n")[1].splitlines()]
    assert lines[0]["author_id"] == "7" and "author_id" not in lines[1]
    text, block = split_reply(
        fenced(offline_summary("", []), [{"author_id": "7", "key": "name", "value": "Maya"}])
    )
    assert validate_summary(text) == text and block == [{"author_id": "7", "key": "name", "value": "Maya"}]


async def test_facts_from_the_model_reach_the_facts_route(tmp_path):
    async with FakeOpenAI() as fake:

        def with_facts(req) -> Answer:
            facts = [
                {"author_id": "1", "key": "pets", "value": ["Biscuit (dog)"]},
                {"author_id": "2", "key": "x"},
            ]
            return Answer(text=fenced(summary_echo(req).text, facts))

        fake.responder = with_facts
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 26)
            done = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert "```" not in done["summary"] and "Biscuit" not in done["summary"]
            facts = (await client.get(f"/v1/chats/{CHAT}/facts")).json()["facts"]
            assert [(f["author_id"], f["key"], f["value"]) for f in facts] == [("1", "pets", "Biscuit (dog)")]


def test_a_chat_typed_in_lower_case_still_gets_its_topics():
    said = ["my dog is called biscuit", "the app named atlas ships soon", "biscuit ate the atlas printout"]
    summary = offline_summary("", [{"role": "user", "author": "kim", "text": t, "ts": "t"} for t in said])
    objective = summary.split(SECTIONS[1])[0]
    assert "biscuit (dog)" in objective and "atlas (app)" in objective and "called" not in objective
