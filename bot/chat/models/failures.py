"""What to fix when a model endpoint fails for a reason only its operator can fix.

A wrong key (401/403), an unknown model (404) or an endpoint that cannot be reached is not
going to heal by retrying: the answer to the user and the log name the tier and what to
check (the key variable, the model name in [tiers], the base URL). Transient failures
(429, 5xx, timeouts) get no hint: they are the ordinary weather of an API.
`chatbot doctor` uses the same words (bot/doctor.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from bot.config import Tier, default
from bot.errors import FailureKind

log = logging.getLogger(__name__)

CONFIG_TROUBLE = "a model endpoint refused the bot's configuration; the bot's admins can see why"


@dataclass(frozen=True)
class Problem:
    """One configuration problem of a tier: what went wrong and what to check."""

    tier: str
    what: str
    fix: str

    def line(self) -> str:
        """`tier X: what; fix`, one line."""
        return f"tier {self.tier}: {self.what}; {self.fix}"


def endpoint(tier: Tier) -> str:
    """The base URL a tier's calls go to (the openai SDK's default when none is set)."""
    return tier.base_url or default("summary", "openai_base_url")


def diagnose(tier: Tier, kind: FailureKind | Literal[""], status: int | None) -> Problem | None:
    """The problem behind a failure of `kind` (see ModelFailure) and HTTP `status`; None if transient."""
    url = endpoint(tier)
    key_env = tier.api_key_env
    where = f"[tiers.{tier.name}]"
    if kind == "refused" and status in (401, 403):
        return Problem(
            tier.name,
            f"{url} refused the API key (HTTP {status})",
            f"check {key_env} (api_key_env in a tier's [tiers] table names another variable)",
        )
    if kind == "refused" and status == 404:
        return Problem(
            tier.name,
            f"model {tier.model!r} was not found at {url} (HTTP 404)",
            f"check the model name in {where} of bot.toml (BOT_CONFIG), and its base_url",
        )
    if kind == "connection":
        return Problem(
            tier.name,
            f"could not reach {url}",
            "check base_url in the tier's [tiers] table or OPENAI_BASE_URL, and that the server is running",
        )
    return None


def problems(
    failures: Iterable[tuple[str, FailureKind | Literal[""], int | None]], tiers: Mapping[str, Tier]
) -> list[Problem]:
    """The distinct configuration problems among failed attempts given as (tier, kind, status)."""
    found: dict[str, Problem | None] = {}
    for name, kind, status in failures:
        tier = tiers.get(name)
        problem = diagnose(tier, kind, status) if tier is not None else None
        if kind == "connection" and name in found and found[name] is None:
            continue  # a connection lost once among other failures is weather, not a wrong URL
        found[name] = problem  # else the tier's last failure says it best
    return [p for p in found.values() if p is not None]


def apology(base: str, found: list[Problem], *, admin: bool) -> str:
    """The answer when every tier failed: `base`, then what to fix (to admins; others are told it exists).

    Each problem is logged as a warning, so the operator sees it whoever asked.
    """
    for problem in found:
        log.warning("model endpoint misconfigured: %s", problem.line())
    if not found:
        return base
    if not admin:
        return f"{base}\n({CONFIG_TROUBLE} in the log.)"
    same: dict[tuple[str, str], list[str]] = {}  # tiers on one endpoint fail alike: one line
    for problem in found:
        same.setdefault((problem.what, problem.fix), []).append(problem.tier)
    lines = [
        f"tier{'s' if len(tiers) > 1 else ''} {', '.join(tiers)}: {what}; {fix}"
        for (what, fix), tiers in same.items()
    ]
    return "\n".join([base, *lines])
