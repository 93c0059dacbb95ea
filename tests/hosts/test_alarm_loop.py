"""The local host's alarm loop in a long run: a chat whose alarm bookkeeping fails is held back.

An error in the alarm's bookkeeping that is neither sqlite3's nor the OS's (a bug) used to
escape the alarm's task and leave its row due: the loop ran that chat again at once, for
ever (CPU burned, the log flooded). It must hold the chat back, as a full disk does, and
keep every other chat's alarms running. Clocks are injected; nothing sleeps.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from memory_engine.compaction.compact import SECTIONS
from memory_worker.local import EmbeddedMemoryHost
from memory_worker.local.scheduler import UNEXPECTED_FAILURE_RETRY_MS
from tests.support import TOKEN, wait_until

AUTH = {"authorization": f"Bearer {TOKEN}"}
SUMMARY = "\n\n".join(f"{h}\n- point {i}" for i, h in enumerate(SECTIONS))
MINUTE = 60_000


class Clock:
    """The host's UTC clock, moved by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def _say(client: httpx.AsyncClient, chat: str, n: int) -> None:
    for i in range(n):
        r = await client.post(
            f"/v1/chats/{chat}/turn", json={"text": f"{chat} note {i}", "message_id": f"m{i}"}
        )
        assert r.status_code == 200


@asynccontextmanager
async def _host(
    tmp_path: Path, clock: Clock, summarize: Any = None
) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    """A local host on the injected clock, its MemoryHost and a client with the token."""
    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN, summarizer=summarize, clock=clock) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client,
    ):
        assert host.host is not None
        yield host.host, client


async def _summarized(previous: str, messages: list[dict[str, Any]]) -> str:
    return SUMMARY


def _rate_limited(calls: list[int], times: int = 10**9) -> Any:
    """A summarizer answering a 429 that asks for ten minutes (its first `times` calls), counting calls."""
    from memory_engine.compaction.compact import SummarizerError

    async def summarize(previous: str, messages: list[dict[str, Any]]) -> str:
        calls.append(1)
        if len(calls) <= times:
            raise SummarizerError("summarizer rate-limited (429)", 10 * MINUTE)
        return SUMMARY

    return summarize


def _full_table(alarms: Any, reschedules_only: bool = True) -> dict[str, bool]:
    """Make the alarm table refuse writes as a full disk does, while the flag's "on" holds.

    `reschedules_only`: an alarm run's reschedule fails, a write's alarm (keep_earlier) is taken.
    """
    real_set = alarms.set
    full = {"on": True}

    def set_alarm(chat_key: str, due_ms: int, keep_earlier: bool = False) -> None:
        if full["on"] and not (reschedules_only and keep_earlier):
            raise sqlite3.OperationalError("database or disk is full")
        real_set(chat_key, due_ms, keep_earlier)

    alarms.set = set_alarm
    return full


async def _compacted(client: httpx.AsyncClient, inner: Any, chat: str) -> bool:
    inner.scheduler.poke()
    return (await client.get(f"/v1/chats/{chat}/summary")).json()["compactions"] == 1


async def _handed(client: httpx.AsyncClient, inner: Any) -> bool:
    inner.scheduler.poke()
    return (await client.post("/v1/dispatch/state", json={})).json() == {"open": 1, "done": 0}


async def _held_after_a_failed_compaction(
    client: httpx.AsyncClient, inner: Any, calls: list[int], chat: str
) -> None:
    """Grow `chat` to a compaction; wait until it failed and the chat is held back (a full table)."""
    await _say(client, chat, 26)
    await wait_until(
        lambda: calls and inner.scheduler.running == 0 and chat in inner.scheduler.held,
        timeout=10,
        what="the failed compaction's reschedule",
    )


async def _reminder_rings_in_a_minute_compaction_waits(
    client: httpx.AsyncClient, inner: Any, clock: Clock, calls: list[int], start: int
) -> None:
    """A minute on, the reminder is handed over (not 9 minutes late); the compaction still
    waits out its ten-minute Retry-After."""
    clock.now += timedelta(milliseconds=MINUTE + 1)
    await wait_until(lambda: _handed(client, inner), timeout=10, what="the reminder's hand-over")
    await wait_until(lambda: inner.scheduler.running == 0, timeout=10, what="the alarm's end")
    assert len(calls) == 1
    assert inner.alarms.next_due(()) == start + 10 * MINUTE


