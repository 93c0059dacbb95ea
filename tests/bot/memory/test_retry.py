"""One Retry-After parser and one retry loop for every back-off (issue 21, item 5)."""

from __future__ import annotations

import email.utils
import time

import pytest

from bot.chat.retry import RetryPlan, patiently
from memory_engine.backoff import doubling, retry_after_s
from memory_engine.compaction.compact import SummarizerError, make_summarizer

NOW = 1_800_000_000.0


def test_retry_after_in_seconds_and_as_an_http_date():
    assert retry_after_s({"Retry-After": "7"}) == 7.0
    assert retry_after_s({"retry-after": " 0.5 "}) == 0.5
    assert retry_after_s({"RETRY-AFTER-MS": "250", "Retry-After": "9"}) == 0.25
    date = email.utils.formatdate(NOW + 30, usegmt=True)  # "Wed, 15 Jan 2027 08:00:30 GMT"
    assert retry_after_s({"Retry-After": date}, now=NOW) == 30.0
    assert retry_after_s({"Retry-After": email.utils.formatdate(NOW - 60, usegmt=True)}, now=NOW) == 0.0
    for unreadable in ("soon", "nan", "inf", "5 s"):
        assert retry_after_s({"Retry-After": unreadable}) is None
    assert retry_after_s({"Retry-After": "-5"}) == 0.0
    assert retry_after_s({}) is None and retry_after_s(None) is None


def test_a_model_429_reads_its_retry_after_with_the_same_parser():
    """The openai SDK's error (httpx headers, an HTTP date) gives the fallback the same wait."""
    import httpx
    import openai

    from bot.chat.models.openai_compat import failure_from

    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    response = httpx.Response(429, headers={"Retry-After": soon}, request=httpx.Request("POST", "http://x"))
    failure = failure_from(openai.RateLimitError("rate limited", response=response, body=None))
    assert failure is not None and failure.kind == "rate_limit"
    assert 25 <= (failure.retry_after or 0) <= 30


async def test_the_summarizer_honours_a_retry_after_given_as_a_date():
    date = email.utils.formatdate(time.time() + 120, usegmt=True)

    async def post(url, headers, body, timeout_s):
        return 429, {"Retry-After": date}, b"{}"

    summarize = make_summarizer("http://summarizer.invalid/v1", "m", None, post)
    with pytest.raises(SummarizerError) as caught:
        await summarize("", [{"role": "user", "text": "hi"}])
    assert 100_000 <= (caught.value.retry_after_ms or 0) <= 120_000  # seconds-only parsing gave None


def test_the_schedule():
    assert [doubling(i, 0.25, 1.0) for i in range(4)] == [0.25, 0.5, 1.0, 1.0]
    assert [RetryPlan(first_s=1, max_s=8, at_once=True).pause(i) for i in range(4)] == [0.0, 1, 2, 4]
    assert [RetryPlan(first_s=0.5, max_s=8, factor=4).pause(i) for i in range(3)] == [0.5, 2.0, 8.0]
    jittered = RetryPlan(first_s=1, max_s=1, jitter=True)
    assert all(0.5 <= jittered.pause(0) <= 1.0 for _ in range(50))


class Flaky(Exception):
    def __init__(self, wait: float | None = None) -> None:
        self.wait = wait


async def test_patiently_retries_within_the_plan_on_an_injected_clock():
    now = [0.0]
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    calls = [0]

    async def call() -> str:
        calls[0] += 1
        if calls[0] < 4:
            raise Flaky(wait=3.0 if calls[0] == 2 else None)
        return "done"

    got = await patiently(
        call,
        what="t",
        plan=RetryPlan(budget_s=60, first_s=1, max_s=8),
        transient=(Flaky,),
        wait_asked=lambda exc: getattr(exc, "wait", None),
        clock=lambda: now[0],
        sleep=sleep,
    )
    assert got == "done" and slept == [1.0, 3.0, 4.0]  # the server's 3 s replaced the schedule's 2 s

    async def never() -> str:
        raise Flaky()

    slept.clear()
    with pytest.raises(Flaky):
        await patiently(
            never, what="t", plan=RetryPlan(first_s=0, max_tries=3), transient=(Flaky,), sleep=sleep
        )
    assert len(slept) == 2  # three calls, two pauses
    with pytest.raises(Flaky):  # the budget: 1 + 2 + 4 = 7 s fit in 10 s, the next 8 s does not
        await patiently(
            never,
            what="t",
            plan=RetryPlan(budget_s=10, first_s=1, max_s=8),
            transient=(Flaky,),
            clock=lambda: now[0],
            sleep=sleep,
        )


async def test_a_final_error_is_not_retried():
    calls = [0]

    class Final(Flaky):
        pass

    async def call() -> None:
        calls[0] += 1
        raise Final()

    with pytest.raises(Final):
        await patiently(call, what="t", plan=RetryPlan(), transient=(Flaky,), final=(Final,))
    assert calls == [1]
