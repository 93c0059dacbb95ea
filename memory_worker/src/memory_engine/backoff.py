"""Waiting before a retry, stated once for the engine and the bot: the doubling schedule and
the server's `Retry-After` (seconds or an HTTP date, and OpenAI's `retry-after-ms`).

Standard library only: the bot imports it too (bot/chat/retry.py), so a compaction alarm,
a tier's retry and a platform send read a `Retry-After` the same way.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping

# A failed compaction's alarm waits this long, doubling up to the max (the hosts read these
# before the engine is loaded: they are defaults of their constructors).
BACKOFF_BASE_MS = 2000
BACKOFF_MAX_MS = 3600 * 1000


def doubling(
    retry_index: int, first: float, limit: float, rng: random.Random | None = None, factor: float = 2.0
) -> float:
    """The pause before retry number `retry_index` (0-based): `first`, doubling (times `factor`),
    at most `limit`; with `rng`, 50-100 % of it (jitter: retries of many clients spread out)."""
    pause = min(limit, first * factor ** min(retry_index, 60))
    return pause if rng is None else pause * (0.5 + rng.random() / 2)


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (delta-seconds or an HTTP date,
    RFC 9110 10.2.3), header names in any case; None when absent or unreadable.

    `now` (Unix seconds) is the clock an HTTP date is read against.
    """
    if not headers:
        return None
    by_name = {str(k).lower(): str(v).strip() for k, v in headers.items()}
    ms = by_name.get("retry-after-ms")
    if ms:
        seconds = _number(ms)
        if seconds is not None:
            return seconds / 1000.0
    value = by_name.get("retry-after")
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return max(0.0, value) if math.isfinite(value) else None
