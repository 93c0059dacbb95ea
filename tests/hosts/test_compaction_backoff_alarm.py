"""A reminder's alarm that rings during a compaction's backoff leaves the compaction waiting.

One alarm serves compaction and reminders. After a failed compaction (here a 429 with a
Retry-After of ten minutes) the alarm is set for the backoff's end; a reminder due sooner
pulls it forward. That early ring used to try the compaction again at once: the summarizer
was called before its Retry-After, and the failure count (so the next backoff) doubled.
Now the backoff's end is stored (`compaction.NOT_BEFORE`): the early ring hands the reminder
over, leaves the summarizer alone and sets the alarm back to the backoff's end. On both
hosts, with injected clocks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from memory_engine.compaction.compact import SECTIONS, SummarizerError
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Answer, FakeOpenAI, RateLimit
from tests.support import TOKEN, clocked_worker, wait_until

SUMMARY = "\n\n".join(f"{h}\n- point {i}" for i, h in enumerate(SECTIONS))
AUTH = {"authorization": f"Bearer {TOKEN}"}
MINUTE = 60_000
RETRY_AFTER = 10 * MINUTE


# -- the Durable Object (entry.py under the fake workerd) ------------------------------------


@pytest.fixture
async def worker(tmp_path):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(RateLimit(retry_after=RETRY_AFTER / 1000))
        async with clocked_worker(tmp_path / "w", fake.url) as (w, clock):
            yield w, fake, clock


async def test_worker_reminder_during_a_backoff_does_not_try_the_compaction_early(worker):
    w, fake, clock = worker
    rt = w.runtime
    start = clock.now
    for i in range(30):
        await w.turn("bo", f"story part {i} about the lighthouse", message_id=f"p{i}", author_id="a1")
    assert await rt.run_alarms(now=clock.now) == 1  # 429: wait out its Retry-After
    assert len(fake.requests) == 1 and rt.alarm_of("bo") == start + RETRY_AFTER
    soon = start + MINUTE
    await w.ok("POST", "/v1/chats/bo/reminders", {"text": "in a minute", "due_at": soon})
    assert rt.alarm_of("bo") == soon

    clock.now = soon + 1
    assert await rt.run_alarms(now=clock.now) == 1
    assert await w.ok("POST", "/v1/dispatch/state", {}) == {"open": 1, "done": 0}  # handed over
    assert len(fake.requests) == 1  # was 2: the summarizer called before its Retry-After
    assert rt.alarm_of("bo") == start + RETRY_AFTER  # the backoff's end, not doubled

    clock.now = start + RETRY_AFTER
    assert await rt.run_alarms(now=clock.now) == 1
    assert len(fake.requests) == 2
    assert (await w.ok("GET", "/v1/chats/bo/summary"))["compactions"] == 1
    assert rt.alarm_of("bo") is None


# -- the local host (memory_worker/local/scheduler.py) --------------------------------------


class Clock:
    """The host's UTC clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def ms(self) -> int:
        return int(self.now.timestamp() * 1000)


async def test_local_reminder_during_a_backoff_does_not_try_the_compaction_early(tmp_path):
    clock = Clock()
    calls: list[int] = []

    async def summarize(previous: str, messages: list[dict[str, Any]]) -> str:
        calls.append(clock.ms())
        if len(calls) == 1:
            raise SummarizerError("summarizer rate-limited (429)", RETRY_AFTER)
        return SUMMARY

    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN, summarizer=summarize, clock=clock) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client,
    ):
        inner = host.host
        assert inner is not None
        start = clock.ms()
        for i in range(26):
            r = await client.post("/v1/chats/bo/turn", json={"text": f"note {i}", "message_id": f"m{i}"})
            assert r.status_code == 200

        def alarm_at(at: int):
            return lambda: inner.scheduler.running == 0 and inner.alarms.next_due(()) == at

        await wait_until(alarm_at(start + RETRY_AFTER), timeout=10, what="the backoff's alarm")
        assert len(calls) == 1
        soon = start + MINUTE
        r = await client.post("/v1/chats/bo/reminders", json={"text": "in a minute", "due_at": soon})
        assert r.status_code == 200 and inner.alarms.next_due(()) == soon

        clock.now += timedelta(milliseconds=MINUTE + 1)
        inner.scheduler.poke()

        async def handed() -> bool:
            return (await client.post("/v1/dispatch/state", json={})).json() == {"open": 1, "done": 0}

        await wait_until(handed, timeout=10, what="the reminder's hand-over")
        await wait_until(lambda: inner.scheduler.running == 0, timeout=10, what="the alarm's end")
        assert len(calls) == 1  # was 2: the summarizer called before its Retry-After
        assert inner.alarms.next_due(()) == start + RETRY_AFTER  # the backoff's end, not doubled

        clock.now += timedelta(milliseconds=RETRY_AFTER)
        inner.scheduler.poke()

        async def compacted() -> bool:
            return (await client.get("/v1/chats/bo/summary")).json()["compactions"] == 1

        await wait_until(compacted, timeout=10, what="the compaction after its backoff")
        assert len(calls) == 2
