"""Sending to Telegram: parts of at most 4096 characters, formatted as HTML (plain text when
Telegram refuses the formatting), retried through outages; and the "typing..." indicator."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

from telegram import Chat, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import BadRequest, NetworkError, TelegramError

from bot.adapters.telegram.html import is_format_error, markdown_to_html, split_for_telegram
from bot.chat.retry import RetryPlan, patiently

T = TypeVar("T")
log = logging.getLogger(__name__)


class TelegramSender:
    """Sends and edits answers in a chat; each Bot API call is retried within `plan`'s budget."""

    def __init__(self, plan: RetryPlan, typing_interval: float = 4.0) -> None:
        self.plan = plan
        self.typing_interval = typing_interval  # Telegram shows "typing" for about 5 s

    async def patiently(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run one Bot API call, retrying 5xx, refused connections and timeouts within the budget."""
        # A BadRequest is a NetworkError to PTB, but final: the same call would be refused again.
        return await patiently(
            call, what=what, plan=self.plan, transient=(NetworkError,), final=(BadRequest,)
        )

    async def send_text(
        self, chat: Chat, text: str, *, reply_to: int | None = None, markdown: bool = True
    ) -> list[Message]:
        """Send a long text in parts; formatted as HTML, again as plain text if Telegram refuses it."""
        sent = []
        for n, part in enumerate(split_for_telegram(text)):
            sent.append(
                await self.send_part(chat, part, reply_to=reply_to if n == 0 else None, markdown=markdown)
            )
        return sent

    async def send_part(
        self, chat: Chat, part: str, *, reply_to: int | None = None, markdown: bool = True
    ) -> Message:
        """One part (<= 4096 chars): formatted when `markdown`, plain if refused; retried through outages."""
        return await self.patiently(
            f"sending to chat {chat.id}", lambda: self._send_part_once(chat, part, reply_to, markdown)
        )

    async def _send_part_once(self, chat: Chat, part: str, reply_to: int | None, markdown: bool) -> Message:
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        if markdown:
            try:
                return await chat.send_message(
                    markdown_to_html(part), parse_mode=ParseMode.HTML, reply_parameters=reply
                )
            except BadRequest as exc:
                if not is_format_error(exc):
                    raise
                log.info("Telegram refused the formatting (%s); sending plain text", exc)
        return await chat.send_message(part, reply_parameters=reply)

    async def edit_part(self, message: Message, part: str, *, markdown: bool) -> None:
        """Replace the text of a sent part (formatted or plain, like `send_part`), retried like it."""
        await self.patiently(
            f"editing message {message.message_id}", lambda: self._edit_part_once(message, part, markdown)
        )

    @staticmethod
    async def _edit_part_once(message: Message, part: str, markdown: bool) -> None:
        with unless_not_modified():
            if markdown:
                try:
                    await message.edit_text(markdown_to_html(part), parse_mode=ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if not is_format_error(exc):
                        raise
                    log.info("Telegram refused the formatting (%s); editing as plain text", exc)
            await message.edit_text(part)

    @contextlib.asynccontextmanager
    async def typing(self, chat: Chat) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Show "typing..." now and renew it until the block ends or the yielded `stop()` returns."""
        stopping = asyncio.Event()

        async def keep_typing() -> None:
            while True:
                try:
                    await chat.send_action(ChatAction.TYPING)
                except TelegramError as exc:
                    log.debug("typing action failed in %s: %r", chat.id, exc)  # cosmetic only
                # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow a cancellation.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.typing_interval):
                        await stopping.wait()
                if stopping.is_set():
                    return

        task = asyncio.create_task(keep_typing())

        async def stop() -> None:
            # No action may land after the answer (it would show "typing" under it): let the
            # one in flight finish rather than cancel it after it may have reached Telegram.
            stopping.set()
            await asyncio.wait({task}, timeout=5.0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        try:
            yield stop
        finally:
            await stop()


@contextlib.contextmanager
def unless_not_modified() -> Iterator[None]:
    """An edit Telegram refuses as "not modified" already shows what we wanted: not an error."""
    try:
        yield
    except BadRequest as exc:
        if "not modified" not in str(exc).lower():
            raise
