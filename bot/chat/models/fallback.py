"""The tier fallback, itself a chat model: it tries tiers in order, with retries, in one budget.

Like pydantic-ai's `FallbackModel`, `FallbackModel` has the interface of the models it wraps
(`ChatModel`: `complete` and `start_stream`), so the pipeline talks to one model, and when
every attempt failed it raises an exception group of them (`AllTiersFailed`). Its own parts:
- the tiers tried are the request's `tiers` (the tier router's choice first, see tiers.py),
  else the order it was built with; the `timeout` it is given is the whole message's budget
  (at most [router] time_budget_s);
- every attempt is reported, to be recorded as one routerUsage row: an answer carries all of
  its attempts (`ModelAnswer.attempts`, the good one last, as pydantic-ai's responses carry
  their failed attempts); a started stream carries its failed starts (`TierStream.failed`) and
  gives its own attempt when it ends (`TierStream.attempt`); `AllTiersFailed.attempts` holds
  those of a message no tier answered;
- retryable failures (429, 5xx, timeout, connection error, malformed answer) are tried
  again on the same tier, up to `max_attempts_per_tier`, after a backoff: the server's
  Retry-After when it gave one, else 0.25 s, 0.5 s, 1 s ... with jitter;
- a Retry-After longer than `max_wait_s` (or than the budget left) is honoured by not asking
  that tier again before then: the fallback moves on to the next tier at once, and later
  messages skip the tier until its cool-down ends;
- a refusal (400/401/403/404) moves on to the next tier at once;
- when every tier failed, a tier that is only pausing (its Retry-After ends within
  `max_wait_s` and the budget) gets one last try after the pause, instead of an apology;
- every attempt gets `min(request_timeout_s, budget left)`;
- a programming error inside a model call (TypeError, KeyError, AttributeError...: anything
  but a `ModelFailure`, which the models raise for transport, HTTP and malformed answers) is
  never retried nor sent to another tier: it is logged with its traceback, reported as a
  failed attempt, and ends the message at once (the user reads the apology).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from bot.chat.models.base import (
    AnswerStream,
    Attempt,
    ChatModel,
    ModelAnswer,
    ModelFailure,
    ModelRequest,
)
from bot.chat.retry import RetryPlan
from bot.config import RouterSettings
from bot.errors import AllTiersFailed

log = logging.getLogger(__name__)

__all__ = ["AllTiersFailed", "Attempt", "FallbackModel", "RetryPolicy", "TierStream"]


@dataclass(frozen=True)
class RetryPolicy:
    """Budget and backoff of the tier fallback ([router] of bot.toml)."""

    time_budget_s: float
    request_timeout_s: float
    max_attempts_per_tier: int
    max_wait_s: float  # a longer Retry-After: the next tier at once
    base_backoff_s: float = 0.25
    max_backoff_s: float = 4.0

    @classmethod
    def from_settings(cls, router: RouterSettings) -> RetryPolicy:
        """The policy the settings' [router] table states."""
        return cls(
            time_budget_s=router.time_budget_s,
            request_timeout_s=router.request_timeout_s,
            max_attempts_per_tier=router.max_attempts_per_tier,
            max_wait_s=router.max_retry_wait_s,
        )


class TierStream:
    """A started stream of one tier (an `AnswerStream`), with the failed starts before it."""

    def __init__(
        self,
        inner: AnswerStream,
        tier: str,
        number: int,
        started: float,
        failed: tuple[Attempt, ...],
        clock: Callable[[], float],
    ) -> None:
        self.inner = inner
        self.tier = tier
        self.number = number  # this attempt's number, 1-based over the whole message
        self.failed = failed  # the attempts that failed to start, in order
        self._started = started
        self._clock = clock

    @property
    def model(self) -> str:
        """The model that answers."""
        return self.inner.model

    @property
    def notice(self) -> str:
        """The inner stream's notice (shown, never recorded)."""
        return self.inner.notice

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens the API reported."""
        return self.inner.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        """Completion tokens the API reported."""
        return self.inner.completion_tokens

    def __aiter__(self) -> AsyncIterator[str]:
        return self.inner.__aiter__()

    async def aclose(self) -> None:
        """Stop reading and release the connection."""
        await self.inner.aclose()

    def attempt(self, ok: bool, error: str | None) -> Attempt:
        """This stream's own attempt, as it ended (its latency runs from its start to now)."""
        return Attempt(
            tier=self.tier,
            model=self.model,
            number=self.number,
            ok=ok,
            latency_ms=(self._clock() - self._started) * 1000.0,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            error=error,
        )


@dataclass(frozen=True)
class _Found:
    """The tier that answered: its answer (or started stream), start time and attempt number."""

    tier: str
    answer: ModelAnswer | AnswerStream
    started: float
    number: int


@dataclass
class _Run:
    """One message's way through the tiers."""

    request: ModelRequest
    streaming: bool
    deadline: float
    attempts: list[Attempt] = field(default_factory=list)  # in order; the good one last
    failures: list[Exception] = field(default_factory=list)


