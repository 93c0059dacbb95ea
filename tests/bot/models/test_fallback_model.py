"""The tier fallback is itself a chat model (as pydantic-ai's FallbackModel): the same `complete`
and `start_stream` as one tier's model, its attempts carried by the answer, the stream, or the
exception group raised when every tier failed. In process, scripted models, no waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.chat.models.base import ChatModel, ModelAnswer, ModelFailure, ModelRequest
from bot.chat.models.fallback import AllTiersFailed, FallbackModel, RetryPolicy

POLICY = RetryPolicy(time_budget_s=60.0, request_timeout_s=30.0, max_attempts_per_tier=2, max_wait_s=5.0)


class Pieces:
    """A started stream of fixed pieces."""

    def __init__(self, model: str, pieces: list[str]) -> None:
        self.model, self.notice, self.pieces = model, "", pieces
        self.prompt_tokens, self.completion_tokens = 0, 0

    async def __aiter__(self) -> AsyncIterator[str]:
        for piece in self.pieces:
            yield piece
        self.prompt_tokens, self.completion_tokens = 7, len(self.pieces)

    async def aclose(self) -> None:
        """Nothing to release."""


class Scripted:
    """A tier's model that fails `fails` times (with `failure`) and then answers."""

    def __init__(self, model: str, fails: int = 0, failure: Exception | None = None) -> None:
        self.model, self.fails, self.calls = model, fails, 0
        self.failure = failure or ModelFailure("server", "HTTP 500", retryable=True, status=500)

    def _call(self) -> None:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.failure

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        self._call()
        return ModelAnswer(f"answer of {self.model}", self.model, 10, 5)

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> Pieces:
        self._call()
        return Pieces(self.model, ["a", "b"])


class Clock:
    """An injected clock that each pause moves on: nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def request(*tiers: str) -> ModelRequest:
    return ModelRequest(({"role": "user", "content": "hi"},), "test:chat", "Ann", "1", "hi", tiers=tiers)


def fallback(**models: ChatModel) -> tuple[FallbackModel, Clock]:
    clock = Clock()
    return FallbackModel(models, POLICY, clock=clock, sleep=clock.sleep), clock


async def test_it_is_a_chat_model_whose_answer_carries_every_attempt_the_good_one_last():
    standard, light = Scripted("m-standard", fails=2), Scripted("m-light")
    model, _ = fallback(standard=standard, light=light)
    one: ChatModel = model  # the pipeline talks to it as to any model (mypy checks this line)
    answer = await one.complete(request("standard", "light"), timeout=60)
    assert answer.text == "answer of m-light" and one.model == "fallback:m-standard,m-light"
    assert [(a.tier, a.number, a.ok, a.kind) for a in answer.attempts] == [
        ("standard", 1, False, "server"),
        ("standard", 2, False, "server"),
        ("light", 3, True, ""),
    ]
    assert answer.attempts[-1].text == answer.text and answer.attempts[-1].prompt_tokens == 10


async def test_the_request_names_the_order_and_without_one_its_own_order_is_tried():
    standard, light = Scripted("m-standard"), Scripted("m-light")
    model, _ = fallback(standard=standard, light=light)
    assert (await model.complete(request("light", "standard"), timeout=60)).attempts[-1].tier == "light"
    assert (await model.complete(request(), timeout=60)).attempts[-1].tier == "standard"
    assert (standard.calls, light.calls) == (1, 1)


async def test_every_tier_failing_raises_an_exception_group_of_the_attempts():
    refused = ModelFailure("refused", "HTTP 401", retryable=False, status=401)
    model, _ = fallback(standard=Scripted("s", fails=9), light=Scripted("l", fails=9, failure=refused))
    with pytest.raises(AllTiersFailed) as caught:
        await model.complete(request("standard", "light"), timeout=60)
    group = caught.value
    assert [type(e) for e in group.exceptions] == [ModelFailure] * 3  # 2 tries of standard, 1 of light
    assert [(a.tier, a.ok, a.status) for a in group.attempts] == [
        ("standard", False, 500),
        ("standard", False, 500),
        ("light", False, 401),
    ]


async def test_a_bug_is_in_the_group_and_ends_the_message_without_another_tier():
    light = Scripted("l")
    model, _ = fallback(standard=Scripted("s", fails=1, failure=KeyError("choices")), light=light)
    with pytest.raises(AllTiersFailed) as caught:
        await model.complete(request("standard", "light"), timeout=60)
    assert isinstance(caught.value.exceptions[-1], KeyError) and light.calls == 0
    assert [(a.tier, a.kind) for a in caught.value.attempts] == [("standard", "internal")]


async def test_the_timeout_it_is_given_is_the_whole_budget():
    slow = ModelFailure("rate_limit", "rate limited", retryable=True, retry_after=3.0, status=429)
    model, clock = fallback(standard=Scripted("s", fails=9, failure=slow))
    with pytest.raises(AllTiersFailed) as caught:
        await model.complete(request("standard"), timeout=2.0)  # no time to wait out the 3 s
    assert len(caught.value.attempts) == 1 and clock.now == 1000.0


async def test_a_stream_carries_its_failed_starts_and_gives_its_own_attempt_when_it_ends():
    model, clock = fallback(standard=Scripted("s", fails=2), light=Scripted("l"))
    stream = await model.start_stream(request("standard", "light"), timeout=60)
    assert [(a.tier, a.ok) for a in stream.failed] == [("standard", False), ("standard", False)]
    assert "".join([piece async for piece in stream]) == "ab"
    clock.now += 0.5
    own = stream.attempt(ok=True, error=None)
    assert (own.tier, own.model, own.number, own.ok) == ("light", "l", 3, True)
    assert (own.prompt_tokens, own.completion_tokens) == (7, 2) and own.latency_ms == 500.0
