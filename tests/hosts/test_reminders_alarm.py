"""A reminder added or cancelled while a compaction waits on its summarizer, on both hosts.

The chat's one alarm serves compaction and reminders. A write while the alarm runs leaves
the alarm to the run (it sets the next one when it ends), so the end must read the
reminders as they are then: a reminder added meanwhile gets its alarm (it was overwritten
by a later time on the Durable Object, deleted on the local host), and one cancelled
meanwhile leaves no stale alarm that could deliver it. Clocks are injected; the
compaction is held open by `GatedSummarizer`. A chat erased meanwhile gets none of the
held compaction's summary.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.chat.memory.client import HttpMemoryClient
from bot.chat.proactive.delivery import Courier, Journal
from bot.chat.proactive.reminder_routes import ReminderApi
from memory_engine import ChatMemory
from memory_engine.compaction.compact import SECTIONS
from memory_engine.reminders import store as reminders
from memory_worker.local import EmbeddedMemoryHost, SqliteStorage
from tests.fakes.gated_summarizer import GatedSummarizer
from tests.support import MsClock, WorkerBackend, clocked_worker, wait_until

SUMMARY = "\n\n".join(f"{h}\n- point {i}" for i, h in enumerate(SECTIONS))
MINUTE = 60_000
HOUR = 3_600_000
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


# -- the engine's rule, shared by both hosts ------------------------------------------------


def test_next_wake_reads_the_reminders_as_they_are_now():
    sql = ChatMemory(SqliteStorage(":memory:")).sql
    now = 1_000_000
    assert reminders.next_wake(sql, now, None) is None  # nothing to compact, no reminder
    assert reminders.next_wake(sql, now, 0) == now  # more to compact: at once
    first = reminders.add(sql, "t", "soon", now + MINUTE)["reminder"]
    assert reminders.next_wake(sql, now, None) == now + MINUTE
    assert reminders.next_wake(sql, now, 5_000) == now + 5_000  # the earlier of the two
    # A failed hand-over: the due reminder waits out the retry, a later one keeps its time.
    assert (
        reminders.next_wake(sql, now + 2 * MINUTE, None, hand_over_retry_at=now + 3 * MINUTE)
        == now + 3 * MINUTE
    )
    assert reminders.next_wake(sql, now, None, hand_over_retry_at=now + 1) == now + MINUTE
    reminders.cancel(sql, first["id"])
    assert reminders.next_wake(sql, now, None) is None  # a cancelled reminder wakes nothing


# -- the Durable Object (entry.py under the fake workerd) ------------------------------------


@pytest.fixture
async def worker(tmp_path):
    """A Worker whose summarizer waits for the test, and its injected clock."""
    async with GatedSummarizer(SUMMARY) as gated, clocked_worker(tmp_path / "w", gated.url) as (w, clock):
        yield w, gated, clock


async def _say(w: WorkerBackend, chat: str, n: int) -> None:
    for i in range(n):
        await w.turn(
            chat, f"story part {i} about the lighthouse", message_id=f"p{i}", author="ann", author_id="a1"
        )


async def _held_compaction(
    w: WorkerBackend, gated: GatedSummarizer, clock: MsClock, chat: str
) -> asyncio.Task:
    """Start the chat's compaction alarm and return once it waits on the summarizer."""
    await _say(w, chat, 30)
    assert w.runtime is not None
    alarm = asyncio.create_task(w.runtime.run_alarms(now=clock.now))
    async with asyncio.timeout(10):
        await gated.arrived.wait()
    assert not alarm.done()
    return alarm


async def _deliver(w: WorkerBackend, chat: str) -> list[dict[str, Any]]:
    """What a bot would do: lease, record the send in the chat, ack; the items it sent."""
    items = (await w.ok("POST", "/v1/dispatch/lease", {"owner": "bot:1"}))["items"]
    for item in items:
        body = {"reminder_id": item["reminder_id"], "due_at": item["due_at"], "sent_at": item["due_at"]}
        await w.ok("POST", f"/v1/chats/{chat}/delivered", body)
    if items:
        await w.ok("POST", "/v1/dispatch/ack", {"keys": [i["key"] for i in items]})
    return items


