"""Tier choice: cheap signals of a message pick a tier; a user can force one; a budget caps it.

Tiers are data (config/bot.toml). They are ranked by price (input + output per million
tokens), cheapest first, so "light" means the cheapest tier, "heavy" the dearest and
"moving down a tier" the next cheaper one, whatever the tiers are called.

The choice, in order (each step documented in `TierChoice.reasons`):
1. Score the message: code (+2), maths (+2), an explain / analyse / step-by-step request
   (+2), a long message (+1, very long +2), attachments (+1), a long conversation (+1);
   small talk (short, none of the above) scores -1.
2. score >= `heavy_at` -> the dearest tier; score <= `light_at` -> the cheapest; else the
   default tier.
3. A forced tier (`/tier NAME` for the chat, `!NAME` before one message) replaces that.
4. When the chat's spend today (`usage_today` from the memory worker) reaches the daily
   budget, move down one tier (two at twice the budget), forced or not: the budget is the
   owner's money.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.config import ChoiceRules, Tier
from memory_engine.api import wire

__all__ = ["ChoiceRules", "TierChoice", "choose_tier", "fallback_sequence", "rank_tiers"]


@dataclass(frozen=True)
class TierChoice:
    """The tier picked for one message and why."""

    tier: str
    score: int = 0
    forced: str | None = None
    reasons: tuple[str, ...] = ()
    budget_spent_usd: float = 0.0


_CODE = re.compile(
    # `\w\(\)` and `^[ \t]{4,}`, not `\w+\(\)` and `^\s{4,}`: those rescan a run of letters or
    # of blank lines from each of its characters (16,000 characters took 2.7 s).
    r"```|^[ \t]{4,}\S"
    r"|\b(def|class|import|return|function|const|let|var|public|static|void|SELECT|INSERT|#include)\b"
    r"|[{};][ \t]*$|=>|->|\w\(\)|Traceback \(most recent call last\)",
    re.M,
)
_MATHS = re.compile(
    r"\d\s*[-+*/^=]\s*\d|\\(frac|int|sum|sqrt)|[∫∑√≤≥≠π]"
    r"|\b(equation|integral|derivative|matrix|theorem|probability|solve for|calculate|compute)\b",
    re.I,
)
SCORED_CHARS = 20_000  # how much of a message the signals are looked for in
_FORCE_PREFIX = re.compile(r"^\s*!([A-Za-z0-9_-]+)\b\s*")


def rank_tiers(tiers: Mapping[str, Tier]) -> list[str]:
    """Tier names, cheapest first (ties keep the configured order)."""
    order = list(tiers)
    return sorted(
        order, key=lambda n: (tiers[n].price_in_per_mtok + tiers[n].price_out_per_mtok, order.index(n))
    )


def split_force_prefix(text: str, tiers: Sequence[str]) -> tuple[str | None, str]:
    """`"!heavy why?"` -> ("heavy", "why?"); a prefix naming no tier is left in the text."""
    match = _FORCE_PREFIX.match(text)
    if match and match.group(1).lower() in {t.lower() for t in tiers}:
        name = next(t for t in tiers if t.lower() == match.group(1).lower())
        return name, text[match.end() :]
    return None, text


def unknown_tier_notice(text: str, tiers: Sequence[str]) -> str:
    """A note for a `!NAME` prefix that names no tier ("" otherwise): a typo must not pass silently."""
    match = _FORCE_PREFIX.match(text)
    if match is None or match.group(1).lower() in {t.lower() for t in tiers}:
        return ""
    return (
        f"(There is no tier {match.group(1)[:40]!r}; tiers: {', '.join(tiers)}. "
        "This answer uses the usual choice.)"
    )


def spent_today(usage_today: Mapping[str, wire.TierUsage] | None) -> float:
    """Total cost in USD over every tier today."""
    total = 0.0
    for row in (usage_today or {}).values():
        if isinstance(row, Mapping):
            try:
                total += float(row.get("cost_usd") or 0.0)
            except (TypeError, ValueError):
                continue
    return total


def score_message(
    text: str, attachments: Sequence[str], conversation_length: int, rules: ChoiceRules
) -> tuple[int, list[str]]:
    """The message's score and the signals that made it."""
    score = 0
    reasons: list[str] = []
    seen = text[:SCORED_CHARS]  # code, maths and asks show early: a 1 MB paste is not all read
    lower = seen.lower()
    if _CODE.search(seen):
        score += 2
        reasons.append("code")
    if _MATHS.search(seen):
        score += 2
        reasons.append("maths")
    if any(w in lower for w in rules.heavy_words):
        score += 2
        reasons.append("explain/analyse request")
    if len(text) >= rules.very_long_chars:
        score += 2
        reasons.append("very long message")
    elif len(text) >= rules.long_chars:
        score += 1
        reasons.append("long message")
    if attachments:
        score += 1
        reasons.append("attachments")
    if conversation_length >= rules.long_conversation:
        score += 1
        reasons.append("long conversation")
    if not reasons and len(text) <= rules.short_chars:
        score -= 1
        reasons.append("small talk")
    return score, reasons


