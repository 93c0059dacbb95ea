"""Calling the tiers: retries with backoff, then the next tier, all inside one time budget.

Like pydantic-ai's FallbackModel, but every attempt is reported (to be recorded as one
routerUsage row) and the retry policy is explicit:
- retryable failures (429, 5xx, timeout, connection error, malformed answer) are tried
  again on the same tier, up to `max_attempts_per_tier`, after a backoff: the server's
  Retry-After when it gave one, else 0.25 s, 0.5 s, 1 s ... with jitter;
- a Retry-After longer than `max_wait_s` (or than the budget left) is honoured by not asking
  that tier again before then: the router moves on to the next tier at once, and later
  messages skip the tier until its cool-down ends;
- a refusal (400/401/403/404) moves on to the next tier at once;
- when every tier failed, a tier that is only pausing (its Retry-After ends within
  `max_wait_s` and the budget) gets one last try after the pause, instead of an apology;
- every attempt gets `min(request_timeout_s, budget left)`; when the budget is spent or
  every tier failed, `AllTiersFailed` is raised: an exception group of every attempt's
  failure, and the caller tells the user plainly;
- a programming error inside a model call (TypeError, KeyError, AttributeError...: anything
  but a `ModelFailure`, which the models raise for transport, HTTP and malformed answers) is
  never retried nor sent to another tier: it is logged with its traceback, recorded as a
  failed attempt, and ends the message at once (the user reads the apology).

The result has one typed shape, `Answered`: the tier, the answer (a `ModelAnswer`, or a
started `AnswerStream`), when the attempt started and its number.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from bot.config import RouterSettings, default
from bot.router.models import AnswerStream, ChatModel, ModelAnswer, ModelFailure, ModelRequest
from bot.router.retry import RetryPlan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attempt:
    """One model call, good or failed: what gets recorded as a routerUsage row."""

    tier: str
    model: str
    number: int  # 1-based, over the whole message
    ok: bool
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    text: str = ""  # the answer, for a good non-streaming attempt
    kind: str = ""  # a failure's ModelFailure.kind and HTTP status: what to fix (model_errors.py)
    status: int | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Budget and backoff of the tier router."""

    time_budget_s: float = default("router", "time_budget_s")
    request_timeout_s: float = default("router", "request_timeout_s")
    max_attempts_per_tier: int = default("router", "max_attempts_per_tier")
    base_backoff_s: float = 0.25
    max_backoff_s: float = 4.0
    max_wait_s: float = default("router", "max_retry_wait_s")  # longer Retry-After: next tier

    @classmethod
    def from_settings(cls, router: RouterSettings) -> RetryPolicy:
        """The policy the settings' [router] table states."""
        return cls(
            time_budget_s=router.time_budget_s,
            request_timeout_s=router.request_timeout_s,
            max_attempts_per_tier=router.max_attempts_per_tier,
            max_wait_s=router.max_retry_wait_s,
        )


OnAttempt = Callable[[Attempt], Awaitable[None]]
R = TypeVar("R", ModelAnswer, AnswerStream)


@dataclass(frozen=True)
class Answered(Generic[R]):
    """The tier that answered: its answer (or started stream), start time and attempt number."""

    tier: str
    answer: R
    started: float  # the fallback's clock when this attempt began
    number: int  # 1-based, over the whole message


class AllTiersFailed(ExceptionGroup):
    """Every tier failed within the budget; the exceptions are the attempts' failures, in order
    (a bug in a model call among them, when that is what ended it)."""


@dataclass
class _Run:
    """One message's way through the tiers."""

    request: ModelRequest
    on_attempt: OnAttempt
    streaming: bool
    deadline: float
    count: int = 0  # attempt numbers run on over the whole message
    failures: list[Exception] = field(default_factory=list)


class TierFallback:
    """Tries tiers in a given order with retries, reporting every attempt through `on_attempt`
    (pydantic-ai's FallbackModel, with a retry policy and a record of each attempt)."""

    def __init__(
        self,
        models: Mapping[str, ChatModel],
        policy: RetryPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.models = dict(models)
        self.policy = policy
        self._clock = clock
        self._sleep = sleep  # injected by tests: the decisions stay, the waiting goes
        self._rng = rng or random.Random()
        self._plan = RetryPlan(first_s=policy.base_backoff_s, max_s=policy.max_backoff_s, jitter=True)
        self._cool_until: dict[str, float] = {}  # tier -> monotonic time it may be asked again

    def now(self) -> float:
        """The fallback's clock (attempts' `started` times are on it)."""
        return self._clock()

    def cooling(self, tier: str) -> float:
        """Seconds until a rate-limited tier may be asked again (0: now)."""
        return max(0.0, self._cool_until.get(tier, 0.0) - self._clock())

    def _backoff(self, retry_index: int, failure: ModelFailure) -> float:
        if failure.retry_after is not None:
            return failure.retry_after
        return self._plan.pause(retry_index, self._rng)  # jittered: no thundering herd

    async def complete(
        self, order: Sequence[str], request: ModelRequest, on_attempt: OnAttempt
    ) -> Answered[ModelAnswer]:
        """The first good answer; raises `AllTiersFailed` when every tier failed in time."""
        return await self._run(order, _Run(request, on_attempt, False, self._deadline()))  # type: ignore[return-value]  # streaming=False: a ModelAnswer

    async def start_stream(
        self, order: Sequence[str], request: ModelRequest, on_attempt: OnAttempt
    ) -> Answered[AnswerStream]:
        """A started stream; raises `AllTiersFailed` when no tier could start one in time.

        Failed starts are reported through `on_attempt`; the caller reports how the
        started stream ends (one attempt, good or cut off).
        """
        return await self._run(order, _Run(request, on_attempt, True, self._deadline()))  # type: ignore[return-value]  # streaming=True: an AnswerStream

    def _deadline(self) -> float:
        return self._clock() + self.policy.time_budget_s

    async def _run(self, order: Sequence[str], run: _Run) -> Answered[ModelAnswer] | Answered[AnswerStream]:
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
        raise AllTiersFailed("every tier failed", run.failures)

    async def _try_tier(
        self, tier: str, run: _Run, tries: int | None = None
    ) -> Answered[ModelAnswer] | Answered[AnswerStream] | None:
        """Up to `tries` (default: the policy's) attempts on one tier; the result, or None."""
        model = self.models[tier]
        tries = tries or max(1, self.policy.max_attempts_per_tier)
        for try_index in range(tries):
            left = run.deadline - self._clock()
            if left <= 0.01:
                return None
            run.count += 1
            number = run.count
            started = self._clock()
            timeout = min(self.policy.request_timeout_s, left)
            try:
                if run.streaming:
                    stream = await model.start_stream(run.request, timeout=timeout)
                    return Answered(tier, stream, started, number)
                answer = await model.complete(run.request, timeout=timeout)
            except ModelFailure as failure:
                run.failures.append(failure)
                await run.on_attempt(self._failed(tier, model.model, number, started, failure))
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
                await run.on_attempt(self._failed(tier, model.model, number, started, internal))
                raise AllTiersFailed("a model call failed with a bug", [*run.failures, bug]) from None
            latency = (self._clock() - started) * 1000.0
            await run.on_attempt(
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
            return Answered(tier, answer, started, number)
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
