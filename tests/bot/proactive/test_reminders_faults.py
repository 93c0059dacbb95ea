"""Exactly once through faults: a crash between the hand-over and the send, a crash after the
send, the memory worker killed (kill -9) and restarted with reminders pending, and a real
SIGKILL of `chatbot telegram` while it holds a reminder it has not sent yet."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.chat.memory.client import HttpMemoryClient
from bot.chat.proactive.delivery import Courier, Journal
from bot.chat.proactive.reminder_routes import ReminderApi
from bot.config import ReminderSettings
from memory_worker.local import EmbeddedMemoryHost
from tests.support import MEMORY_TOKEN, clean_env, wait_until
from tests.support.net import ServedMemory

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
CHAT = "telegram:555"


class Crash(BaseException):
    """The process dying at this point (nothing after it runs)."""


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def ms(self, **delta: float) -> int:
        return int((self.now + timedelta(**delta)).timestamp() * 1000)


class Platform:
    """A send that records what it delivered, or dies when told to."""

    def __init__(self, crash: bool = False) -> None:
        self.crash = crash
        self.sent: list[tuple[str, str]] = []

    async def __call__(self, chat: str, text: str, key: str = "") -> None:
        if self.crash:
            raise Crash
        self.sent.append((chat, text))


class DiesAfterSend(ReminderApi):
    """The memory API, with the process dying as it starts to record a send."""

    async def delivered(self, *args, **kwargs) -> bool:
        raise Crash


async def handed_over(api: ReminderApi, count: int = 1) -> None:
    async def queued():
        state = await api.state()
        return state["open"] == count

    await wait_until(queued, timeout=10, what="the reminder in the dispatch queue")


def courier(api, send, path: Path, clock) -> Courier:
    return Courier(api, send, Journal(path, "telegram"), prefixes=["telegram:"], clock=clock)


async def test_crash_between_hand_over_and_send_delivers_once_after_restart(tmp_path):
    clock = Clock()
    async with (
        EmbeddedMemoryHost(tmp_path / "memory", clock=clock) as host,
        HttpMemoryClient(host.url, host.token) as client,
    ):
        api = ReminderApi(client)
        await api.add(CHAT, {"text": "take the bread out", "due_at": clock.ms(seconds=30), "author": "Al"})
        clock.now += timedelta(seconds=31)
        await handed_over(api)
        dying = courier(api, Platform(crash=True), tmp_path / "bot.sqlite3", clock)
        with pytest.raises(Crash):
            await dying.tick()  # leased, then killed before anything reached the platform
        dying.journal.close()
        other = Platform()  # another bot instance must not take a live lease
        assert await courier(api, other, tmp_path / "other.sqlite3", clock).tick() == 0
        platform = Platform()
        restarted = courier(api, platform, tmp_path / "bot.sqlite3", clock)  # same owner id
        assert await restarted.tick() == 1  # takes its own lease back at once
        assert await restarted.tick() == 0
        reminder = await api.get(CHAT, 1)
    assert platform.sent == [(CHAT, "⏰ Reminder for Al: take the bread out")] and other.sent == []
    assert reminder is not None and (reminder["state"], reminder["sent_count"]) == ("sent", 1)


async def test_crash_after_the_send_never_sends_again(tmp_path):
    clock = Clock()
    async with (
        EmbeddedMemoryHost(tmp_path / "memory", clock=clock) as host,
        HttpMemoryClient(host.url, host.token) as client,
    ):
        api = ReminderApi(client)
        await api.add(CHAT, {"text": "call the bank", "due_at": clock.ms(seconds=30)})
        clock.now += timedelta(seconds=31)
        await handed_over(api)
        platform = Platform()
        dying = courier(DiesAfterSend(client), platform, tmp_path / "bot.sqlite3", clock)
        with pytest.raises(Crash):
            await dying.tick()  # sent, journalled, killed before memory recorded it
        dying.journal.close()
        assert len(platform.sent) == 1
        # Even once its lease has run out and the chat's alarm would offer it again:
        clock.now += timedelta(seconds=ReminderSettings().lease_s + 1)
        restarted = courier(api, platform, tmp_path / "bot.sqlite3", clock)
        assert await restarted.tick() == 0
        state = await ReminderApi(client).state()
        reminder = await api.get(CHAT, 1)
    assert platform.sent == [(CHAT, "⏰ Reminder: call the bank")]
    assert state == {"open": 0, "done": 1}
    assert reminder is not None and reminder["state"] == "sent"


async def test_cancelled_or_forgotten_after_the_hand_over_is_not_sent(tmp_path):
    clock = Clock()
    async with (
        EmbeddedMemoryHost(tmp_path / "memory", clock=clock) as host,
        HttpMemoryClient(host.url, host.token) as client,
    ):
        api = ReminderApi(client)
        await api.add(CHAT, {"text": "secret plan", "due_at": clock.ms(seconds=5), "author_id": "7"})
        await api.add(CHAT, {"text": "other plan", "due_at": clock.ms(seconds=5), "author_id": "8"})
        clock.now += timedelta(seconds=6)
        await handed_over(api, count=2)
        await client.forget_author(CHAT, "7")  # /forgetme after the hand-over
        await api.cancel(CHAT, 2, "8")  # /unremind after the hand-over
        platform = Platform()
        assert await courier(api, platform, tmp_path / "bot.sqlite3", clock).tick() == 0
        state = await ReminderApi(client).state()
        await api.add(CHAT, {"text": "later", "due_at": clock.ms(hours=1)})
        await client.forget_chat(CHAT)  # /forget: the chat's reminders go with it
        left = await api.pending(CHAT)
    assert platform.sent == [] and state == {"open": 0, "done": 2} and left == []


async def test_memory_worker_killed_and_restarted_with_reminders_pending(tmp_path):
    served = ServedMemory(tmp_path / "memory", MEMORY_TOKEN)
    await served.start()
    try:
        async with HttpMemoryClient(served.url, MEMORY_TOKEN) as client:
            due = int(time.time() * 1000) + 1500
            for n in range(5):
                await ReminderApi(client).add(CHAT, {"text": f"pending {n}", "due_at": due + n})
        served.kill9()  # before any was due
        await wait_until(lambda: time.time() * 1000 >= due + 10, timeout=5, what="the due time, host down")
        await served.start()
        async with HttpMemoryClient(served.url, MEMORY_TOKEN) as client:
            api = ReminderApi(client)
            platform = Platform()
            c = courier(api, platform, tmp_path / "bot.sqlite3", lambda: datetime.now(UTC))

            async def all_sent() -> bool:
                await c.tick()
                return len(platform.sent) == 5

            await wait_until(all_sent, timeout=15, what="the five reminders after the restart")
            assert await c.tick() == 0
    finally:
        served.stop_quietly()
    assert sorted(t for _, t in platform.sent) == [f"⏰ Reminder: pending {n}" for n in range(5)]


def _bot(tmp_path: Path, tg, memory_url: str) -> subprocess.Popen:
    log = open(tmp_path / "bot.log", "ab")  # noqa: SIM115 - the child keeps it
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "telegram", "--data", str(tmp_path / "bot")],
        cwd=tmp_path,
        env=clean_env(
            TELEGRAM_BOT_TOKEN=tg.token,
            TELEGRAM_API_BASE_URL=tg.base_url,
            MEMORY_URL=memory_url,
            MEMORY_API_TOKEN=MEMORY_TOKEN,
        ),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def _kill9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


async def test_sigkill_of_the_bot_holding_an_unsent_reminder_delivers_it_once(tg, tmp_path):
    chat = tg.private_chat(tg.user(555, "Ana"))
    served = ServedMemory(tmp_path / "memory", MEMORY_TOKEN)
    await served.start()
    proc = None
    try:
        tg.fail_next("sendMessage", 502, times=100_000)  # Telegram down: the bot holds the lease
        proc = _bot(tmp_path, tg, served.url)
        async with HttpMemoryClient(served.url, MEMORY_TOKEN) as client:
            await ReminderApi(client).add(
                CHAT, {"text": "take the pills", "author": "Ana", "due_at": int(time.time() * 1000) + 500}
            )
            await tg.wait_until(lambda: tg.calls_to("sendMessage", chat_id=chat["id"]), timeout=30)
            _kill9(proc)  # between the hand-over and a send that went through
            tg.faults.clear()
            assert tg.bot_messages(chat["id"]) == []
            proc = _bot(tmp_path, tg, served.url)
            await tg.wait_for_message(chat["id"], timeout=30)

            async def recorded():
                state = await ReminderApi(client).state()
                return state == {"open": 0, "done": 1}

            await wait_until(recorded, timeout=15, what="the send recorded")
            reminder = await ReminderApi(client).get(CHAT, 1)
    finally:
        if proc is not None and proc.poll() is None:
            _kill9(proc)
        served.stop_quietly()
    assert [m["text"] for m in tg.bot_messages(chat["id"])] == ["⏰ Reminder for Ana: take the pills"]
    assert reminder is not None and (reminder["state"], reminder["sent_count"]) == ("sent", 1)