def choose_tier(
    *,
    text: str,
    tiers: Mapping[str, Tier],
    default_tier: str,
    rules: ChoiceRules,
    attachments: Sequence[str] = (),
    conversation_length: int = 0,
    forced: str | None = None,
    usage_today: Mapping[str, wire.TierUsage] | None = None,
    daily_budget_usd: float = 0.0,
) -> TierChoice:
    """Pick the tier for one message (see the module docstring for the rules)."""
    ranked = rank_tiers(tiers)
    if not ranked:
        raise ValueError("no tiers configured")
    score, reasons = score_message(text, attachments, conversation_length, rules)
    default = default_tier if default_tier in tiers else ranked[len(ranked) // 2]
    if forced and forced in tiers:
        tier = forced
        reasons.append(f"forced {forced}")
    elif score >= rules.heavy_at:
        tier = ranked[-1]
    elif score <= rules.light_at:
        tier = ranked[0]
    else:
        tier = default
    spent = spent_today(usage_today)
    if daily_budget_usd > 0 and spent >= daily_budget_usd:
        steps = 2 if spent >= 2 * daily_budget_usd else 1
        lowered = ranked[max(0, ranked.index(tier) - steps)]
        if lowered != tier:
            reasons.append(
                f"daily budget spent (${spent:.2f} of ${daily_budget_usd:.2f}): {tier} -> {lowered}"
            )
            tier = lowered
    return TierChoice(tier=tier, score=score, forced=forced, reasons=tuple(reasons), budget_spent_usd=spent)


def fallback_sequence(chosen: str, fallback_order: Sequence[str], tiers: Mapping[str, Tier]) -> list[str]:
    """The chosen tier first, then the configured fallback order (a tier left out of it is
    never a fallback: leaving `heavy` out keeps failures from landing on the dearest model)."""
    seq: list[str] = []
    for name in (chosen, *fallback_order):
        if name in tiers and name not in seq:
            seq.append(name)
    return seq


@dataclass
class ForcedTiers:
    """`/tier NAME` per chat, in this process (bounded; the oldest setting is dropped first)."""

    limit: int = 10000
    _by_chat: dict[str, str] = field(default_factory=dict)

    def get(self, chat: str) -> str | None:
        """The tier forced for a chat, if any."""
        return self._by_chat.get(chat)

    def set(self, chat: str, tier: str | None) -> None:
        """Force a tier for a chat (None: back to automatic)."""
        self._by_chat.pop(chat, None)
        if tier is not None:
            self._by_chat[chat] = tier
            while len(self._by_chat) > self.limit:
                self._by_chat.pop(next(iter(self._by_chat)))
