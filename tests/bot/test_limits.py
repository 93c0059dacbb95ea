"""Daily caps ([limits]): per person and per chat, messages and cost, counted by the memory worker.

Each cap is reached, answered without a model call (which cap, when it resets), the message
still recorded; the next UTC day it is lifted. Bot and memory host share one injected clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from bot.app import build_pipeline
from bot.chat.limits import CapHit, check, next_reset
from bot.chat.pipeline import Pipeline
from bot.config import LimitSettings
from tests.fakes.openai_server import Answer, Echo, FakeOpenAI
from tests.support import FAST, make_settings, msg

EVENING = datetime(2026, 3, 10, 22, 0, tzinfo=UTC)
DEAR = Answer("that was expensive", prompt_tokens=1_000_000, completion_tokens=0)  # $0.40 on "standard"


@contextlib.asynccontextmanager
async def capped(tmp_path, fake: FakeOpenAI, now: list[datetime], **caps: float) -> AsyncIterator[Pipeline]:
    """A pipeline with `caps` ([limits]) whose bot and memory host read the clock `now[0]`."""
    settings = replace(make_settings(fake.url, daily_budget_usd=100.0), limits=LimitSettings(**caps))
    async with build_pipeline(settings, tmp_path, options=FAST, clock=lambda: now[0]) as pipeline:
        yield pipeline


async def test_the_per_person_message_cap_answers_without_a_model_and_lifts_the_next_day(tmp_path):
    now = [EVENING]
    async with (
        FakeOpenAI(default=Echo()) as fake,
        capped(tmp_path, fake, now, user_messages_per_day=2) as pipeline,
    ):
        one = await pipeline.handle(msg("first question"))
        two = await pipeline.handle(msg("second question"))
        three = await pipeline.handle(msg("third question about zebras"))
        streamed = "".join([p async for p in pipeline.stream(msg("fourth, streamed"))])
        bob = await pipeline.handle(msg("bob is not capped", author="bob", author_id="u2"))
        found = await pipeline.memory.search("test:chat", "zebras")
        calls_today = len(fake.requests)
        now[0] = EVENING + timedelta(hours=2, minutes=1)  # 00:01 UTC the next day
        next_day = await pipeline.handle(msg("a new day"))
    assert one.text == "echo: first question" and two.text == "echo: second question"
    assert "user_messages_per_day" in three.text and "limit of 2" in three.text
    assert "00:00 UTC" in three.text and "in 2 h 0 min" in three.text
    assert streamed == three.text  # the same answer when streamed
    assert bob.text == "echo: bob is not capped"
    assert found[0]["text"] == "third question about zebras"  # still recorded
    assert calls_today == 3  # two of Ada's, one of Bob's: no model call over the cap
    assert next_day.text == "echo: a new day" and len(fake.requests) == 4


async def test_the_chat_message_cap_counts_everyone(tmp_path):
    now = [EVENING]
    async with (
        FakeOpenAI(default=Echo()) as fake,
        capped(tmp_path, fake, now, chat_messages_per_day=3) as pipeline,
    ):
        for who in ("u1", "u2", "u3"):
            assert (await pipeline.handle(msg(f"hello from {who}", author_id=who))).text.startswith("echo:")
        fourth = await pipeline.handle(msg("one too many", author_id="u4"))
        now[0] += timedelta(days=1)
        tomorrow = await pipeline.handle(msg("a new day", author_id="u4"))
    assert fourth.text.startswith(
        "This chat has reached the daily limit of 3 messages (chat_messages_per_day)"
    )
    assert tomorrow.text.startswith("echo:") and len(fake.requests) == 4


async def test_the_cost_caps_count_what_was_spent_and_hold_across_a_restart(tmp_path):
    now = [EVENING]
    async with FakeOpenAI(default=DEAR) as fake:
        async with capped(
            tmp_path, fake, now, user_cost_usd_per_day=0.5, chat_cost_usd_per_day=1.0
        ) as pipeline:
            first = await pipeline.handle(msg("one"))  # spent before: $0
            second = await pipeline.handle(msg("two"))  # $0.40 < $0.50
            third = await pipeline.handle(msg("three"))  # $0.80: over Ada's cap
            bob = await pipeline.handle(msg("bob's turn", author="bob", author_id="u2"))  # chat $0.80 < $1
            carol = await pipeline.handle(msg("carol's turn", author="carol", author_id="u3"))  # chat $1.20
        # A new process: the counts are the memory worker's, not this process's.
        async with capped(
            tmp_path, fake, now, user_cost_usd_per_day=0.5, chat_cost_usd_per_day=1.0
        ) as pipeline:
            after_restart = await pipeline.handle(msg("four"))
            now[0] += timedelta(days=1)
            next_day = await pipeline.handle(msg("five"))
    assert first.text == second.text == bob.text == "that was expensive"
    assert "You have reached the daily limit of $0.50" in third.text and "user_cost_usd_per_day" in third.text
    assert "This chat has reached the daily limit of $1.00" in carol.text
    # Both of Ada's caps are over after the restart; the person's is checked (and named) first.
    assert "You have reached the daily limit of $0.50" in after_restart.text
    assert "user_cost_usd_per_day" in after_restart.text and "chat_cost" not in after_restart.text
    assert next_day.text == "that was expensive" and len(fake.requests) == 4


async def test_usage_shows_what_is_left_today(tmp_path):
    now = [EVENING]
    async with FakeOpenAI(default=Echo()) as fake:
        async with capped(tmp_path, fake, now, user_messages_per_day=2, chat_messages_per_day=5) as pipeline:
            await pipeline.handle(msg("hello"))
            await pipeline.handle(msg("hi", author="bob", author_id="u2"))
            usage = await pipeline.command(msg("/usage"), "usage", "")
        async with capped(tmp_path, fake, now) as pipeline:
            uncapped = await pipeline.command(msg("/usage"), "usage", "")
    assert "user_messages_per_day: 1 of 2 used, 1 left" in usage.text
    assert "chat_messages_per_day: 2 of 5 used, 3 left" in usage.text
    assert "in 2 h 0 min" in usage.text and usage.image_png  # the chart is still there
    assert "none set" in uncapped.text


def test_a_zero_cap_is_no_cap_and_the_reset_is_the_next_utc_midnight():
    huge = {"messages": 10**6, "chat_messages": 10**6, "cost_usd": 10**6}
    assert check(LimitSettings(0, 0, 0.0, 0.0), {"t": {"cost_usd": 10**6}}, huge, EVENING) is None
    hit = check(LimitSettings(0, 0, 0.0, 5.0), {"a": {"cost_usd": 3.0}, "b": {"cost_usd": 2.0}}, {}, EVENING)
    assert hit == CapHit("chat_cost_usd_per_day", 5.0, datetime(2026, 3, 11, tzinfo=UTC))
    assert next_reset(datetime(2026, 12, 31, 23, 59, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)


async def test_every_early_exit_is_logged_the_same_way_whether_handled_or_streamed(tmp_path, caplog):
    """One turn line per message, early exits included: before, a capped turn on the streaming
    path was never logged."""
    import logging

    from bot.chat.types import IncomingMessage

    caplog.set_level(logging.INFO, logger="bot.chat.pipeline")
    now = [EVENING]
    async with (
        FakeOpenAI(default=Echo()) as fake,
        capped(tmp_path, fake, now, user_messages_per_day=1) as pipeline,
    ):
        await pipeline.handle(msg("first question"))
        await pipeline.handle(msg("over the cap"))
        assert "".join([p async for p in pipeline.stream(msg("over the cap, streamed"))])
        chatter = IncomingMessage("test:chat", "ada", "u1", "group chatter", addressed=False)
        await pipeline.handle(chatter)
        assert [p async for p in pipeline.stream(chatter)] == []
    lines = [r.fields for r in caplog.records if r.getMessage().startswith("turn ")]
    assert [(f["exit"], f["ok"]) for f in lines] == [
        ("answered", True),
        ("capped", True),
        ("capped", True),
        ("recorded", True),
        ("recorded", True),
    ]
    assert all(f["chat"] == "test:chat" and f["request_id"] != "-" for f in lines)
