"""The tier router against the fake OpenAI server and the real local memory host, over HTTP."""

from __future__ import annotations

import logging
import random
import time

import pytest

from bot.chat.pipeline import APOLOGY
from tests.fakes.openai_server import (
    Answer,
    Echo,
    FakeOpenAI,
    Garbage,
    Hang,
    RateLimit,
    ServerError,
)
from tests.support import API_KEY, INSTANT, make_settings, msg, running_pipeline, tier_totals


async def test_plain_answer_is_recorded_with_tokens_and_cost(tmp_path):
    async with (
        FakeOpenAI(default=Answer("Hello Ada", prompt_tokens=1000, completion_tokens=500)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        reply = await pipeline.handle(msg("please tell me something nice about the weather today"))
        assert (reply.text, reply.tier, reply.ok, reply.with_memory) == (
            "Hello Ada",
            "standard",
            True,
            True,
        )
        usage = await pipeline.memory.usage("test:chat")
        row = usage["tiers"]["standard"]
        assert (row["calls"], row["errors"], row["prompt_tokens"], row["completion_tokens"]) == (
            1,
            0,
            1000,
            500,
        )
        # price table: 0.4 $/Mtok in, 1.6 $/Mtok out
        assert row["cost_usd"] == pytest.approx(1000 * 0.4e-6 + 500 * 1.6e-6)
        assert fake.requests[0].headers["Authorization"] == f"Bearer {API_KEY}"
        stats = await pipeline.memory.stats("test:chat")
        assert stats["total_messages"] == 2


async def test_429_retry_after_is_honoured_then_same_tier_answers(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(RateLimit(retry_after=0.4), Answer("after the wait"), model="m-standard")
        async with running_pipeline(make_settings(fake.url), tmp_path) as pipeline:
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            assert reply.text == "after the wait" and reply.tier == "standard"
            assert fake.models_called() == ["m-standard", "m-standard"]
            assert fake.requests[1].at - fake.requests[0].at >= 0.4
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (2, 1)}


async def test_long_retry_after_moves_on_and_cools_the_tier(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(RateLimit(retry_after=30), model="m-standard")
        async with running_pipeline(make_settings(fake.url, max_retry_wait_s=2.0), tmp_path) as pipeline:
            started = time.monotonic()
            first = await pipeline.handle(msg("hello, how is it going over there?"))
            assert time.monotonic() - started < 8.0  # did not wait 30 s
            assert first.tier == "light" and first.ok
            second = await pipeline.handle(msg("and how is the weather over there?"))
            assert second.tier == "light"
            # standard was asked once, then skipped while cooling down
            assert fake.models_called() == ["m-standard", "m-light", "m-light"]
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {
                "light": (2, 0),
                "standard": (1, 1),
            }


async def test_5xx_twice_falls_back_in_configured_order(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(ServerError(500), ServerError(503), model="m-standard")
        fake.script(ServerError(502), ServerError(500), model="m-light")
        async with running_pipeline(
            make_settings(fake.url, fallback=("standard", "light", "heavy")), tmp_path, options=INSTANT
        ) as pipeline:
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            assert reply.ok and reply.tier == "heavy"
            assert fake.models_called() == ["m-standard", "m-standard", "m-light", "m-light", "m-heavy"]
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {
                "heavy": (1, 0),
                "light": (2, 2),
                "standard": (2, 2),
            }


async def test_hang_past_timeout_then_next_tier(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(Hang(), Hang(), model="m-standard")
        settings = make_settings(fake.url, request_timeout_s=0.3)
        async with running_pipeline(settings, tmp_path) as pipeline:
            started = time.monotonic()
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            elapsed = time.monotonic() - started
            assert reply.ok and reply.tier == "light"
            assert 0.6 <= elapsed < 8.0  # two timeouts, not the 10 s budget
            usage = await pipeline.memory.usage("test:chat")
            failed = [r for r in usage["recent"] if not r["ok"]]
            assert len(failed) == 2 and all(r["latency_ms"] >= 250 for r in failed)


async def test_garbage_bodies_are_malformed_answers(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(Garbage("<html>oops</html>"), Garbage('{"foo": 1}'), model="m-standard")
        fake.script(Garbage("plain words", "text/plain"), Answer("real answer"), model="m-light")
        async with running_pipeline(make_settings(fake.url), tmp_path, options=INSTANT) as pipeline:
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            assert reply.text == "real answer" and reply.tier == "light"
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {
                "light": (2, 1),
                "standard": (2, 2),
            }


async def test_refusal_is_not_retried(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(ServerError(401, "bad key"), model="m-standard")
        async with running_pipeline(make_settings(fake.url), tmp_path) as pipeline:
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            assert reply.tier == "light"
            assert fake.models_called() == ["m-standard", "m-light"]


async def test_every_tier_failing_gives_a_plain_apology_and_loses_nothing(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(500)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        reply = await pipeline.handle(msg("hello, how is it going over there?", message_id="m1"))
        assert not reply.ok and reply.text == APOLOGY and "sorry" in reply.text.lower()
        assert "unavailable" in reply.text
        assert fake.models_called() == ["m-standard"] * 2 + ["m-light"] * 2 + ["m-heavy"] * 2
        assert tier_totals(await pipeline.memory.usage("test:chat")) == {
            "heavy": (2, 2),
            "light": (2, 2),
            "standard": (2, 2),
        }
        stats = await pipeline.memory.stats("test:chat")
        assert stats["total_messages"] == 1  # the user's message is kept


async def test_time_budget_caps_the_whole_answer(tmp_path):
    async with FakeOpenAI(default=Hang()) as fake:
        settings = make_settings(fake.url, time_budget_s=1.0, request_timeout_s=2.0)
        async with running_pipeline(settings, tmp_path) as pipeline:
            started = time.monotonic()
            reply = await pipeline.handle(msg("hello, how is it going over there?"))
            assert not reply.ok and "sorry" in reply.text.lower()
            assert time.monotonic() - started < 6.0  # the 1 s budget, not 6 attempts x 2 s
            usage = await pipeline.memory.usage("test:chat")
            assert sum(c for c, _ in tier_totals(usage).values()) == len(fake.requests)


async def test_random_faults_every_message_answered_every_attempt_recorded(tmp_path):
    rng = random.Random(7)
    faults = [
        lambda: RateLimit(retry_after=0.01),
        lambda: ServerError(500),
        lambda: Garbage(),
        lambda: Hang(),
        lambda: Echo(),
        lambda: Echo(),
        lambda: Echo(),
    ]

    async with FakeOpenAI() as fake:
        fake.responder = lambda req: rng.choice(faults)()
        settings = make_settings(fake.url, request_timeout_s=0.5, time_budget_s=5.0)
        async with running_pipeline(settings, tmp_path, options=INSTANT) as pipeline:
            replies = []
            for i in range(30):
                replies.append(
                    await pipeline.handle(msg(f"message number {i} about nothing much", message_id=f"r{i}"))
                )
            for i, reply in enumerate(replies):
                assert reply.text, i
                if reply.ok:
                    assert reply.text == f"echo: message number {i} about nothing much"
                else:
                    assert reply.text == APOLOGY
            usage = await pipeline.memory.usage("test:chat")
            totals = tier_totals(usage)
            assert sum(c for c, _ in totals.values()) == len(fake.requests)
            assert sum(c - e for c, e in totals.values()) == sum(r.ok for r in replies)
            stats = await pipeline.memory.stats("test:chat")
            assert stats["total_messages"] == 30 + sum(r.ok for r in replies)
            assert sum(r.ok for r in replies) >= 25


async def test_forced_prefix_uses_that_tier_and_is_stripped(tmp_path):
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        reply = await pipeline.handle(msg("!heavy what is two plus two"))
        assert reply.tier == "heavy" and reply.text == "echo: what is two plus two"
        results = await pipeline.memory.search("test:chat", "plus")
        assert [r["text"] for r in results if r["role"] == "user"] == ["what is two plus two"]


async def test_daily_budget_moves_chat_down_a_tier(tmp_path):
    # One standard answer costs 11*0.4e-6 + 7*1.6e-6 = 1.56e-5 USD.
    async with (
        FakeOpenAI(default=Answer("ok", prompt_tokens=11, completion_tokens=7)) as fake,
        running_pipeline(make_settings(fake.url, daily_budget_usd=1.0e-5), tmp_path) as pipeline,
    ):
        first = await pipeline.handle(msg("hello, how is it going over there?"))
        second = await pipeline.handle(msg("and how is the weather over there?"))
        assert (first.tier, second.tier) == ("standard", "light")


async def test_concurrent_messages_in_one_chat_all_answered_and_recorded_once(tmp_path):
    import asyncio

    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        replies = await asyncio.gather(
            *(
                pipeline.handle(msg(f"parallel message {i} for the record", message_id=f"p{i}"))
                for i in range(20)
            )
        )
        assert [r.text for r in replies] == [f"echo: parallel message {i} for the record" for i in range(20)]
        # the same messages again (an adapter retrying): acknowledged, not stored twice
        await asyncio.gather(
            *(
                pipeline.record(msg(f"parallel message {i} for the record", message_id=f"p{i}"))
                for i in range(20)
            )
        )
        assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 40
        assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (20, 0)}


@pytest.mark.parametrize("bug", [ZeroDivisionError, TypeError, KeyError, AttributeError])
async def test_a_bug_in_a_model_call_is_not_retried_it_is_logged_and_answered_with_the_apology(
    tmp_path, caplog, bug
):
    """A programming error is not a model failure: no retry, no other tier (it would hide the
    bug for the whole time budget), its traceback in the log, the apology for the user."""
    from bot.chat.models.base import ModelAnswer

    calls: list[str] = []

    class Broken:
        model = "broken"

        async def complete(self, request, *, timeout):
            calls.append("broken")
            raise bug("bug")

        async def start_stream(self, request, *, timeout):
            calls.append("broken")
            raise bug("bug")

    class Fine:
        model = "fine"

        async def complete(self, request, *, timeout):
            calls.append("fine")
            return ModelAnswer("fine answer", "fine", 1, 1)

        async def start_stream(self, request, *, timeout):
            raise AssertionError("not used")

    caplog.set_level(logging.ERROR)
    settings = make_settings(None, api_key=None)
    async with running_pipeline(
        settings, tmp_path, models={"standard": Broken(), "light": Fine()}
    ) as pipeline:
        reply = await pipeline.handle(msg("hello there, how is it going today"))
        streamed = "".join([p async for p in pipeline.stream(msg("and now streamed, how is it going"))])
        usage = await pipeline.memory.usage("test:chat")
    assert not reply.ok and reply.text.startswith(APOLOGY) and streamed.startswith(APOLOGY)
    assert calls == ["broken", "broken"]  # once per message: never retried, never another tier
    assert tier_totals(usage) == {"standard": (2, 2)}  # each attempt recorded, failed
    [error] = {r.exc_info[0] for r in caplog.records if r.exc_info}
    assert error is bug  # logged with its traceback