async def test_a_bug_in_the_alarm_bookkeeping_holds_that_chat_back_and_others_run(tmp_path, caplog):
    clock = Clock()
    summarized: list[str] = []

    async def summarize(previous: str, messages: list[dict[str, Any]]) -> str:
        summarized.append(messages[0]["text"].split()[0])  # which chat
        return SUMMARY

    async with _host(tmp_path, clock, summarize) as (inner, client):
        alarms = inner.alarms
        real_set, real_delete = alarms.set, alarms.delete
        broken = {"on": True}
        attempts: list[str] = []

        def check(chat_key: str) -> None:
            if chat_key == "bad":
                attempts.append(chat_key)
                if broken["on"]:
                    raise ValueError("a bug in the alarm's bookkeeping")

        def set_alarm(chat_key: str, due_ms: int, keep_earlier: bool = False) -> None:
            if not keep_earlier:  # the alarm run's reschedule (a write keeps the earlier time)
                check(chat_key)
            real_set(chat_key, due_ms, keep_earlier)

        def delete_alarm(chat_key: str) -> None:
            check(chat_key)
            real_delete(chat_key)

        alarms.set, alarms.delete = set_alarm, delete_alarm
        caplog.set_level(logging.ERROR, logger="memory_worker.local")

        await _say(client, "bad", 26)
        await wait_until(lambda: attempts, timeout=10, what="the bad chat's alarm run")
        # Another chat's alarm still runs, while the bad one's row is still due.
        await _say(client, "good", 26)
        await wait_until(
            lambda: _compacted(client, inner, "good"), timeout=10, what="the other chat's compaction"
        )
        for _ in range(20):  # give the loop every chance to spin on the bad chat
            inner.scheduler.poke()
            await client.get("/health")
        assert attempts == ["bad"], f"the bad chat's alarm was rerun {len(attempts) - 1} times at once"
        assert summarized == ["bad", "good"]
        assert "bad" in inner.scheduler.held and alarms.has("bad")
        logged = [r for r in caplog.records if "bad" in r.getMessage()]
        assert len(logged) == 1 and logged[0].exc_info is not None  # once, with its traceback

        # Held, not dropped: once the hold is over it is tried again; when the bug is gone
        # the alarm ends as it should (nothing left to compact: no alarm).
        clock.now += timedelta(milliseconds=UNEXPECTED_FAILURE_RETRY_MS + 1)
        inner.scheduler.poke()
        await wait_until(lambda: len(attempts) == 2, timeout=10, what="the retry after the hold")
        broken["on"] = False
        clock.now += timedelta(milliseconds=UNEXPECTED_FAILURE_RETRY_MS + 1)
        inner.scheduler.poke()
        await wait_until(lambda: not alarms.has("bad"), timeout=10, what="the mended alarm's end")
        assert len(attempts) == 3 and summarized == ["bad", "good"]
        assert (await client.get("/v1/chats/bad/summary")).json()["compactions"] == 1


async def test_a_reminder_whose_alarm_cannot_be_written_is_kept_and_its_alarm_set_later(tmp_path):
    """The alarm table refuses the reminder's alarm (a full disk): the reminder is committed, so
    the answer is 200 (a 507 asked the bot to retry, storing it twice); its alarm is written
    once the table takes it, and the reminder is handed over once."""
    clock = Clock()
    async with _host(tmp_path, clock) as (inner, client):
        alarms = inner.alarms
        full = _full_table(alarms, reschedules_only=False)
        due = int(clock.now.timestamp() * 1000) + MINUTE
        r = await client.post("/v1/chats/rm/reminders", json={"text": "in a minute", "due_at": due})
        assert r.status_code == 200, r.text  # was 507, with the reminder already stored
        assert alarms.next_due(()) is None
        full["on"] = False
        inner.scheduler.poke()
        await wait_until(lambda: alarms.next_due(()) == due, timeout=10, what="the alarm written later")

        clock.now += timedelta(minutes=1, milliseconds=1)
        await wait_until(lambda: _handed(client, inner), timeout=10, what="the reminder's hand-over")
        assert len((await client.get("/v1/chats/rm/reminders")).json()["reminders"]) == 1


async def test_a_bug_in_the_alarm_loop_itself_does_not_end_it(tmp_path, caplog):
    """The loop's own look at the table fails once with a bug: it used to end the loop, and no
    chat's alarm ever ran again in that process. It is logged and the loop looks again."""
    async with _host(tmp_path, Clock(), _summarized) as (inner, client):
        real_due = inner.alarms.due
        failures: list[int] = []

        def due_broken_thrice(now_ms: int, exclude: Any, limit: int) -> list[str]:
            if len(failures) < 3:
                failures.append(now_ms)
                raise ValueError("a bug in the alarm loop")
            return real_due(now_ms, exclude, limit)

        inner.alarms.due = due_broken_thrice
        caplog.set_level(logging.ERROR, logger="memory_worker.local")

        async def looked_thrice() -> bool:
            inner.scheduler.poke()  # one more look
            await client.get("/health")
            return len(failures) >= 3

        await wait_until(looked_thrice, timeout=10, what="three broken looks")  # main: the loop ended
        await _say(client, "c", 26)
        await wait_until(
            lambda: _compacted(client, inner, "c"), timeout=10, what="the compaction after the error"
        )
        assert [r.getMessage() for r in caplog.records] == ["alarm loop failed"]  # once for three


