"""Sending through a platform outage: one retry loop shared by Telegram and Discord.

A send or an edit that fails for a passing reason (5xx, a refused or reset connection, a
timeout) is tried again with a growing pause until the platform's send budget is spent; a
final refusal (bad request, forbidden) is raised at once. The clock and the sleep are
parameters, so tests can run an outage without waiting it out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPlan:
    """How a call is retried: pauses of `first_s` doubling up to `max_s`, within `budget_s`.

    `min_tries`: calls made whatever the budget (Discord: a second try is always worth it);
    `at_once`: the first retry comes without a pause (a reset connection often is one-off).
    """

    budget_s: float = 60.0
    first_s: float = 0.25
    max_s: float = 5.0
    min_tries: int = 1
    at_once: bool = False


async def patiently(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    plan: RetryPlan,
    transient: tuple[type[BaseException], ...],
    final: tuple[type[BaseException], ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """`call()` until it succeeds; a `final` error (checked first) or the last `transient` one
    once the budget is spent is raised."""
    deadline = clock() + plan.budget_s
    delay = plan.first_s
    tries = 0
    while True:
        tries += 1
        try:
            return await call()
        except final:
            raise
        except transient as exc:
            pause = 0.0 if plan.at_once and tries == 1 else delay
            if tries >= plan.min_tries and clock() + pause > deadline:
                log.warning("%s failed %d times in a row; giving up: %r", what, tries, exc)
                raise
            log.warning("%s failed (attempt %d): %r; retrying in %.2f s", what, tries, exc, pause)
        await sleep(pause)
        if pause:
            delay = min(delay * 2, plan.max_s)
