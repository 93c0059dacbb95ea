"""The reminder hand-over on the Worker's real runtime (`chatbot memory serve --runtime pyodide`):
the chat object's alarm hands due reminders to the dispatch object through a stub `fetch`,
the bot's courier leases them from it; a kill -9 of the host with reminders pending loses none;
a reminder added while a compaction waits on its summarizer keeps its alarm (the real host's
alarm book, `objects.mjs`, under entry.py)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from bot.chat.memory.client import HttpMemoryClient
from bot.chat.proactive.delivery import Courier, Journal
from bot.chat.proactive.reminder_routes import ReminderApi
from memory_engine.compaction.compact import SECTIONS
from memory_worker.pyodide_runtime import PyodideHost, PyodideUnavailable, check_installed
from tests.fakes.gated_summarizer import GatedSummarizer
from tests.support import TOKEN, ServedMemory, wait_until

try:
    check_installed()
    MISSING = ""
except PyodideUnavailable as err:
    MISSING = str(err)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)


async def test_alarm_hands_over_to_the_dispatch_object_and_survives_kill_9(tmp_path):
    served = ServedMemory(tmp_path / "data", TOKEN, runtime="pyodide")
    sent: list[tuple[str, str]] = []

    async def send(chat: str, text: str, key: str) -> None:
        sent.append((chat, text))

    try:
        await served.start(timeout=120)
        async with HttpMemoryClient(served.url, TOKEN, timeout=30) as client:
            api = ReminderApi(client)
            now = int(time.time() * 1000)
            await api.add("telegram:1", {"text": "right away", "due_at": now + 300, "author": "Al"})
            for n in range(3):
                await api.add(f"discord:{n + 10}", {"text": f"after the crash {n}", "due_at": now + 4000})
            journal = Journal(tmp_path / "bot.sqlite3", "bot")
            courier = Courier(
                api, send, journal, prefixes=["telegram:", "discord:"], clock=lambda: datetime.now(UTC)
            )

            async def delivered(count: int):
                await courier.tick()
                return len(sent) >= count

            await wait_until(lambda: delivered(1), timeout=30, what="the first reminder through the alarm")
        served.kill9()  # three reminders pending, not yet due
        await wait_until(
            lambda: time.time() * 1000 > now + 4100, timeout=10, what="their due time, host down"
        )
        await served.start(timeout=120)
        async with HttpMemoryClient(served.url, TOKEN, timeout=30) as client:
            courier.api = ReminderApi(client)
            await wait_until(lambda: delivered(4), timeout=60, what="the reminders after the restart")
            assert await courier.tick() == 0
            state = await ReminderApi(client).state()
        journal.close()
    finally:
        served.stop_quietly()
    assert sent[0] == ("telegram:1", "⏰ Reminder for Al: right away")
    assert sorted(sent[1:]) == [(f"discord:{n + 10}", f"⏰ Reminder: after the crash {n}") for n in range(3)]
    assert state == {"open": 0, "done": 4}


async def test_a_reminder_added_during_a_compaction_is_delivered_once(tmp_path):
    # The alarm's end used to set the next alarm from the reminder it knew before awaiting
    # the summarizer (the hour's one here): the minute's reminder, added meanwhile, was late.
    # The runtime's clock is the wall clock: the reminder is due a moment after it is added.
    summary = "\n\n".join(f"{h}\n- point {i}" for i, h in enumerate(SECTIONS))
    sent: list[tuple[str, str]] = []

    async def send(chat: str, text: str, key: str) -> None:
        sent.append((chat, text))

    async with GatedSummarizer(summary) as gated:
        host = PyodideHost(tmp_path / "data", TOKEN, env={"SUMMARY_BASE_URL": gated.url})
        await asyncio.to_thread(host.start)
        try:
            async with HttpMemoryClient(host.url, TOKEN, timeout=60) as client:
                api = ReminderApi(client)
                chat = "telegram:9"
                await api.add(chat, {"text": "in an hour", "due_at": int(time.time() * 1000) + 3_600_000})
                for i in range(30):
                    await client.turn(chat, f"story part {i}", author="Al", author_id="1", message_id=f"p{i}")
                async with asyncio.timeout(60):
                    await gated.arrived.wait()  # the alarm is in flight
                soon = int(time.time() * 1000) + 1500
                await api.add(chat, {"text": "right after", "due_at": soon, "author": "Al"})
                gated.gate.set()
                journal = Journal(tmp_path / "bot.sqlite3", "bot")
                courier = Courier(api, send, journal, prefixes=["telegram:"], clock=lambda: datetime.now(UTC))

                async def delivered() -> bool:
                    await courier.tick()
                    return bool(sent)

                await wait_until(delivered, timeout=30, what="the reminder added during the compaction")
                assert await courier.tick() == 0
                state = await api.state()
                summarized = await client.summary(chat)
                journal.close()
        finally:
            host.stop()
    assert sent == [("telegram:9", "⏰ Reminder for Al: right after")]
    assert state == {"open": 0, "done": 1} and summarized["compactions"] == 1
    errors = host.log_path.read_text(encoding="utf-8")
    assert "Traceback" not in errors, errors[-2000:]
