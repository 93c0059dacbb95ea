"""The pipeline behind every adapter: `Router.handle(message)` and friends (a `ChatService`).

One message: ask the memory worker for the memory prompt (recording the message), pick a
tier, call the model (with retries and fallback), record every attempt and the answer.
When the memory worker cannot be reached the answer comes without memory and the records
go to the outbox; a background task replays them, in order, when the worker is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.config import Settings, Tier
from bot.router import logs
from bot.router.fallback import Attempt, RetryPolicy, TierRouter
from bot.router.memory import MemoryClient, MemoryRefused, MemoryUnavailable
from bot.router.models import ChatModel, MemoryContext, ModelFailure, ModelRequest
from bot.router.outbox import Outbox
from bot.router.prompt import build_messages, redact
from bot.router.tiers import (
    ChoiceRules,
    ForcedTiers,
    TierChoice,
    choose_tier,
    fallback_sequence,
    split_force_prefix,
)
from bot.router.types import CommandResult, IncomingMessage, Reply

log = logging.getLogger(__name__)

APOLOGY = "Sorry, the language models are unavailable right now. Please try again in a little while."
CUT_OFF = "\n\n[Sorry, the answer was cut off: the model stopped responding.]"


@dataclass(frozen=True)
class RouterOptions:
    """Knobs of the pipeline that are not in Settings (tests and benchmarks turn them)."""

    replay_interval_s: float = 2.0  # how often the background task retries the outbox
    memory_retry_s: float = 2.0  # after a failure, skip the worker this long (then try again)
    memory_retry_max_s: float = 30.0


@dataclass
class _Prepared:
    """Everything known about one message before the model is called."""

    message: IncomingMessage
    message_id: str
    text: str
    memory: MemoryContext | None
    choice: TierChoice
    order: list[str]
    request: ModelRequest
    # Failed attempts are keyed per handling, so a platform redelivering the same message
    # still gets each new attempt recorded, while an outbox replay of one stays single.
    attempt_key: str = field(default_factory=lambda: uuid.uuid4().hex[:10])


@dataclass
class _LastPrompt:
    prompt: str
    tier: str
    reasons: tuple[str, ...] = ()
    at: float = field(default_factory=time.time)


class Router:
    """The `ChatService` of bot/router/types.py. Open it with `async with` (starts outbox replay)."""

    def __init__(
        self,
        *,
        memory: MemoryClient,
        outbox: Outbox,
        models: Mapping[str, ChatModel],
        tiers: Mapping[str, Tier],
        settings: Settings,
        fallback_order: Iterable[str] | None = None,
        default_tier: str | None = None,
        rules: ChoiceRules | None = None,
        policy: RetryPolicy | None = None,
        secrets: Iterable[str] = (),
        options: RouterOptions | None = None,
        offline: bool = False,
    ) -> None:
        self.memory = memory
        self.outbox = outbox
        self.tiers = dict(tiers)
        self.settings = settings
        self.offline = offline
        self.fallback_order = tuple(fallback_order or settings.router.fallback_order)
        self.default_tier = default_tier or settings.router.default_tier
        self.rules = rules or ChoiceRules()
        self.options = options or RouterOptions()
        self.tier_router = TierRouter(
            models,
            policy
            or RetryPolicy(
                time_budget_s=settings.router.time_budget_s,
                request_timeout_s=settings.router.request_timeout_s,
                max_attempts_per_tier=settings.router.max_attempts_per_tier,
            ),
        )
        self.secrets = tuple(s for s in secrets if s)
        self.forced = ForcedTiers()
        self._last_prompts: OrderedDict[str, _LastPrompt] = OrderedDict()
        self._pending_forget: dict[str, float] = {}
        self._chat_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._memory_down_until = 0.0
        self._memory_backoff = self.options.memory_retry_s
        self._wake = asyncio.Event()
        self._replayer: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Router:
        self._replayer = asyncio.create_task(self._replay_loop(), name="outbox-replay")
        if len(self.outbox):
            self._wake.set()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._replayer is not None:
            self._replayer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._replayer
        # One last try, so a clean shutdown leaves nothing behind when the worker is up.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5.0):
                await self.outbox.flush(self.memory)

    async def _replay_loop(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow our own cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.options.replay_interval_s):
                    await self._wake.wait()
            self._wake.clear()
            if not len(self.outbox):
                continue
            try:
                delivered = await self.outbox.flush(self.memory)
            except Exception:  # never let the replayer die; the records stay in SQLite
                log.exception("outbox replay failed")
                continue
            if not len(self.outbox):
                self._memory_up()
                log.info("outbox replayed: %d records", delivered)
            else:
                self._memory_down(f"outbox replay stopped with {len(self.outbox)} records left")

    async def flush_outbox(self) -> int:
        """Replay the outbox now; how many records were delivered."""
        delivered = await self.outbox.flush(self.memory)
        if not len(self.outbox):
            self._memory_up()
        else:  # flush only stops early when the worker is unavailable
            self._memory_down(f"outbox replay stopped with {len(self.outbox)} records left")
        return delivered

    # -- memory, with the outbox behind it ----------------------------------------------

    def _memory_is_down(self) -> bool:
        return time.monotonic() < self._memory_down_until

    def _memory_down(self, why: str) -> None:
        # Warn once per outage; the retries while it lasts are debug noise.
        level = logging.DEBUG if self._memory_is_down() else logging.WARNING
        log.log(level, "memory worker unavailable (%s); answering without memory, keeping records", why)
        self._memory_down_until = time.monotonic() + self._memory_backoff
        self._memory_backoff = min(self.options.memory_retry_max_s, self._memory_backoff * 2)

    def _memory_up(self) -> None:
        self._memory_down_until = 0.0
        self._memory_backoff = self.options.memory_retry_s

    def _lock_for(self, chat: str) -> asyncio.Lock:
        lock = self._chat_locks.get(chat)
        if lock is None:
            lock = asyncio.Lock()
            self._chat_locks[chat] = lock
        return lock

    async def _turn(self, message: IncomingMessage, text: str, message_id: str) -> MemoryContext | None:
        """Record the user message; its memory context, or None when the worker is out of reach."""
        body = {
            "text": text,
            "author": message.author,
            "author_id": message.author_id,
            "message_id": message_id,
        }
        async with self._lock_for(message.chat_key):  # one chat's messages go in arrival order
            if len(self.outbox) and not self._memory_is_down():
                await self.flush_outbox()
            if self._memory_is_down() or self.outbox.pending_for(message.chat_key):
                # Older records of this chat still wait: this one goes behind them.
                self.outbox.add(message.chat_key, "turn", body)
                self._wake.set()
                return None
            try:
                data = await self.memory.turn(
                    message.chat_key,
                    text,
                    author=message.author,
                    author_id=message.author_id,
                    message_id=message_id,
                )
            except MemoryUnavailable as exc:
                self._memory_down(str(exc))
                self.outbox.add(message.chat_key, "turn", body)
                self._wake.set()
                return None
            except MemoryRefused as exc:
                # 413 (too long), 400 (bad chat key): the worker will never take it; answer anyway.
                log.warning("memory refused the message in %s: %s", message.chat_key, exc.error)
                return None
        return MemoryContext(
            prompt=str(data.get("prompt") or ""),
            recent=tuple(data.get("recent") or ()),
            retrieved=tuple(data.get("retrieved") or ()),
            facts=tuple(data.get("facts") or ()),
            summary=str(data.get("summary") or ""),
            usage_today=dict(data.get("usage_today") or {}),
        )

    async def _deliver_reply(self, chat: str, body: dict[str, Any]) -> None:
        """Record one attempt; into the outbox when the worker is out of reach."""
        if self._memory_is_down() or self.outbox.pending_for(chat):
            self.outbox.add(chat, "reply", body)
            self._wake.set()
            return
        try:
            await self.memory.reply(chat, body)
        except MemoryUnavailable as exc:
            self._memory_down(str(exc))
            self.outbox.add(chat, "reply", body)
            self._wake.set()
        except MemoryRefused as exc:
            log.warning("memory refused a reply record in %s: %s", chat, exc.error)

    def _cost(self, tier: str, prompt_tokens: int, completion_tokens: int) -> float:
        t = self.tiers.get(tier)
        if t is None:
            return 0.0
        return round(
            (prompt_tokens * t.price_in_per_mtok + completion_tokens * t.price_out_per_mtok) / 1e6, 10
        )

    async def _record_attempt(self, prep: _Prepared, attempt: Attempt, text: str = "") -> None:
        body: dict[str, Any] = {
            "text": text if attempt.ok else "",
            "tier": attempt.tier,
            "model": attempt.model,
            "usage": {"prompt_tokens": attempt.prompt_tokens, "completion_tokens": attempt.completion_tokens},
            "latency_ms": round(attempt.latency_ms, 3),
            "cost_usd": self._cost(attempt.tier, attempt.prompt_tokens, attempt.completion_tokens),
            "ok": attempt.ok,
            "author_id": prep.message.author_id,
            # Each attempt has its own idempotency key; the good one is the reply's id.
            "message_id": (
                f"{prep.message_id}:reply"
                if attempt.ok
                else f"{prep.message_id}:try{attempt.number}:{prep.attempt_key}"
            ),
        }
        if attempt.error:
            body["error"] = redact(attempt.error, self.secrets)
        await self._deliver_reply(prep.message.chat_key, body)

    # -- the pipeline -----------------------------------------------------------------

    async def _prepare(self, message: IncomingMessage) -> _Prepared:
        message_id = message.message_id or uuid.uuid4().hex
        forced_now, text = split_force_prefix(message.text, list(self.tiers))
        text = text if text.strip() else message.text
        mem = await self._turn(message, text, message_id)
        conversation_length = 0
        if mem is not None:
            ids = [
                int(m.get("id") or 0)
                for m in (*mem.recent, *mem.retrieved)
                if str(m.get("id") or "").isdigit()
            ]
            conversation_length = max(ids, default=0) + 1
        choice = choose_tier(
            text=text,
            tiers=self.tiers,
            default_tier=self.default_tier,
            rules=self.rules,
            attachments=message.attachments,
            conversation_length=conversation_length,
            forced=forced_now or self.forced.get(message.chat_key),
            usage_today=mem.usage_today if mem else None,
            daily_budget_usd=self.settings.daily_budget_usd,
        )
        order = fallback_sequence(choice.tier, self.fallback_order, self.tiers)
        messages = build_messages(
            text=text,
            author=message.author,
            memory_prompt=mem.prompt if mem else None,
            recent=mem.recent if mem else (),
            group=message.platform != "console" and not message.chat_key.startswith(("console:",)),
            # ~3 characters per token, a quarter of the window kept for the answer.
            max_chars=min(self.tiers[t].context_tokens for t in order) * 3 * 3 // 4,
        )
        request = ModelRequest(
            messages=messages,
            chat_key=message.chat_key,
            author=message.author,
            author_id=message.author_id,
            text=text,
            memory=mem,
        )
        self._remember_prompt(message.chat_key, mem, choice)
        return _Prepared(message, message_id, text, mem, choice, order, request)

    def _remember_prompt(self, chat: str, mem: MemoryContext | None, choice: TierChoice) -> None:
        prompt = mem.prompt if mem is not None else "(the memory worker was unreachable: no memory was used)"
        self._last_prompts[chat] = _LastPrompt(redact(prompt, self.secrets), choice.tier, choice.reasons)
        self._last_prompts.move_to_end(chat)
        while len(self._last_prompts) > 10000:  # bounded cache, not state: /why falls back to stats
            self._last_prompts.popitem(last=False)

    async def handle(self, message: IncomingMessage) -> Reply:
        """Record the message, answer it with memory, record the answer."""
        if not message.addressed:
            await self.record(message)
            return Reply(text="", ok=True, with_memory=True)
        started = time.monotonic()
        reply = Reply(text=APOLOGY, ok=False, with_memory=False)
        request_id = "-"
        try:
            with logs.handling(message.chat_key) as request_id:
                prep = await self._prepare(message)
                outcome = await self.tier_router.complete(
                    prep.order, prep.request, lambda a: self._record_attempt(prep, a, a.text)
                )
            with_memory = prep.memory is not None
            if outcome is None:
                reply = Reply(text=APOLOGY, ok=False, with_memory=with_memory, message_id=None)
            else:
                tier, answer = outcome
                reply = Reply(
                    text=answer.text,
                    tier=tier,
                    model=answer.model,
                    ok=True,
                    with_memory=with_memory,
                    message_id=f"{prep.message_id}:reply",
                )
            return reply
        finally:  # also when cancelled or broken: the line says ok=False
            self._log_turn(message.chat_key, request_id, reply.tier, started, reply.ok, reply.with_memory)

    @staticmethod
    def _log_turn(
        chat: str, request_id: str, tier: str | None, started: float, ok: bool, with_memory: bool
    ) -> None:
        """The one line per handled message: who, which tier, how long, how it went. No text, no secrets."""
        latency_ms = round((time.monotonic() - started) * 1000.0)
        log.info(
            "turn chat=%s req=%s tier=%s latency_ms=%d ok=%s memory=%s",
            chat,
            request_id,
            tier or "-",
            latency_ms,
            ok,
            with_memory,
            extra={
                "tier": tier,
                "latency_ms": latency_ms,
                "ok": ok,
                "with_memory": with_memory,
                "turn_chat": chat,
                "turn_request": request_id,
            },
        )

    async def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        """Like `handle`, but yields the answer's text as it grows (chunks to append)."""
        if not message.addressed:
            await self.record(message)
            return
        begun = time.monotonic()
        # The request context is held only while nothing is yielded: a context variable set
        # across the yields of an async generator could be reset from another context.
        with logs.handling(message.chat_key) as request_id:
            prep = await self._prepare(message)
            started_stream = await self.tier_router.start_stream(
                prep.order, prep.request, lambda a: self._record_attempt(prep, a)
            )
        with_memory = prep.memory is not None
        if started_stream is None:
            self._log_turn(message.chat_key, request_id, None, begun, False, with_memory)
            yield APOLOGY
            return
        tier, stream, started, number = started_stream
        pieces: list[str] = []
        error: str | None = "the reader stopped before the end"  # until the stream completes
        try:
            async for piece in stream:
                pieces.append(piece)
                yield piece
            error = None
        except ModelFailure as failure:
            error = str(failure)
            yield CUT_OFF
        finally:
            await stream.aclose()
            text = "".join(pieces)
            attempt = Attempt(
                tier=tier,
                model=stream.model,
                number=number,
                ok=error is None and bool(text),
                latency_ms=(time.monotonic() - started) * 1000.0,
                prompt_tokens=stream.prompt_tokens,
                completion_tokens=stream.completion_tokens,
                error=error,
            )
            # Shielded: the reader may stop early (generator closed); the record must still land.
            await asyncio.shield(self._record_attempt(prep, attempt, text))
            self._log_turn(message.chat_key, request_id, tier, begun, attempt.ok, with_memory)

    async def record(self, message: IncomingMessage) -> None:
        """Record a message into memory without answering it (group chatter)."""
        await self._turn(message, message.text, message.message_id or uuid.uuid4().hex)

    async def command(self, message: IncomingMessage, name: str, args: str) -> CommandResult:
        """Run a chat command; admin ones refuse non-admins and reveal nothing."""
        from bot.router.commands import run_command

        return await run_command(self, message, name, args)
