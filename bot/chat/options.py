"""How the pipeline is put together: its answering side (`Answering`) and the memory gateway's
pacing (`PipelineOptions`), the groups of collaborators the composition root passes in."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from bot.chat.media import Transcriber
from bot.chat.memory.client import MemoryClient
from bot.chat.memory.gateway import MemoryGateway
from bot.chat.memory.outbox import Outbox
from bot.chat.models.base import ChatModel
from bot.chat.models.fallback import RetryPolicy
from bot.chat.models.tiers import ChoiceRules
from bot.config import MemoryRetry, Tier


@dataclass(frozen=True)
class Answering:
    """The answering side of the pipeline: the models by tier, how a tier is chosen and how
    failures are retried and fall back (bot.toml's [router] and [tiers], unless given)."""

    models: Mapping[str, ChatModel]
    tiers: Mapping[str, Tier]
    fallback_order: tuple[str, ...] = ()  # empty: the settings'
    default_tier: str = ""  # empty: the settings'
    rules: ChoiceRules | None = None  # None: the settings' [router.choice]
    policy: RetryPolicy | None = None  # None: the settings' [router]
    offline: bool = False  # the offline model answers (no API key)
    transcriber: Transcriber | None = None  # voice messages (None: refused plainly)
    # How the fallback waits between retries: tests pass one that returns at once.
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep


@dataclass(frozen=True)
class PipelineOptions:
    """The memory gateway's pacing ([memory] of bot.toml); tests and benchmarks pass faster ones."""

    memory: MemoryRetry = field(default_factory=MemoryRetry)
    # How the tier fallback waits between retries (back-off, Retry-After): tests pass one that
    # returns at once, so retry decisions are checked without waiting out real time.
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
    # The gateway's last outbox flush on the way out: what it cannot send in time stays on
    # disk and is replayed at the next start, so a shutdown never waits for the worker.
    close_timeout_s: float = 0.3

    @classmethod
    def from_settings(cls, memory: MemoryRetry) -> PipelineOptions:
        """The options the settings' [memory] table states."""
        return cls(memory)

    def gateway(self, client: MemoryClient, outbox: Outbox) -> MemoryGateway:
        """The memory gateway these options describe."""
        return MemoryGateway(client, outbox, retry=self.memory, close_timeout_s=self.close_timeout_s)