async def test_a_chat_held_back_by_a_full_alarm_table_still_rings_for_its_reminder(tmp_path):
    """A run's reschedule fails (a full disk) after a failed compaction (a 429 asking for ten
    minutes): the chat is held back in memory, but only until the alarm would have rung. A
    reminder due in a minute is handed over then, not after the compaction's ten minutes."""
    clock = Clock()
    calls: list[int] = []
    async with _host(tmp_path, clock, _rate_limited(calls)) as (inner, client):
        full = _full_table(inner.alarms)
        start = int(clock.now.timestamp() * 1000)
        r = await client.post("/v1/chats/h/reminders", json={"text": "in a minute", "due_at": start + MINUTE})
        assert r.status_code == 200
        await _held_after_a_failed_compaction(client, inner, calls, "h")
        assert inner.scheduler.held["h"] == start + MINUTE  # was start + 10 minutes
        full["on"] = False  # the disk has room again

        await _reminder_rings_in_a_minute_compaction_waits(client, inner, clock, calls, start)


async def test_a_reminder_added_to_a_held_back_chat_is_not_held_back_with_it(tmp_path):
    """The chat is held back for a failed compaction's backoff (its alarm table was full when
    the run ended); a reminder added afterwards, due sooner, is handed over at its time."""
    clock = Clock()
    calls: list[int] = []
    async with _host(tmp_path, clock, _rate_limited(calls)) as (inner, client):
        full = _full_table(inner.alarms)
        start = int(clock.now.timestamp() * 1000)
        await _held_after_a_failed_compaction(client, inner, calls, "h")
        full["on"] = False
        r = await client.post("/v1/chats/h/reminders", json={"text": "in a minute", "due_at": start + MINUTE})
        assert r.status_code == 200

        await _reminder_rings_in_a_minute_compaction_waits(client, inner, clock, calls, start)


async def test_an_erased_chat_leaves_no_hold_on_the_chat_that_follows(tmp_path):
    """A chat held back in memory (its alarm table was full after a failed compaction asking
    for ten minutes) is erased; a new chat under the same key compacts at once, not when the
    erased chat's hold ends."""
    calls: list[int] = []
    async with _host(tmp_path, Clock(), _rate_limited(calls, times=1)) as (inner, client):
        full = _full_table(inner.alarms)
        await _held_after_a_failed_compaction(client, inner, calls, "e")
        full["on"] = False
        assert (await client.delete("/v1/chats/e")).json() == {"deleted": True}
        assert "e" not in inner.scheduler.held  # was held ten minutes more
        await _say(client, "e", 26)  # a new chat under the same key
        await wait_until(lambda: _compacted(client, inner, "e"), timeout=10, what="the new chat's compaction")
        assert len(calls) == 2


async def test_a_bug_while_saving_a_reminders_wake_does_not_end_the_loop(tmp_path, caplog):
    """A reminder's wake the full alarm table refused is retried by the loop; that retry hit a
    bug (an error neither sqlite3's nor the OS's): it escaped the loop's handling and ended the
    loop. It is logged once, the other chats' alarms keep running, and the wake is saved once
    the bug is gone."""
    clock = Clock()
    async with _host(tmp_path, clock, _summarized) as (inner, client):
        alarms = inner.alarms
        real_set = alarms.set
        mode = {"rm": "full"}
        bugs: list[int] = []

        def set_alarm(chat_key: str, due_ms: int, keep_earlier: bool = False) -> None:
            if chat_key == "rm" and mode["rm"] == "full":
                raise sqlite3.OperationalError("database or disk is full")
            if chat_key == "rm" and mode["rm"] == "bug":
                bugs.append(due_ms)
                raise ValueError("a bug while saving a wake")
            real_set(chat_key, due_ms, keep_earlier)

        alarms.set = set_alarm
        caplog.set_level(logging.ERROR, logger="memory_worker.local")
        due = int(clock.now.timestamp() * 1000) + MINUTE
        r = await client.post("/v1/chats/rm/reminders", json={"text": "in a minute", "due_at": due})
        assert r.status_code == 200 and alarms.next_due(()) is None
        mode["rm"] = "bug"

        async def looked_twice() -> bool:
            inner.scheduler.poke()  # one more look
            await client.get("/health")
            return len(bugs) >= 2

        await wait_until(looked_twice, timeout=10, what="two buggy retries")  # main: the loop ended at one
        await _say(client, "c", 26)  # still buggy: another chat's alarm runs all the same
        await wait_until(lambda: _compacted(client, inner, "c"), timeout=10, what="the compaction meanwhile")
        mode["rm"] = "ok"
        inner.scheduler.poke()
        await wait_until(lambda: alarms.next_due(()) == due, timeout=10, what="the wake saved at last")
        logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(logged) == 1 and logged[0].exc_info is not None  # once for the whole spell
