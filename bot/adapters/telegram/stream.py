"""A Telegram answer shown while the model writes it (streaming)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from telegram import Message
from telegram.error import BadRequest, Forbidden, TelegramError

from bot.adapters.streaming import GrowingText
from bot.adapters.telegram.html import has_formatting, split_for_telegram
from bot.adapters.telegram.send import TelegramSender

log = logging.getLogger(__name__)

FINAL_RENDER_TRIES = 5
BROKEN = "Sorry, something went wrong while answering. Please try again."


class GrowingAnswer(GrowingText):
    """An answer shown while the model writes it: sent after about a sentence, then edited in
    place at a paced rate; past 4096 characters it continues in a new message.

    Intermediate versions are plain text (half-written Markdown rarely parses); the last
    render carries the final formatting, plain if Telegram refuses it, and is retried until
    it lands, so the final text is never lost. Each render shows `split_for_telegram(text)`,
    so the final messages are the ones a non-streamed answer would have been.
    """

    def __init__(
        self,
        sender: TelegramSender,
        question: Message,
        update_id: int,
        *,
        interval: float,
        before_first: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__()
        self.sender, self.question, self.update_id = sender, question, update_id
        self.interval = interval  # seconds between two renders in this chat
        self.before_first = before_first  # stops "typing..." before the answer shows
        self.messages: list[Message] = []
        self.shown: list[tuple[str, bool]] = []  # (text, formatted) of each message
        self.refused = False  # Telegram refused for good: stop rendering

    def _stream_failed(self) -> None:
        log.exception("error handling update %s: the answer stream failed", self.update_id)
        self.text = (self.text.rstrip() + "\n\n" + BROKEN).lstrip()

    async def _render_loop(self) -> None:
        final_tries = 0
        final_deadline = 0.0
        while True:
            text, done = await self._next_version()
            complete = await self._render(text, final=done)
            if done:
                final_tries += 1
                # Each call is already retried through an outage; this bounds the whole ending.
                final_deadline = final_deadline or time.monotonic() + self.sender.plan.budget_s
                if complete or final_tries >= FINAL_RENDER_TRIES or time.monotonic() > final_deadline:
                    if not complete:
                        log.error("gave up showing the end of the answer to %s", self.question.message_id)
                    return
                self.changed.set()  # the final text must land: try again after the pause
            # Pacing: Telegram's flood limits count edits too.
            await asyncio.sleep(self.interval)

    async def _render(self, text: str, final: bool) -> bool:
        """Bring the messages to `text`; True when every part shows what it should (or never can)."""
        if self.refused or (final and not text.strip() and not self.messages):
            return True  # refused for good, or an empty answer: nothing to show
        # Telegram trims each message: compare trimmed parts, or a new trailing newline would
        # cost an edit that Telegram refuses as "not modified".
        parts = [p.strip() or "…" for p in split_for_telegram(text)]
        complete = True
        for i, part in enumerate(parts):
            want = (part, final)
            try:
                if i >= len(self.messages):
                    reply_to = self.question.message_id if i == 0 else None
                    if i == 0 and self.before_first:
                        await self.before_first()
                    self.messages.append(
                        await self.sender.send_part(
                            self.question.chat, part, reply_to=reply_to, markdown=final
                        )
                    )
                    self.shown.append(want)
                elif self.shown[i] == (part, False) and final and not has_formatting(part):
                    self.shown[i] = want  # formatting would change nothing: spare the edit
                elif self.shown[i] != want:
                    await self.sender.edit_part(self.messages[i], part, markdown=final)
                    self.shown[i] = want
            except (BadRequest, Forbidden) as exc:
                # Final (blocked, chat gone, message deleted): trying again would not help.
                log.error("error handling update %s: Telegram refused the answer: %r", self.update_id, exc)
                self.refused = True
                return True
            except TelegramError as exc:
                log.warning(
                    "showing part %d of the answer to %s failed: %r", i, self.question.message_id, exc
                )
                complete = False
                break  # parts go in order: the next render continues from here
        for extra in self.messages[len(parts) :]:  # the split moved back (a late code block)
            with contextlib.suppress(TelegramError):
                await extra.delete()
        del self.messages[len(parts) :], self.shown[len(parts) :]
        return complete