async def test_worker_reminder_added_during_a_compaction_gets_the_alarm(worker):
    w, gated, clock = worker
    rt = w.runtime
    later = clock.now + HOUR  # the reminder the alarm knew of when it started
    await w.ok("POST", "/v1/chats/ra/reminders", {"text": "in an hour", "due_at": later})
    alarm = await _held_compaction(w, gated, clock, "ra")
    soon = clock.now + MINUTE
    added = (await w.ok("POST", "/v1/chats/ra/reminders", {"text": "in a minute", "due_at": soon}))[
        "reminder"
    ]
    gated.gate.set()
    async with asyncio.timeout(10):
        assert await alarm == 1
    assert (await w.ok("GET", "/v1/chats/ra/summary"))["compactions"] == 1
    due = rt.alarm_of("ra")
    assert due is not None and due <= soon  # was `later`: the minute's reminder overwritten

    clock.now = soon + 1
    assert await rt.run_alarms(now=clock.now) == 1
    sent = await _deliver(w, "ra")
    assert [i["reminder_id"] for i in sent] == [added["id"]]
    assert await _deliver(w, "ra") == []  # exactly once
    assert await rt.run_alarms(now=clock.now) == 0
    assert rt.alarm_of("ra") == later  # the hour's reminder still has its alarm
    assert await w.ok("POST", "/v1/dispatch/state", {}) == {"open": 0, "done": 1}


async def test_worker_reminder_cancelled_during_a_compaction_is_never_delivered(worker):
    w, gated, clock = worker
    rt = w.runtime
    soon = clock.now + MINUTE
    gone = (await w.ok("POST", "/v1/chats/rc/reminders", {"text": "cancel me", "due_at": soon}))["reminder"]
    alarm = await _held_compaction(w, gated, clock, "rc")
    await w.ok("DELETE", f"/v1/chats/rc/reminders/{gone['id']}")
    gated.gate.set()
    async with asyncio.timeout(10):
        assert await alarm == 1
    assert rt.alarm_of("rc") is None  # no stale alarm for the cancelled reminder
    clock.now = soon + 1
    await rt.run_alarms(now=clock.now)
    assert await _deliver(w, "rc") == []
    assert await w.ok("POST", "/v1/dispatch/state", {}) == {"open": 0, "done": 0}


# -- the local host (memory_worker/local/scheduler.py) --------------------------------------

CHAT = "telegram:777"


class Clock:
    """The host's and the bot's UTC clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def ms(self, **delta: float) -> int:
        return int((self.now + timedelta(**delta)).timestamp() * 1000)


class Platform:
    """A send that records what it delivered."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    async def __call__(self, chat: str, text: str, key: str = "") -> None:
        self.sent.append((chat, text))


@contextlib.asynccontextmanager
async def _local_host(
    tmp_path: Path, clock: Clock
) -> AsyncIterator[tuple[GatedSummarizer, EmbeddedMemoryHost, HttpMemoryClient]]:
    """A local host on `clock` whose compactions wait on a GatedSummarizer, and a client of it."""
    async with (
        GatedSummarizer(SUMMARY) as gated,
        EmbeddedMemoryHost(tmp_path / "memory", clock=clock, summary_base_url=gated.url) as host,
        HttpMemoryClient(host.url, host.token) as client,
    ):
        yield gated, host, client


def _courier(api: ReminderApi, platform: Platform, tmp_path: Path, clock: Clock) -> Courier:
    """The bot's reminder courier for Telegram chats, on `clock`, sending to `platform`."""
    return Courier(
        api, platform, Journal(tmp_path / "bot.sqlite3", "telegram"), prefixes=["telegram:"], clock=clock
    )


async def _local_held_compaction(host: EmbeddedMemoryHost, client: HttpMemoryClient, gated: GatedSummarizer):
    for i in range(26):
        await client.turn(CHAT, f"note {i} about the garden", author="Ann", author_id="1", message_id=f"m{i}")
    async with asyncio.timeout(10):
        await gated.arrived.wait()
    assert host.host is not None and host.host.scheduler.running == 1


async def _compaction_ended(host: EmbeddedMemoryHost, client: HttpMemoryClient) -> None:
    inner = host.host
    assert inner is not None

    async def ended() -> bool:
        return inner.scheduler.running == 0 and (await client.summary(CHAT))["compactions"] == 1

    await wait_until(ended, timeout=10, what="the compaction's end")


