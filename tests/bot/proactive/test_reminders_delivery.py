"""Reminders end to end on the fake Telegram, with an injected clock (no real minutes waited):
set, list, cancel, deliver; a platform outage at delivery; the bot down at the due time;
recurring reminders through DST; /forgetme and /forget; exactly once through crashes."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.app import build_pipeline
from tests.support import default_config_settings, wait_until
from tests.support.telegram import ask, running_bot

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday


class Clock:
    """The bot's and the embedded memory's UTC clock, moved by the test."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def settings_for(tg, openai, send_budget_s: float = 10.0, **env: str):
    settings = default_config_settings(
        {
            "OPENAI_API_KEY": "sk-test-reminders-0123456789",
            "OPENAI_BASE_URL": openai.url,
            "TELEGRAM_BOT_TOKEN": tg.token,
            "TELEGRAM_API_BASE_URL": tg.base_url,
            **env,
        }
    )
    return replace(settings, telegram=replace(settings.telegram, send_budget_s=send_budget_s))


@contextlib.asynccontextmanager
async def bot(tg, settings, data_dir, clock):
    async with (
        build_pipeline(settings, data_dir, clock=clock) as pipeline,
        running_bot(pipeline, settings, tg),
    ):
        yield pipeline


def reminders_seen(tg, chat_id: int) -> list[str]:
    return [m["text"] for m in tg.bot_messages(chat_id) if m.get("text", "").startswith("⏰")]


async def dispatch_state(pipeline) -> dict:
    return await pipeline.reminders.api.state()


async def settled(pipeline, done: int) -> dict:
    """Wait until the dispatch queue has `done` occurrences finished and none open."""

    async def check():
        state = await dispatch_state(pipeline)
        return state if state == {"open": 0, "done": done} else None

    return await wait_until(check, timeout=15, what=f"{done} reminders recorded as delivered")


