"""Daily spending caps ([limits] in bot.toml): per person and per chat, messages and cost.

The counts are the memory worker's: a turn answers `usage_today` (the chat's calls and cost
per tier today) and `usage_today_author` (the author's messages, calls and cost today, and
the chat's messages today, the current message included), so caps hold across restarts and
replicas. A cap of 0 is no cap. A message over a cap is still recorded (the turn did that);
the pipeline answers `CapHit.text` instead of calling a model. Days are UTC days, like the
worker's, and reset at midnight UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from bot.chat.models.tiers import spent_today
from bot.config import LimitSettings
from memory_engine.api import wire

TierUsages = Mapping[str, wire.TierUsage]  # today's calls and cost per tier (a turn's `usage_today`)


@dataclass(frozen=True)
class CapHit:
    """One cap reached: which, its value, and when it resets."""

    name: str  # the [limits] key
    limit: float
    resets_at: datetime

    def text(self, now: datetime) -> str:
        """What the user reads: which cap, and when it resets."""
        whose, what = _WORDS[self.name]
        amount = f"${self.limit:.2f}" if self.name.endswith("cost_usd_per_day") else f"{int(self.limit)}"
        return (
            f"{whose} reached the daily limit of {amount} {what} ({self.name}). I will answer again "
            f"after it resets at {self.resets_at:%H:%M} UTC ({_until(self.resets_at - now)}). "
            "Your message is remembered."
        )


_WORDS = {
    "user_messages_per_day": ("You have", "messages a person"),
    "chat_messages_per_day": ("This chat has", "messages"),
    "user_cost_usd_per_day": ("You have", "of model use a person"),
    "chat_cost_usd_per_day": ("This chat has", "of model use"),
}


def next_reset(now: datetime) -> datetime:
    """The next UTC midnight after `now`."""
    day = now.astimezone(UTC).date() + timedelta(days=1)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _until(delta: timedelta) -> str:
    minutes = max(1, int(delta.total_seconds() // 60))
    hours, minutes = divmod(minutes, 60)
    return f"in {hours} h {minutes} min" if hours else f"in {minutes} min"


def _num(data: wire.AuthorUsage | None, key: Literal["messages", "chat_messages", "cost_usd"]) -> float:
    if data is None:
        return 0.0
    try:  # the worker's data: a count that is not a number counts as none
        return float(data.get(key) or 0)
    except (TypeError, ValueError):
        return 0.0


def usage_numbers(
    usage_today: TierUsages | None, author: wire.AuthorUsage | None, one_more: bool = False
) -> dict[str, float]:
    """Today's counts per [limits] key, from the worker's usage records (`one_more`: counting a
    message not yet recorded, as a follow-up would be, in the person's and the chat's)."""
    more = 1.0 if one_more else 0.0
    return {
        "user_messages_per_day": _num(author, "messages") + more,
        "chat_messages_per_day": _num(author, "chat_messages") + more,
        "user_cost_usd_per_day": _num(author, "cost_usd"),
        "chat_cost_usd_per_day": spent_today(usage_today),
    }


def caps_of(limits: LimitSettings) -> dict[str, float]:
    """The caps that are set (0 is no cap), by [limits] key."""
    caps = {
        "user_messages_per_day": float(limits.user_messages_per_day),
        "chat_messages_per_day": float(limits.chat_messages_per_day),
        "user_cost_usd_per_day": float(limits.user_cost_usd_per_day),
        "chat_cost_usd_per_day": float(limits.chat_cost_usd_per_day),
    }
    return {k: v for k, v in caps.items() if v > 0}


def check(
    limits: LimitSettings,
    usage_today: TierUsages | None,
    author: wire.AuthorUsage | None,
    now: datetime,
    *,
    one_more: bool = False,
) -> CapHit | None:
    """The first cap this message is over, or None.

    Message counts include the current message, so a cap of 20 answers 20 messages; costs are
    what was spent before it, so the message that reaches a cost cap is the last one answered.
    """
    used = usage_numbers(usage_today, author, one_more)
    for name, cap in caps_of(limits).items():
        over = used[name] > cap if name.endswith("messages_per_day") else used[name] >= cap
        if over:
            return CapHit(name, cap, next_reset(now))
    return None


def left_lines(
    limits: LimitSettings,
    usage_today: TierUsages | None,
    author: wire.AuthorUsage | None,
    now: datetime,
) -> list[str]:
    """For /usage: each cap that is set, what is used today and what is left."""
    caps = caps_of(limits)
    if not caps:
        return ["Daily caps: none set ([limits] in bot.toml)."]
    used = usage_numbers(usage_today, author)
    lines = [f"Daily caps (reset at 00:00 UTC, {_until(next_reset(now) - now)}):"]
    for name, cap in caps.items():
        if name.endswith("cost_usd_per_day"):
            left = max(0.0, cap - used[name])
            line = f"  {name}: ${used[name]:.4f} of ${cap:.2f} used, ${left:.4f} left"
        else:
            line = f"  {name}: {int(used[name])} of {int(cap)} used, {max(0, int(cap - used[name]))} left"
        lines.append(line + (" (yours)" if name.startswith("user_") else ""))
    return lines