@pytest.mark.parametrize("known", [False, True], ids=["no-other-reminder", "a-later-reminder"])
async def test_local_reminder_added_during_a_compaction_gets_the_alarm(tmp_path, known):
    clock = Clock()
    async with _local_host(tmp_path, clock) as (gated, host, client):
        inner = host.host
        assert inner is not None
        api = ReminderApi(client)
        if known:  # the alarm's end used to set this one's time, later than the new one's
            await api.add(CHAT, {"text": "in an hour", "due_at": clock.ms(hours=1)})
        await _local_held_compaction(host, client, gated)
        soon = clock.ms(seconds=30)
        added = await api.add(CHAT, {"text": "water the plants", "due_at": soon, "author": "Ann"})
        gated.gate.set()
        await _compaction_ended(host, client)
        due = inner.alarms.next_due(())
        assert due is not None and due <= soon  # was deleted (or the hour's time)

        clock.now += timedelta(seconds=31)
        inner.scheduler.poke()

        async def handed() -> bool:
            return (await api.state())["open"] == 1

        await wait_until(handed, timeout=10, what="the reminder in the dispatch queue")
        platform = Platform()
        courier = _courier(api, platform, tmp_path, clock)
        assert await courier.tick() == 1
        assert await courier.tick() == 0  # exactly once
        courier.journal.close()
        state = await api.state()
        reminder = await api.get(CHAT, added["id"])
    assert platform.sent == [(CHAT, "⏰ Reminder for Ann: water the plants")]
    assert state == {"open": 0, "done": 1}
    assert reminder is not None and (reminder["state"], reminder["sent_count"]) == ("sent", 1)


async def test_local_reminder_cancelled_during_a_compaction_is_never_delivered(tmp_path):
    clock = Clock()
    async with _local_host(tmp_path, clock) as (gated, host, client):
        inner = host.host
        assert inner is not None
        api = ReminderApi(client)
        gone = await api.add(CHAT, {"text": "cancel me", "due_at": clock.ms(seconds=30)})
        await _local_held_compaction(host, client, gated)
        await api.cancel(CHAT, gone["id"], None)
        gated.gate.set()
        await _compaction_ended(host, client)
        assert inner.alarms.next_due(()) is None  # no stale alarm for the cancelled reminder
        clock.now += timedelta(seconds=31)
        inner.scheduler.poke()
        platform = Platform()
        courier = _courier(api, platform, tmp_path, clock)
        assert await courier.tick() == 0
        courier.journal.close()
        state = await api.state()
    assert platform.sent == [] and state == {"open": 0, "done": 0}


async def test_worker_chat_forgotten_during_a_compaction_gets_none_of_its_summary(worker):
    # The chat is erased (and written again) while its alarm waits on the summarizer: the
    # summary of the erased messages must not land in the chat that follows.
    w, gated, clock = worker
    alarm = await _held_compaction(w, gated, clock, "fg")
    await w.ok("DELETE", "/v1/chats/fg")
    await w.turn("fg", "a fresh start", message_id="n1")
    gated.gate.set()
    async with asyncio.timeout(10):
        await alarm
    summary = await w.ok("GET", "/v1/chats/fg/summary")
    assert summary["compactions"] == 0 and "lighthouse" not in summary["summary"], summary
    assert (await w.stats("fg"))["total_messages"] == 1


async def test_local_chat_forgotten_during_a_compaction_gets_none_of_its_summary(tmp_path):
    clock = Clock()
    async with _local_host(tmp_path, clock) as (gated, host, client):
        inner = host.host
        assert inner is not None
        await _local_held_compaction(host, client, gated)
        await client.forget_chat(CHAT)
        await client.turn(CHAT, "a fresh start", author="Bo", author_id="2", message_id="n1")
        gated.gate.set()
        await wait_until(lambda: inner.scheduler.running == 0, timeout=10, what="the compaction's end")
        summary = await client.summary(CHAT)
        stats = await client.stats(CHAT)
    assert summary["compactions"] == 0 and stats["total_messages"] == 1, summary