class FallbackModel:
    """A `ChatModel` over the tiers' models: see the module docstring."""

    def __init__(
        self,
        models: Mapping[str, ChatModel],
        policy: RetryPolicy,
        *,
        order: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.models = dict(models)
        self.order = tuple(order) or tuple(self.models)  # when a request names no tiers
        self.policy = policy
        self._clock = clock
        self._sleep = sleep  # injected by tests: the decisions stay, the waiting goes
        self._rng = rng or random.Random()
        self._plan = RetryPlan(first_s=policy.base_backoff_s, max_s=policy.max_backoff_s, jitter=True)
        self._cool_until: dict[str, float] = {}  # tier -> monotonic time it may be asked again

    @property
    def model(self) -> str:
        """pydantic-ai's naming: "fallback:" and the models in order."""
        return "fallback:" + ",".join(self.models[t].model for t in self.order if t in self.models)

    def now(self) -> float:
        """The fallback's clock (attempts' latencies are measured on it)."""
        return self._clock()

    def cooling(self, tier: str) -> float:
        """Seconds until a rate-limited tier may be asked again (0: now)."""
        return max(0.0, self._cool_until.get(tier, 0.0) - self._clock())

    def _backoff(self, retry_index: int, failure: ModelFailure) -> float:
        if failure.retry_after is not None:
            return failure.retry_after
        return self._plan.pause(retry_index, self._rng)  # jittered: no thundering herd

    def _start(self, request: ModelRequest, timeout: float, streaming: bool) -> _Run:
        budget = min(timeout, self.policy.time_budget_s)
        return _Run(request, streaming, self._clock() + budget)

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """The first good answer, with every attempt (`attempts`, the good one last); raises
        `AllTiersFailed` when every tier failed within `timeout` (and the policy's budget)."""
        run = self._start(request, timeout, streaming=False)
        found = await self._run(run)
        assert isinstance(found.answer, ModelAnswer)  # not streaming: an answer
        return replace(found.answer, attempts=tuple(run.attempts))

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> TierStream:
        """A started stream, with the failed starts before it; raises `AllTiersFailed` when no
        tier could start one in time. The caller records how the stream ends (`attempt`)."""
        run = self._start(request, timeout, streaming=True)
        found = await self._run(run)
        assert not isinstance(found.answer, ModelAnswer)  # streaming: a started stream
        return TierStream(
            found.answer, found.tier, found.number, found.started, tuple(run.attempts), self._clock
        )

    def _failed_all(self, message: str, run: _Run, failures: list[Exception]) -> AllTiersFailed:
        group = AllTiersFailed(message, failures)
        group.attempts = tuple(run.attempts)
        return group

    async def _run(self, run: _Run) -> _Found:
        order = run.request.tiers or self.order
        cooling: list[str] = []
        for tier in order:
            if self.models.get(tier) is None:
                continue
            if self.cooling(tier) > 0:
                cooling.append(tier)
                continue
            result = await self._try_tier(tier, run)
            if result is not None:
                return result
            if self.cooling(tier) > 0:
                cooling.append(tier)  # it asked for a pause on its last attempt
        # Every tier failed: one that is only pausing (a short Retry-After) gets a last try,
        # rather than an apology a few hundred milliseconds too early.
        for tier in sorted(cooling, key=self.cooling):
            wait = self.cooling(tier)
            if wait > self.policy.max_wait_s or self._clock() + wait >= run.deadline - 0.01:
                continue
            await self._sleep(wait)
            result = await self._try_tier(tier, run, tries=1)
            if result is not None:
                return result
        if not run.failures:  # nothing was tried: every tier missing, cooling, or no budget
            run.failures.append(
                ModelFailure("unavailable", "no tier could be asked in time", retryable=False)
            )
        raise self._failed_all("every tier failed", run, run.failures)

    async def _try_tier(self, tier: str, run: _Run, tries: int | None = None) -> _Found | None:
        """Up to `tries` (default: the policy's) attempts on one tier; the result, or None."""
        model = self.models[tier]
        tries = tries or max(1, self.policy.max_attempts_per_tier)
        for try_index in range(tries):
            left = run.deadline - self._clock()
            if left <= 0.01:
                return None
            number = len(run.attempts) + 1
            started = self._clock()
            timeout = min(self.policy.request_timeout_s, left)
            try:
                if run.streaming:
                    stream = await model.start_stream(run.request, timeout=timeout)
                    return _Found(tier, stream, started, number)
                answer = await model.complete(run.request, timeout=timeout)
            except ModelFailure as failure:
                run.failures.append(failure)
                run.attempts.append(self._failed(tier, model.model, number, started, failure))
                if not failure.retryable:
                    return None
                wait = self._backoff(try_index, failure)
                leave = (
                    try_index + 1 >= tries
                    or wait > self.policy.max_wait_s
                    or self._clock() + wait >= run.deadline  # no time to wait: the next tier may answer
                )
                if leave:
                    if failure.retry_after is not None:
                        # Honour Retry-After without waiting: skip this tier until then.
                        self._cool_until[tier] = self._clock() + failure.retry_after
                    return None
                await self._sleep(wait)
                continue
            except Exception as bug:  # a programming error: no retry, no other tier
                log.exception("model %s of tier %s failed with a bug", model.model, tier)
                internal = ModelFailure("internal", type(bug).__name__, retryable=False)
                run.attempts.append(self._failed(tier, model.model, number, started, internal))
                raise self._failed_all("a model call failed with a bug", run, [*run.failures, bug]) from None
            latency = (self._clock() - started) * 1000.0
            run.attempts.append(
                Attempt(
                    tier,
                    answer.model,
                    number,
                    True,
                    latency,
                    answer.prompt_tokens,
                    answer.completion_tokens,
                    text=answer.text,
                )
            )
            return _Found(tier, answer, started, number)
        return None

    def _failed(self, tier: str, model: str, number: int, started: float, failure: ModelFailure) -> Attempt:
        latency = (self._clock() - started) * 1000.0
        return Attempt(
            tier,
            model,
            number,
            False,
            latency,
            error=str(failure)[:500],
            kind=failure.kind,
            status=failure.status,
        )
