"""The pipeline behind every adapter: `Pipeline`, the `ChatService` of bot/chat/types.py.

One message: record it and get its memory (through the memory gateway), let the tier router
pick a tier (tiers.py), call the one model (the tier fallback, fallback.py: retries and the
next tiers), record every attempt and the answer. The pipeline only orchestrates: the gateway
talks to the memory worker, the chat state keeps the per-chat caches, the fallback calls the
tiers' models, the registry runs the commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from bot.chat import limits, logs
from bot.chat.access import AccessPolicy
from bot.chat.bounds import bounded_message
from bot.chat.chats import ChatState, LastPrompt
from bot.chat.commands.handlers import COMMANDS
from bot.chat.commands.registry import NOT_AVAILABLE, CommandContext, Registry, refused
from bot.chat.logs import Turn, log_turn
from bot.chat.media import (
    DESCRIBE,
    Intake,
    MediaReader,
    hide_description,
    image_content,
    remembered_answer,
    split_description,
    unaddressed_text,
)
from bot.chat.memory.client import MemoryRefused, MemoryUnavailable
from bot.chat.memory.gateway import MemoryGateway
from bot.chat.memory.outbox import Outbox
from bot.chat.models import failures
from bot.chat.models.base import Attempt, ChatMessage, MemoryContext, ModelFailure, ModelRequest
from bot.chat.models.fallback import AllTiersFailed, FallbackModel, RetryPolicy, TierStream
from bot.chat.models.light import LightWriter
from bot.chat.models.tiers import (
    TierChoice,
    choose_tier,
    fallback_sequence,
    rank_tiers,
    split_force_prefix,
    unknown_tier_notice,
)
from bot.chat.options import Answering
from bot.chat.proactive import followups
from bot.chat.proactive.delivery import ReminderDesk
from bot.chat.proactive.remind import command_in_words
from bot.chat.prompt import build_messages, redact, system_instruction
from bot.chat.types import CommandResult, IncomingMessage, Reply
from bot.config import Settings

log = logging.getLogger(__name__)

APOLOGY = "Sorry, the language models are unavailable right now. Please try again in a little while."
CUT_OFF = "\n\n[Sorry, the answer was cut off: the model stopped responding.]"
NO_MEMORY = "(the memory worker was unreachable: no memory was used)"
MEMORY_DOWN = "My memory is unreachable right now; please try again later."


@dataclass
class _Prepared:
    """Everything known about one message before the model is called."""

    message: IncomingMessage
    message_id: str
    text: str
    memory: MemoryContext | None
    choice: TierChoice
    request: ModelRequest  # its `tiers`: the fallback's order for this message
    intake: Intake
    generation: int  # the chat's forget generation when the message came (see chats.py)
    # Failed attempts are keyed per handling, so a platform redelivering the same message
    # still gets each new attempt recorded, while an outbox replay of one stays single.
    attempt_key: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    failures: list[Attempt] = field(default_factory=list)  # for the apology's hints


class Pipeline:
    """The `ChatService` of bot/chat/types.py (the composition root opens its gateway)."""

    def __init__(
        self,
        *,
        memory: MemoryGateway,
        answering: Answering,
        settings: Settings,
        reminders: ReminderDesk,
        chats: ChatState | None = None,
        commands: Registry = COMMANDS,
        secrets: Iterable[str] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.memory = memory
        self._recording: set[asyncio.Future[None]] = set()
        self.chats = chats or ChatState()
        self._commands = commands
        self.tiers = dict(answering.tiers)
        self.settings = settings
        self.offline = answering.offline
        self.fallback_order = answering.fallback_order or tuple(settings.router.fallback_order)
        self.default_tier = answering.default_tier or settings.router.default_tier
        self.rules = answering.rules or settings.router.choice
        policy = answering.policy or RetryPolicy.from_settings(settings.router)
        # The one model the pipeline calls: the tier fallback over every tier's model.
        self.model = FallbackModel(answering.models, policy, order=self.fallback_order, sleep=answering.sleep)
        self.secrets = tuple(s for s in secrets if s)
        self.access = AccessPolicy(settings.access, settings.admin_user_ids)
        self.clock = clock or (lambda: datetime.now(UTC))  # UTC: the day of the daily caps
        self.reminders = reminders  # due reminders: each adapter starts it for its platform's chats
        self.media = MediaReader(
            answering.transcriber,
            settings.transcription,
            settings.photos,
            vision=any(t.vision for t in self.tiers.values()),
            offline=answering.offline,
        )

    async def drain(self, timeout_s: float) -> None:
        """Wait (up to `timeout_s`) for records still being written after their reader left."""
        if self._recording:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await asyncio.gather(*self._recording, return_exceptions=True)

    @property
    def registry(self) -> Registry:
        """The chat commands every adapter renders."""
        return self._commands

    @property
    def outbox(self) -> Outbox:
        """The gateway's outbox (records waiting for the memory worker)."""
        return self.memory.outbox

    async def flush_outbox(self) -> int:
        """Replay the outbox now; how many records were delivered."""
        return await self.memory.flush()

    # -- the pipeline -----------------------------------------------------------------

    def _cost(self, tier: str, prompt_tokens: int, completion_tokens: int) -> float:
        t = self.tiers.get(tier)
        return 0.0 if t is None else t.cost_usd(prompt_tokens, completion_tokens)

    async def _record_attempts(self, prep: _Prepared, attempts: Sequence[Attempt]) -> None:
        """Record each attempt of the fallback, in order (a good one with its words)."""
        for attempt in attempts:
            await self._record_attempt(prep, attempt, attempt.text)

    async def _record_attempt(self, prep: _Prepared, attempt: Attempt, text: str = "") -> None:
        if not attempt.ok:
            prep.failures.append(attempt)
        if prep.intake.images:  # memory keeps the picture's description line
            text = remembered_answer(text)
        # Each attempt has its own idempotency key; the good one is the reply's id.
        key = (
            f"{prep.message_id}:reply"
            if attempt.ok
            else f"{prep.message_id}:try{attempt.number}:{prep.attempt_key}"
        )
        if attempt.ok and self.chats.forgot_since(
            prep.message.chat_key, prep.message.author_id, prep.generation
        ):
            # They said /forgetme (or an admin /forget) while this answer was being made: the
            # answer to their forgotten message is not kept; the call's usage still counts.
            attempt = replace(
                attempt, ok=False, error="answered, not kept: its asker was forgotten meanwhile"
            )
        if attempt.error:
            attempt = replace(attempt, error=redact(attempt.error, self.secrets))
        record = attempt.reply_request(
            text,
            cost_usd=self._cost(attempt.tier, attempt.prompt_tokens, attempt.completion_tokens),
            message_id=key,
            author_id=prep.message.author_id,
            reply_to_message_id=prep.message_id,
        )
        await self.memory.reply(prep.message.chat_key, record)

    async def _prepare(self, message: IncomingMessage, intake: Intake) -> _Prepared:
        message_id = message.message_id or uuid.uuid4().hex
        forced_now, text = split_force_prefix(intake.text, list(self.tiers))
        text = redact(text if text.strip() else intake.text, self.secrets)  # a pasted token goes
        chat = message.chat_key
        generation = self.chats.generation(chat)
        async with self.chats.lock(chat):  # one chat's messages go in arrival order
            mem = await self.memory.turn(message, text, message_id)
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
            forced=forced_now or self.chats.forced_tier(chat),
            usage_today=mem.usage_today if mem else None,
            daily_budget_usd=self.settings.daily_budget_usd,
        )
        order = fallback_sequence(choice.tier, self.fallback_order, self.tiers)
        if intake.images:  # only a tier that reads images may answer
            order = [t for t in order if self.tiers[t].vision] + [
                t for t in rank_tiers(self.tiers) if self.tiers[t].vision and t not in order
            ]
        persona = mem.persona if mem else ""
        built = build_messages(
            text=text,
            author=message.author,
            memory=mem,
            group=_is_group(message),
            # ~3 characters per token, a quarter of the window kept for the answer.
            max_chars=min(self.tiers[t].context_tokens for t in order) * 3 * 3 // 4,
            system=system_instruction(
                self.settings.system_prompt, persona, DESCRIBE if intake.images else ""
            ),
        )
        messages = built.messages
        if built.dropped:
            log.info("prompt of %s cut to fit the context: %s", chat, ", ".join(built.dropped))
        if intake.images:
            current = messages[-1]
            content = image_content(str(current["content"]), intake.images)
            with_images: ChatMessage = {"role": "user", "content": content}
            messages = (*messages[:-1], with_images)
        request = ModelRequest(
            messages=messages,
            chat_key=chat,
            author=message.author,
            author_id=message.author_id,
            text=text,
            memory=mem,
            tiers=tuple(order),
        )
        prompt = built.shown() if mem is not None else NO_MEMORY
        last = LastPrompt(redact(prompt, self.secrets), choice.tier, choice.reasons, persona=persona)
        self.chats.remember_prompt(chat, last, generation)
        return _Prepared(message, message_id, text, mem, choice, request, intake, generation)

    def _note_typo(self, intake: Intake) -> Intake:
        """`!nosuchtier ...`: the answer says there is no such tier (a notice, never recorded)."""
        typo = unknown_tier_notice(intake.text, rank_tiers(self.tiers))
        return replace(intake, notice=_with_notice(intake.notice, typo)) if typo else intake

    def _apology(self, prep: _Prepared) -> str:
        """APOLOGY, and what to fix when a tier's key, model or URL is wrong (failures.py)."""
        failed = ((a.tier, a.kind, a.status) for a in prep.failures)
        found = failures.problems(failed, self.tiers)
        return redact(failures.apology(APOLOGY, found, admin=prep.message.is_admin), self.secrets)

    def _cap_reached(self, prep: _Prepared) -> str | None:
        """The answer when a daily cap is reached (no model call), else None.

        Without memory the counts are unknown: the message is answered (fail open, like the
        rest of the bot when the worker is out of reach).
        """
        if prep.memory is None:
            return None
        now = self.clock()
        hit = limits.check(self.settings.limits, prep.memory.usage_today, prep.memory.usage_today_author, now)
        if hit is None:
            return None
        log.info("cap %s reached in %s", hit.name, prep.message.chat_key)
        return hit.text(now)

    async def _remember_only(self, message: IncomingMessage, text: str) -> None:
        """Record a user message that gets no model answer."""
        if (text := redact(text, self.secrets)).strip():  # a pasted token is not kept
            async with self.chats.lock(message.chat_key):
                await self.memory.turn(message, text, message.message_id or uuid.uuid4().hex)

    async def _before_model(self, message: IncomingMessage, turn: Turn) -> _Prepared | Reply:
        """Everything before a model is called, for `handle` and `stream` alike: the message
        prepared, or the answer of an early exit (named in `turn.exit`, for its log line).

        A stranger's message (see access.py) is neither recorded nor answered: the reply is
        the refusal, or "" (send nothing) when they were refused recently.
        """
        verdict = self.access.check(message)
        if not verdict.allowed:
            turn.exit = "refused"
            return Reply(text=verdict.refusal, ok=True, with_memory=False)
        message, cut = bounded_message(message)  # at the edge: what the model and the memory see
        if not message.addressed:
            await self.record(message)
            turn.exit = "recorded"
            return Reply(text="", ok=True, with_memory=True)
        kept = await followups.hook(
            self.memory, message, self.settings, self.clock()
        )  # unaddressed: in record
        if (said := command_in_words(message.text)) is not None:  # "remind me ...", "what did I miss?"
            turn.exit = "command"
            return Reply(text=(await self.command(message, said, message.text)).text, ok=True)
        intake = self._note_typo(await self.media.read(message))
        if kept is not None:  # the plan named, whatever the model says
            intake = replace(intake, notice=_with_notice(intake.notice, followups.confirmation(kept)))
        if cut:
            intake = replace(intake, notice=_with_notice(cut, intake.notice))
        if not intake.answer:  # a notice alone: nothing for a model to answer
            await self._remember_only(message, intake.text)
            turn.exit = "notice"
            return Reply(text=intake.notice, ok=True)
        prep = await self._prepare(message, intake)
        turn.with_memory = prep.memory is not None
        capped = self._cap_reached(prep)
        if capped is not None:
            turn.exit = "capped"
            return Reply(text=capped, ok=True, with_memory=turn.with_memory)
        return prep

    @staticmethod
    def _ended(turn: Turn, reply: Reply) -> Reply:
        turn.tier, turn.ok, turn.with_memory = reply.tier, reply.ok, reply.with_memory
        return reply

    async def handle(self, message: IncomingMessage) -> Reply:
        """Record the message, answer it with memory, record the answer."""
        turn = Turn(message.chat_key)
        try:
            with logs.handling(message.chat_key) as turn.request_id:
                prep = await self._before_model(message, turn)
                if isinstance(prep, Reply):
                    return self._ended(turn, prep)
                try:
                    answer = await self.model.complete(prep.request, timeout=self.model.policy.time_budget_s)
                except AllTiersFailed as failed:
                    await self._record_attempts(prep, failed.attempts)
                    turn.exit = "apology"
                    text = _with_notice(prep.intake.notice, self._apology(prep))
                    return self._ended(turn, Reply(text=text, ok=False, with_memory=turn.with_memory))
                await self._record_attempts(prep, answer.attempts)
            shown = split_description(answer.text)[1] if prep.intake.images else answer.text
            turn.exit = "answered"
            reply = Reply(
                # Notices are for the reader only: what was recorded is the answer itself.
                text=_with_notice(prep.intake.notice, answer.notice, shown),
                tier=answer.attempts[-1].tier,
                model=answer.model,
                ok=True,
                with_memory=turn.with_memory,
                message_id=f"{prep.message_id}:reply",
            )
            return self._ended(turn, reply)
        except asyncio.CancelledError:  # a shutdown: the message is kept, its answer never came
            turn.exit = "cancelled"
            raise
        finally:  # also when cancelled or broken: the line says ok=False
            log_turn(turn)

    async def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        """Like `handle`, but yields the answer's text as it grows (chunks to append)."""
        turn = Turn(message.chat_key)
        try:
            # The request context is held only while nothing is yielded: a context variable
            # set across the yields of an async generator could be reset from another context.
            answered: TierStream | None = None
            with logs.handling(message.chat_key) as turn.request_id:
                prep = await self._before_model(message, turn)
                if not isinstance(prep, Reply):
                    try:
                        answered = await self.model.start_stream(
                            prep.request, timeout=self.model.policy.time_budget_s
                        )
                    except AllTiersFailed as failed:
                        await self._record_attempts(prep, failed.attempts)
                        turn.exit = "apology"
                    else:
                        await self._record_attempts(prep, answered.failed)
            if isinstance(prep, Reply):
                self._ended(turn, prep)
                if prep.text:
                    yield prep.text
                return
            if prep.intake.notice:
                yield prep.intake.notice + "\n"
            if answered is None:
                yield self._apology(prep)
                return
            # Closed here, not by the garbage collector: a reader leaving early gets its record now.
            async with contextlib.aclosing(self._read_stream(prep, answered, turn)) as pieces:
                async for piece in pieces:
                    yield piece
        except asyncio.CancelledError:
            turn.exit = "cancelled"
            raise
        finally:
            log_turn(turn)

    async def _read_stream(
        self, prep: _Prepared, stream: TierStream, turn: Turn
    ) -> AsyncGenerator[str, None]:
        """The pieces of a started stream; its attempt is recorded however it ends."""
        turn.tier = stream.tier
        turn.exit = "stopped"  # until the stream completes: the reader may stop early
        if stream.notice:  # shown, never recorded: `pieces` holds the answer alone
            yield stream.notice + "\n"
        pieces: list[str] = []
        error: str | None = "the reader stopped before the end"  # until the stream completes

        async def read() -> AsyncIterator[str]:
            async for piece in stream:
                pieces.append(piece)
                yield piece

        try:
            async for piece in hide_description(read()) if prep.intake.images else read():
                yield piece
            error = None
        except ModelFailure as failure:
            error = str(failure)
            turn.exit = "cut_off"
            yield CUT_OFF
        except Exception as bug:  # a programming error: logged with its traceback, never retried
            log.exception("the stream of tier %s failed with a bug", stream.tier)
            error = f"internal: {type(bug).__name__}"
            turn.exit = "cut_off"
            yield CUT_OFF
        finally:
            await stream.aclose()
            text = "".join(pieces)
            attempt = stream.attempt(ok=error is None and bool(text), error=error)
            turn.ok = attempt.ok
            if attempt.ok:
                turn.exit = "answered"
            # Shielded: the reader may stop early (generator closed); the record must still land,
            # and a shutdown waits for it (`drain`).
            record = asyncio.ensure_future(self._record_attempt(prep, attempt, text))
            self._recording.add(record)
            record.add_done_callback(self._recording.discard)
            await asyncio.shield(record)

    async def record(self, message: IncomingMessage) -> None:
        """Record a message into memory without answering it (group chatter; a stranger's: never).

        Media are not read for it (no transcription, no model): a photo is remembered as
        "[photo] caption", a voice message by its caption alone (see media.unaddressed_text).
        """
        if self.access.allows(message):
            message, _ = bounded_message(message)  # not answered: nobody to tell
            await followups.hook(self.memory, message, self.settings, self.clock())
            await self._remember_only(message, unaddressed_text(message) if message.media else message.text)

    async def command(self, message: IncomingMessage, name: str, args: str) -> CommandResult:
        """Run a chat command of the registry; admin ones refuse non-admins and reveal nothing."""
        verdict, args = self.access.check(message, command=True), redact(args, self.secrets)
        if not verdict.allowed:
            return CommandResult(verdict.refusal)
        command = self._commands.find(name)
        if command is None:
            return CommandResult(NOT_AVAILABLE)
        if command.admin and not message.is_admin:
            return CommandResult(refused(name))
        ctx = CommandContext(
            message=message,
            args=args.strip(),
            invoked_as=name.strip().lower().lstrip("/").split("@", 1)[0],
            memory=self.memory,
            chats=self.chats,
            tiers=self.tiers,
            secrets=self.secrets,
            registry=self._commands,
            settings=self.settings,
            clock=self.clock,
            light_model=LightWriter.of(self),
        )
        try:
            return await command.handler(ctx)
        except MemoryUnavailable:
            return CommandResult(MEMORY_DOWN)
        except MemoryRefused as exc:
            return CommandResult(f"The memory refused that: {exc.error}")


def _is_group(message: IncomingMessage) -> bool:
    """True when the chat has several people: every platform chat, and a Telegram or Discord chat
    read in the console (`chatbot chat --chat telegram:-100… --as NAME`); a console chat is one's own."""
    if message.platform != "console":
        return True
    return message.chat_key.split(":", 1)[0] in ("telegram", "discord")


def _with_notice(*parts: str) -> str:
    """Notices and the answer, one per line, the empty ones left out."""
    return "\n".join(p for p in parts if p)
