"""One call to the light (cheapest) tier for a command, such as /catchup's digest.

`LightWriter` is what a command gets as `CommandContext.light_model`: it sends the command's
messages to the cheapest tier's model in one call (no retries, no other tier: the command has
an offline answer to fall back on) and records the attempt through the memory gateway like
any model attempt, so /usage and the daily caps count it. It answers None, and calls nothing,
when the bot is offline, when a daily cap is reached, or when the call fails.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from bot.chat import limits
from bot.chat.models.base import Attempt, ChatMessage, ModelFailure, ModelRequest
from bot.chat.models.tiers import rank_tiers
from bot.chat.prompt import redact
from bot.chat.types import IncomingMessage

if TYPE_CHECKING:
    from bot.chat.memory.gateway import MemoryGateway
    from bot.chat.models.fallback import FallbackModel
    from bot.config import Settings, Tier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LightAnswer:
    """The light tier's text and what the call used."""

    text: str
    tier: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class LightModel(Protocol):
    """Chat messages (OpenAI format) for `message`'s chat in, the light tier's answer out (None:
    offline, capped or failed: the caller answers without a model)."""

    async def __call__(self, message: IncomingMessage, messages: Sequence[ChatMessage]) -> LightAnswer | None:
        """One call to the light tier, recorded."""


class _Parts(Protocol):
    """What `LightWriter.of` reads from the pipeline (its public parts)."""

    tiers: dict[str, Tier]
    offline: bool
    model: FallbackModel  # the tier fallback: its tiers' models are called one at a time
    memory: MemoryGateway
    settings: Settings
    secrets: tuple[str, ...]
    clock: Callable[[], datetime]


@dataclass(frozen=True)
class LightWriter:
    """The `LightModel` of a pipeline; see the module docstring."""

    tiers: Mapping[str, Tier]
    offline: bool
    model: FallbackModel  # its `models`: the light tier's model is called directly
    memory: MemoryGateway
    settings: Settings
    secrets: tuple[str, ...]
    clock: Callable[[], datetime]

    @classmethod
    def of(cls, pipeline: _Parts) -> LightWriter:
        """The writer for a pipeline's models, memory and caps."""
        return cls(
            pipeline.tiers,
            pipeline.offline,
            pipeline.model,
            pipeline.memory,
            pipeline.settings,
            pipeline.secrets,
            pipeline.clock,
        )

    async def _capped(self, message: IncomingMessage) -> bool:
        if not limits.caps_of(self.settings.limits):
            return False
        usage = await self.memory.usage(message.chat_key, message.author_id)
        hit = limits.check(self.settings.limits, usage.get("today"), usage.get("today_author"), self.clock())
        return hit is not None

    async def __call__(self, message: IncomingMessage, messages: Sequence[ChatMessage]) -> LightAnswer | None:
        """One call to the light tier, recorded; None when offline, capped or failed."""
        ranked = rank_tiers(self.tiers)
        if self.offline or not ranked or self.model.models.get(ranked[0]) is None:
            return None
        tier = ranked[0]
        if await self._capped(message):
            log.info("a daily cap is reached in %s: no light call", message.chat_key)
            return None
        model = self.model.models[tier]
        request = ModelRequest(tuple(messages), message.chat_key, message.author, message.author_id, "")
        started = self.model.now()
        key = f"{message.message_id or uuid.uuid4().hex}:light:{uuid.uuid4().hex[:8]}"
        try:
            answer = await model.complete(request, timeout=self.model.policy.request_timeout_s)
        except ModelFailure as failure:
            await self._record(message, tier, model.model, started, key, error=str(failure)[:500])
            return None
        except Exception as bug:  # a programming error: logged, recorded, the caller falls back
            log.exception("the light call of tier %s failed with a bug", tier)
            bug_error = f"internal: {type(bug).__name__}"
            await self._record(message, tier, model.model, started, key, error=bug_error)
            return None
        text = answer.text.strip()
        cost = await self._record(
            message,
            tier,
            answer.model,
            started,
            key,
            text=text,
            tokens=(answer.prompt_tokens, answer.completion_tokens),
            error=None if text else "empty answer",
        )
        if not text:
            return None
        return LightAnswer(text, tier, answer.model, answer.prompt_tokens, answer.completion_tokens, cost)

    async def _record(
        self,
        message: IncomingMessage,
        tier: str,
        model: str,
        started: float,
        key: str,
        *,
        text: str = "",
        tokens: tuple[int, int] = (0, 0),
        error: str | None = None,
    ) -> float:
        """Record the attempt as the pipeline records answers (the words when good, a usage row
        either way; forgetting the asker removes the words); its cost."""
        cost = self.tiers[tier].cost_usd(*tokens)
        attempt = Attempt(
            tier=tier,
            model=model,
            number=1,
            ok=error is None,
            latency_ms=(self.model.now() - started) * 1000.0,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            error=redact(error, self.secrets) if error else None,
        )
        record = attempt.reply_request(
            redact(text, self.secrets), cost_usd=cost, message_id=key, author_id=message.author_id
        )
        await self.memory.reply(message.chat_key, record)
        return cost
