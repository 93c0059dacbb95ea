"""Follow-ups, opt in, end to end on the fake Telegram with an injected clock: a plan of
someone who opted in is asked about once the day after; nothing without the opt-in, nor in a
group they did not opt in to; one a day; /followups off and /forgetme take them away; the
daily caps hold a check-in back."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.bot.proactive.test_reminders_delivery import Clock, bot, settings_for
from tests.support import wait_until
from tests.support.telegram import ask

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def checkins(tg, chat_id: int) -> list[str]:
    return [m["text"] for m in tg.bot_messages(chat_id) if "how did your" in m.get("text", "").lower()]


async def pending(pipeline, chat: dict) -> list[dict]:
    return await pipeline.reminders.api.pending(f"telegram:{chat['id']}")


async def test_an_opted_in_plan_is_asked_about_once_the_day_after(tg, openai, tmp_path):
    clock = Clock()  # Tuesday 1 December 2026 12:00 UTC
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        assert "Follow-ups are off" in (await ask(tg, chat, alice, "/followups"))["text"]
        assert "Follow-ups on" in (await ask(tg, chat, alice, "/followups on"))["text"]
        await ask(tg, chat, alice, "my interview is on Thursday at 10")
        await ask(tg, chat, alice, "and my exam is on Thursday too")  # the same day: not a second one
        [kept] = await pending(pipeline, chat)
        assert kept["every"] == {"followup": "interview"}
        listing = (await ask(tg, chat, alice, "/reminders"))["text"]
        assert "Friday 4 December 2026 at 10:00 (UTC): follow-up: your interview on 2026-12-03" in listing

        clock.advance(days=2, hours=21, minutes=59)  # Friday 09:59: not yet
        [courier] = pipeline.reminders.couriers
        await courier.tick()
        assert checkins(tg, chat["id"]) == []
        clock.advance(minutes=1, seconds=1)
        await tg.wait_until(lambda: checkins(tg, chat["id"]))

        async def recorded():
            return (await pipeline.reminders.api.state()) == {"open": 0, "done": 1}

        await wait_until(recorded, timeout=15, what="the check-in recorded")
        clock.advance(days=1)
        await courier.tick()
    assert checkins(tg, chat["id"]) == ["Alice, how did your interview go?"]


async def test_no_opt_in_no_follow_up_and_a_group_needs_its_own(tg, openai, tmp_path):
    clock = Clock()
    alice, bob = tg.user(111, "Alice"), tg.user(222, "Bob")
    private, group = tg.private_chat(alice), tg.group(-100555)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        await ask(tg, private, bob, "flying to Oslo tomorrow")  # Bob never opted in
        await ask(tg, private, alice, "/followups on")  # Alice opted in privately, not in the group
        await ask(tg, group, alice, "@memo_test_bot my interview is on Thursday at 10")
        assert await pending(pipeline, group) == []
        assert await pending(pipeline, tg.private_chat(bob)) == []
        await ask(tg, group, bob, "/followups on")
        tg.send(group, bob, "I'm flying to Oslo tomorrow")  # not addressed to the bot: read all the same

        async def kept_one():
            return await pending(pipeline, group)

        [kept] = await wait_until(kept_one, timeout=15, what="Bob's plan kept")
        assert kept["author"] == "Bob" and kept["every"] == {"followup": "flight"}
        clock.advance(days=2)
        await tg.wait_until(lambda: checkins(tg, group["id"]))
    assert checkins(tg, group["id"]) == ["Bob, how did your flight go?"]
    assert checkins(tg, private["id"]) == []


async def test_followups_off_and_forgetme_take_pending_ones_away(tg, openai, tmp_path):
    clock = Clock()
    alice, bob = tg.user(111, "Alice"), tg.user(222, "Bob")
    group = tg.group(-100556)
    async with bot(tg, settings_for(tg, openai), tmp_path, clock) as pipeline:
        for who in (alice, bob):
            await ask(tg, group, who, "/followups on")
        await ask(tg, group, alice, "@memo_test_bot my exam is next monday")
        await ask(tg, group, bob, "@memo_test_bot my interview is on Thursday")
        assert len(await pending(pipeline, group)) == 2
        off = (await ask(tg, group, alice, "/followups off"))["text"]
        assert "1 pending check-in(s) cancelled" in off
        assert [r["author"] for r in await pending(pipeline, group)] == ["Bob"]
        assert "are off" in (await ask(tg, group, alice, "/followups"))["text"]
        await ask(tg, group, alice, "@memo_test_bot my flight is on Friday")  # off: not kept
        assert [r["author"] for r in await pending(pipeline, group)] == ["Bob"]
        await ask(tg, group, bob, "/forgetme")
        assert await pending(pipeline, group) == []
        clock.advance(days=8)
        [courier] = pipeline.reminders.couriers
        await courier.tick()
    assert checkins(tg, group["id"]) == []


async def test_a_capped_person_gets_the_check_in_after_the_reset(tg, openai, tmp_path):
    clock = Clock()
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    settings = settings_for(tg, openai)
    settings = replace(settings, limits=replace(settings.limits, user_messages_per_day=3))
    async with bot(tg, settings, tmp_path, clock) as pipeline:
        await ask(tg, chat, alice, "/followups on")
        await ask(tg, chat, alice, "my interview is tomorrow")  # the check-in: Thursday 10:00
        clock.advance(days=1, hours=21, minutes=30)  # Thursday 09:30: Alice talks a lot
        for n in range(3):
            await ask(tg, chat, alice, f"message {n}")
        clock.advance(minutes=31)

        async def handed_over():
            return (await pipeline.reminders.api.state())["open"] == 1

        await wait_until(handed_over, timeout=15, what="the check-in handed to the bot")
        [courier] = pipeline.reminders.couriers
        await courier.tick()
        assert courier.delivered == 0 and checkins(tg, chat["id"]) == []  # over her cap: it waits
        assert (await pipeline.reminders.api.state())["open"] == 1  # kept, not dropped
        clock.advance(hours=14)  # past midnight UTC: the caps reset
        await tg.wait_until(lambda: checkins(tg, chat["id"]))
    assert checkins(tg, chat["id"]) == ["Alice, how did your interview go?"]
