"""Compaction in the local host, against a fake OpenAI-compatible summarizer over real HTTP."""

from __future__ import annotations

import asyncio
import json
import re
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from memory_engine.compaction import SECTIONS, SummarizerError, offline_summary, validate_summary

from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Answer, FakeOpenAI, Garbage, Hang, RateLimit, ServerError
from tests.support import wait_until

CHAT = "telegram:-100"


def summary_echo(req) -> Answer:
    """A summarizer that folds every quoted message it was sent into Important Details."""
    user = req.messages[-1]["content"]
    previous = user.split("New messages (JSON lines):")[0]
    lines = [
        json.loads(l)["text"] for l in user.split("New messages (JSON lines):\n")[1].splitlines() if l.strip()
    ]
    cycle = len(re.findall(r"cycle-mark", previous)) + 1
    details = "\n".join(f"- {t}" for t in lines)
    kept = "\n".join(l for l in previous.splitlines() if l.startswith("- cycle-mark"))
    text = (
        f"{SECTIONS[0]}\n- chat\n\n{SECTIONS[1]}\n{kept}\n- cycle-mark {cycle}\n{details}\n\n"
        f"{SECTIONS[2]}\n- Completed: cycle {cycle}\n\n{SECTIONS[3]}\n- continue\n\n{SECTIONS[4]}\n- None"
    )
    return Answer(text=text)


@asynccontextmanager
async def host_with(fake: FakeOpenAI, data: Path, **kw):
    async with EmbeddedMemoryHost(
        data,
        summary_base_url=fake.url,
        summary_model="light-sum",
        summary_api_key="sk-test",
        summary_timeout_s=kw.pop("timeout", 5.0),
        backoff_base_ms=kw.pop("backoff_base_ms", 1),
        backoff_max_ms=kw.pop("backoff_max_ms", 20),
        **kw,
    ) as host, httpx.AsyncClient(
        base_url=host.url, timeout=10, headers={"Authorization": f"Bearer {host.token}"}
    ) as client:
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
        async with host_with(fake, tmp_path) as (host, client):
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


async def _compactions(client, n):
    s = await summary_state(client)
    return s if s["compactions"] >= n else None


async def test_the_summary_is_in_the_memory_prompt(tmp_path):
    async with FakeOpenAI() as fake:
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (host, client):
            await say(client, 26)
            await wait_until(lambda: _compactions(client, 1), timeout=10)
            r = (await client.post(f"/v1/chats/{CHAT}/turn", json={"text": "hello again"})).json()
            prompt = r["prompt"]
            assert prompt.index("Recent messages") < prompt.index("## Objective")
            assert "cycle-mark 1" in r["summary"]


@pytest.mark.parametrize(
    "failure",
    [ServerError(500), RateLimit(retry_after=0.01), Garbage(), Answer(text="## Objective\nonly one section")],
    ids=["500", "429", "garbage", "missing-sections"],
)
async def test_a_summarizer_down_for_many_cycles_loses_nothing_then_recovers(tmp_path, failure):
    async with FakeOpenAI(default=failure) as fake, host_with(fake, tmp_path) as (host, client):
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
    async with FakeOpenAI(default=Hang()) as fake:
        async with host_with(fake, tmp_path, timeout=30) as (host, client):
            await say(client, 26)
            await fake.wait_requests(1)
            started = time.monotonic()
            await say(client, 10, start=26)  # while the compaction waits on the summarizer
            assert time.monotonic() - started < 5
            assert (await stats(client))["total_messages"] == 36


async def test_messages_arriving_during_a_compaction_stay_unsummarized(tmp_path):
    gate = asyncio.Event()

    async with FakeOpenAI() as fake:

        def slow(req):
            return summary_echo(req) if gate.is_set() else Answer(text=summary_echo(req).text, delay=0.5)

        fake.responder = slow
        async with host_with(fake, tmp_path) as (host, client):
            await say(client, 26)
            await fake.wait_requests(1)
            await say(client, 10, start=26)  # arrive while the summarizer is answering
            done = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert done["summarized_upto"] == 21
            s = await stats(client)
            assert (s["total_messages"], s["active_messages"]) == (36, 15)
            gate.set()


async def test_a_restart_with_a_pending_compaction_runs_it(tmp_path):
    async with FakeOpenAI(default=Hang()) as fake:
        async with host_with(fake, tmp_path, timeout=60) as (host, client):
            await say(client, 26)
            await fake.wait_requests(1)  # the alarm is in flight when the host stops
            assert (await stats(client))["archived_messages"] == 0
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (host, client):
            done = await wait_until(lambda: _compactions(client, 1), timeout=10)
            assert done["summarized_upto"] == 21


async def test_compact_now_waits_and_answers_502_on_failure(tmp_path):
    async with FakeOpenAI(default=ServerError(503)) as fake:
        async with host_with(fake, tmp_path, backoff_base_ms=10**9, backoff_max_ms=10**9) as (host, client):
            await say(client, 10)
            r = await client.post(f"/v1/chats/{CHAT}/compact")
            assert r.status_code == 502 and "summarizer" in r.json()["error"]
            assert (await summary_state(client))["compactions"] == 0
            fake.responder = summary_echo
            r = await client.post(f"/v1/chats/{CHAT}/compact")
            assert r.status_code == 200
            assert r.json()["compactions"] == 1 and r.json()["summarized_upto"] == 5


async def test_offline_summarizer_compacts_without_an_endpoint(tmp_path):
    async with EmbeddedMemoryHost(tmp_path) as host, httpx.AsyncClient(
        base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}
    ) as client:
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
        async with host_with(fake, tmp_path) as (host, client):
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
    async with EmbeddedMemoryHost(tmp_path, retention=60) as host, httpx.AsyncClient(
        base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}
    ) as client:
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