async def test_set_list_cancel_and_deliver_once(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        first = await ask(tg, chat, alice, "/remind in 20 minutes to take the bread out")
        assert first["text"].startswith(
            "OK, reminder #1: Tuesday 1 December 2026 at 12:20 (UTC): take the bread out"
        )
        assert "this bot's default" in first["text"]  # no /timezone yet: it says which zone
        second = await ask(tg, chat, alice, "remind me tomorrow at 9 to call the bank")  # words, no command
        assert second["text"].startswith("OK, reminder #2: Wednesday 2 December 2026 at 09:00 (UTC)")
        listing = (await ask(tg, chat, alice, "/reminders"))["text"].splitlines()
        assert listing[1].startswith("#1 Tuesday 1 December 2026 at 12:20 (UTC): take the bread out")
        assert listing[2].startswith("#2 Wednesday 2 December 2026 at 09:00 (UTC): call the bank")
        assert (await ask(tg, chat, alice, "/unremind 2"))["text"] == "Cancelled reminder #2: call the bank"
        assert reminders_seen(tg, chat["id"]) == []

        clock.advance(minutes=20, seconds=1)
        await tg.wait_until(lambda: reminders_seen(tg, chat["id"]))
        await settled(pipeline, done=1)
        clock.advance(days=2)  # the cancelled one's time passes too
        [courier] = pipeline.reminders.couriers
        assert await courier.tick() == 0
        assert "No reminders pending" in (await ask(tg, chat, alice, "/reminders"))["text"]
    assert reminders_seen(tg, chat["id"]) == ["⏰ Reminder for Alice: take the bread out"]


async def test_unparseable_and_past_get_an_example_and_keep_nothing(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock):
        vague = await ask(tg, chat, alice, "/remind sometime to call the bank")
        past = await ask(tg, chat, alice, "/remind on 3 March 2020 at 10:00 to file taxes")
        listing = await ask(tg, chat, alice, "/reminders")
    assert "couldn't tell when" in vague["text"] and "/remind tomorrow at 9" in vague["text"]
    assert "has already passed" in past["text"] and "For example" in past["text"]
    assert "No reminders pending" in listing["text"]


async def test_timezone_is_kept_as_a_fact_and_used(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        assert "don't know the time zone" in (await ask(tg, chat, alice, "/timezone Mars/Base"))["text"]
        set_tz = await ask(tg, chat, alice, "/timezone Asia/Tokyo")
        assert set_tz["text"].startswith("Your time zone is now Asia/Tokyo (it is 21:00 there)")
        r = await ask(tg, chat, alice, "/remind tomorrow at 9 to call the bank")
        facts = await pipeline.memory.facts("telegram:111")
    assert r["text"] == "OK, reminder #1: Wednesday 2 December 2026 at 09:00 (Asia/Tokyo): call the bank"
    assert {(f["key"], f["value"]) for f in facts} >= {("timezone", "Asia/Tokyo")}


async def test_platform_429_and_5xx_at_delivery_are_retried_then_sent_once(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        await ask(tg, chat, alice, "/remind in 5 minutes to stretch")
        before = len(tg.calls_to("sendMessage"))
        tg.fail_next("sendMessage", 502, times=2)
        tg.fail_next("sendMessage", 429, retry_after=1)
        clock.advance(minutes=6)
        await tg.wait_until(lambda: reminders_seen(tg, chat["id"]), timeout=20)
        await settled(pipeline, done=1)
    assert [c.status for c in tg.calls_to("sendMessage")[before:]] == [502, 502, 429, 200]
    assert reminders_seen(tg, chat["id"]) == ["⏰ Reminder for Alice: stretch"]


async def test_an_outage_past_the_send_budget_keeps_the_reminder_for_later(tg, openai, tmp_path, caplog):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai, send_budget_s=0.5), tmp_path, clock) as pipeline:
        await ask(tg, chat, alice, "/remind in 5 minutes to stretch")
        tg.fail_next("sendMessage", 502, times=10_000)
        clock.advance(minutes=6)
        await wait_until(lambda: "not delivered" in caplog.text, timeout=20, what="a failed delivery")
        assert await dispatch_state(pipeline) == {"open": 1, "done": 0}  # kept
        tg.faults.clear()
        clock.advance(seconds=pipeline.settings.reminders.retry_s + 1)
        await tg.wait_until(lambda: reminders_seen(tg, chat["id"]), timeout=20)
        await settled(pipeline, done=1)
    # Within the 5 minutes of late_after_s: not marked late.
    assert reminders_seen(tg, chat["id"]) == ["⏰ Reminder for Alice: stretch"]


async def test_bot_down_at_the_due_time_sends_it_when_back_marked_late(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    settings = settings_for(tg, openai)
    async with bot(tg, settings, tmp_path, clock):
        await ask(tg, chat, alice, "/remind in 10 minutes to call Bob")
    clock.advance(hours=3)  # the bot (and its embedded memory) is down through the due time
    async with bot(tg, settings, tmp_path, clock) as pipeline:
        await tg.wait_until(lambda: reminders_seen(tg, chat["id"]), timeout=20)
        await settled(pipeline, done=1)
    assert reminders_seen(tg, chat["id"]) == [
        "⏰ Reminder for Alice: call Bob\n(late: it was due Tuesday 1 December 2026 at 12:10 (UTC))"
    ]


async def test_recurring_reminder_fires_each_week_at_local_time_through_dst(tg, openai, tmp_path):
    clock = Clock(datetime(2027, 3, 17, 12, 0, tzinfo=UTC))  # Wednesday; Lisbon moves to WEST on 28 March
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        await ask(tg, chat, alice, "/timezone Europe/Lisbon")
        r = await ask(tg, chat, alice, "every Monday at 8 remind me to put the bins out")
        assert r["text"] == (
            "OK, reminder #1: Monday 22 March 2027 at 08:00 (Europe/Lisbon), then every Monday at 08:00: "
            "put the bins out"
        )
        clock.now = datetime(2027, 3, 22, 8, 0, 1, tzinfo=UTC)  # 08:00 WET
        await tg.wait_until(lambda: len(reminders_seen(tg, chat["id"])) == 1, timeout=20)
        await settled(pipeline, done=1)
        listing = (await ask(tg, chat, alice, "/reminders"))["text"]
        assert "#1 Monday 29 March 2027 at 08:00 (Europe/Lisbon), every Monday at 08:00" in listing
        clock.now = datetime(2027, 3, 29, 7, 0, 1, tzinfo=UTC)  # 08:00 WEST is 07:00 UTC
        await tg.wait_until(lambda: len(reminders_seen(tg, chat["id"])) == 2, timeout=20)
        await settled(pipeline, done=1)  # acked rows are kept a day: last week's is purged
        pending = await pipeline.reminders.api.pending("telegram:111")
    assert reminders_seen(tg, chat["id"]) == ["⏰ Reminder for Alice: put the bins out"] * 2
    assert [(r["sent_count"], r["due_at"]) for r in pending] == [
        (2, int(datetime(2027, 4, 5, 7, 0, tzinfo=UTC).timestamp() * 1000))
    ]


async def test_forgetme_removes_a_persons_reminders_and_only_theirs(tg, openai, tmp_path):
    clock = Clock()
    alice, bob = tg.user(111, "Alice"), tg.user(222, "Bob")
    group = tg.group(-100777)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        await ask(tg, group, alice, "/remind in 30 minutes to water the plants")
        await ask(tg, group, bob, "/remind in 40 minutes to feed the cat")
        refused = (await ask(tg, group, bob, "/unremind 1"))["text"]
        assert refused == "Reminder #1 is someone else's: they or an admin can cancel it."
        await ask(tg, group, alice, "/forgetme")
        listing = (await ask(tg, group, bob, "/reminders"))["text"]
        exported = await pipeline.memory.client.export_page("telegram:-100777", author_id="111")
        clock.advance(minutes=41)
        await tg.wait_until(lambda: reminders_seen(tg, group["id"]), timeout=20)
        await settled(pipeline, done=1)
    assert "feed the cat" in listing and "water the plants" not in listing
    assert exported["reminders"] == []
    assert reminders_seen(tg, group["id"]) == ["⏰ Reminder for Bob: feed the cat"]


def test_console_sets_lists_and_cancels_reminders(tmp_path):
    from tests.support import console_chat

    out = console_chat(
        tmp_path,
        [
            "/timezone Europe/Lisbon",
            "remind me tomorrow at 9 to call the bank",
            "/remind every Monday at 8 to put the bins out",
            "/reminders",
            "/unremind 1",
            "/reminders",
        ],
    )
    assert "Your time zone is now Europe/Lisbon" in out
    assert "OK, reminder #1: " in out and "at 09:00 (Europe/Lisbon): call the bank" in out
    assert "then every Monday at 08:00: put the bins out" in out
    assert "Cancelled reminder #1: call the bank" in out
    last = out.rsplit("Reminders:", 1)[1]
    assert "#2 " in last and "#1 " not in last
