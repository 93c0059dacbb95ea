"""Sending to Discord: parts of at most 2,000 characters, retried through outages, the typing
indicator, and an answer shown while the model writes it (streaming)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord

from bot.adapters.split import split_text
from bot.adapters.streaming import GrowingText
from bot.chat.retry import RetryPlan, patiently

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 2000  # Discord refuses longer message content with 400
TYPING_REFRESH_S = 8.0  # one typing trigger shows for ~10 s
# Streaming: Discord allows about 5 edits per 5 s per channel; one update a second stays well
# inside that.
EDIT_INTERVAL_S = 1.0
# Failures worth one more try; 4xx answers (forbidden, too long, unknown channel) are final.
TRANSIENT_ERRORS = (discord.DiscordServerError, aiohttp.ClientError, OSError, asyncio.TimeoutError)


def _where(channel: discord.abc.Messageable) -> str:
    """The channel's id for a log line ("?" for a Messageable without one)."""
    return str(channel.id) if isinstance(channel, discord.abc.Snowflake) else "?"


@contextlib.asynccontextmanager
async def typing_shown(channel: discord.abc.Messageable) -> AsyncIterator[None]:
    """Show "typing…" until the block ends; failing to show it never stops the answer."""

    async def keep_typing() -> None:
        while True:
            try:
                await channel.typing()  # awaiting a Typing triggers it once
            except (discord.HTTPException, *TRANSIENT_ERRORS) as exc:
                log.warning("typing indicator in %s failed: %r", _where(channel), exc)
            await asyncio.sleep(TYPING_REFRESH_S)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()


async def send_with_retry(
    channel: discord.abc.Messageable,
    content: str,
    *,
    budget_s: float = 60.0,
    nonce: int | None = None,
    **kwargs: Any,
) -> discord.Message | None:
    """Send one message, retrying transient failures (once at once, then within `budget_s`); None if not.

    `nonce`: the caller's own (a reminder's, the same after a restart), else a fresh one."""
    # The same nonce with enforce_nonce on every try: Discord keeps one copy if an earlier try got through.
    nonce = secrets.randbelow(10**18) if nonce is None else nonce
    where = _where(channel)
    try:
        return await patiently(
            lambda: channel.send(content, nonce=nonce, **kwargs),
            what=f"send to channel {where}",
            plan=_plan(budget_s),
            transient=TRANSIENT_ERRORS,
        )
    except TRANSIENT_ERRORS:
        log.error("send to channel %s: giving up on this part (the answer is kept in memory)", where)
    except discord.HTTPException as exc:
        log.error("send to channel %s refused: %s", where, exc)
    return None


async def edit_with_retry(message: discord.Message, content: str, *, budget_s: float = 60.0) -> bool:
    """Edit one message, retried like `send_with_retry`; whether it was edited."""
    try:
        await patiently(
            lambda: message.edit(content=content),
            what=f"edit of message {message.id}",
            plan=_plan(budget_s),
            transient=TRANSIENT_ERRORS,
        )
        return True
    except TRANSIENT_ERRORS:
        log.error("edit of message %s kept failing", message.id)
    except discord.HTTPException as exc:
        log.error("edit of message %s refused: %s", message.id, exc)
    return False


def _plan(budget_s: float) -> RetryPlan:
    # A second try always (the first one at once: a reset connection is often one-off).
    return RetryPlan(budget_s=budget_s, min_tries=2, at_once=True)


SORRY = "Sorry, something went wrong on my side. Please try again."


def parts_of(text: str) -> list[str]:
    """The messages an answer becomes (Discord trims whitespace around a message anyway)."""
    return split_text(text.strip(), MESSAGE_LIMIT)


def reply_reference(message: discord.Message, part: int) -> discord.MessageReference | None:
    """In guilds the first part replies to the question (so it is clear whom it answers)."""
    if part == 0 and message.guild is not None:
        return message.to_reference(fail_if_not_exists=False)
    return None


class GrowingAnswer(GrowingText):
    """An answer shown while it is written: sent after about a sentence, then edited in place
    at most once per EDIT_INTERVAL_S; past 2,000 characters it continues in a new message.
    Each render shows `split_text(text)`, so the final messages equal the non-streamed ones."""

    def __init__(self, question: discord.Message, budget_s: float = 60.0) -> None:
        super().__init__()
        self.question = question
        self.budget_s = budget_s
        self.messages: list[discord.Message] = []
        self.shown: list[str] = []

    def _stream_failed(self) -> None:
        log.exception("chat service stream failed on message %s", self.question.id)
        self.text += ("\n\n" if self.text else "") + SORRY

    async def _render_loop(self) -> None:
        while True:
            text, done = await self._next_version()
            await self._render(text)
            if done:
                return
            await asyncio.sleep(EDIT_INTERVAL_S)  # pacing: Discord's edit rate limit

    async def _render(self, text: str) -> None:
        parts = parts_of(text)
        for i, part in enumerate(parts):
            if i >= len(self.messages):
                sent = await send_with_retry(
                    self.question.channel,
                    part,
                    budget_s=self.budget_s,
                    reference=reply_reference(self.question, i),
                )
                if sent is None:
                    return  # logged; the next render tries again
                self.messages.append(sent)
                self.shown.append(part)
            elif self.shown[i] != part and await edit_with_retry(
                self.messages[i], part, budget_s=self.budget_s
            ):
                self.shown[i] = part
        for extra in self.messages[len(parts) :]:  # a late code block can pull text back
            with contextlib.suppress(discord.HTTPException, *TRANSIENT_ERRORS):
                await extra.delete()
        del self.messages[len(parts) :], self.shown[len(parts) :]
