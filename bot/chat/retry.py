"""Retrying, said once: the back-off schedule (`RetryPlan`) and the one retry loop (`patiently`).

Every back-off in the bot uses them: a Telegram or Discord send through an outage, Telegram's
start-up while the Bot API is out of reach, an import batch the memory worker did not take,
a model tier's retries (bot/chat/models/fallback.py: it reports each attempt and may move on to
the next tier, so it runs its own loop on `RetryPlan.pause`), and the memory gateway's pause
after a failure. The schedule and the `Retry-After` parser are the engine's
(memory_engine/backoff.py), so compaction alarms read a server's wait the same way.

Ours rather than tenacity or stamina: the tests inject the clock and the sleep, so an outage
of minutes runs in milliseconds (tenacity's time budget reads `time.monotonic` itself, stamina
can only switch waiting off as a whole); a server's Retry-After replaces the pause; the first
retry may come at once. That is a page of code.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from memory_engine.backoff import doubling, retry_after_s

T = TypeVar("T")
log = logging.getLogger(__name__)

__all__ = ["RetryPlan", "patiently", "retry_after_s"]


@dataclass(frozen=True)
class RetryPlan:
    """How a call is retried: pauses of `first_s` doubling up to `max_s`, within `budget_s`
    (and at most `max_tries` calls, when given).

    `min_tries`: calls made whatever the budget (Discord: a second try is always worth it);
    `at_once`: the first retry comes without a pause (a reset connection often is one-off);
    `jitter`: each pause is a random 50-100 % of the schedule's.
    """

    budget_s: float = 60.0
    first_s: float = 0.25
    max_s: float = 5.0
    min_tries: int = 1
    max_tries: int | None = None
    at_once: bool = False
    jitter: bool = False
    factor: float = 2.0  # each pause is the previous one times this

    def pause(self, retry_index: int, rng: random.Random | None = None) -> float:
        """The pause before retry number `retry_index` (0-based) of the schedule."""
        if self.at_once:
            if retry_index == 0:
                return 0.0
            retry_index -= 1
        jitter = (rng or random.Random()) if self.jitter else None
        return doubling(retry_index, self.first_s, self.max_s, jitter, self.factor)


async def patiently(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    plan: RetryPlan,
    transient: tuple[type[BaseException], ...],
    final: tuple[type[BaseException], ...] = (),
    wait_asked: Callable[[BaseException], float | None] = lambda exc: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """`call()` until it succeeds; a `final` error (checked first) or the last `transient` one
    once the plan is spent is raised. `wait_asked(exc)`: the wait the server asked for, if any
    (its Retry-After), which replaces the schedule's pause."""
    deadline = clock() + plan.budget_s
    tries = 0
    while True:
        tries += 1
        try:
            return await call()
        except final:
            raise
        except transient as exc:
            asked = wait_asked(exc)
            pause = plan.pause(tries - 1) if asked is None else asked
            out_of_tries = plan.max_tries is not None and tries >= plan.max_tries
            if out_of_tries or (tries >= plan.min_tries and clock() + pause > deadline):
                log.warning("%s failed %d times in a row; giving up: %r", what, tries, exc)
                raise
            log.warning("%s failed (attempt %d): %r; retrying in %.2f s", what, tries, exc, pause)
        await sleep(pause)
