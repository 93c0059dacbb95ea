"""How each platform sends a due reminder (the courier's `send`): retried within the send budget,
raising when it could not be delivered, so the reminder is kept and tried again later."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from bot.chat.neutral import printable
from bot.chat.types import ReminderSend as Send
from bot.errors import NotDelivered

if TYPE_CHECKING:
    import discord
    from telegram import Bot

    from bot.adapters.telegram.send import TelegramSender


def platform_chat_id(chat_key: str) -> int:
    """The platform's chat id in a chat key (`telegram:-100123`, `discord:98765[:user]`)."""
    return int(chat_key.split(":")[1])


def telegram_send(bot: Bot, sender: TelegramSender) -> Send:
    """Send a reminder to a Telegram chat with the adapter's retries (5xx, 429, timeouts)."""

    async def send(chat_key: str, text: str, key: str) -> None:
        # No idempotency key in the Bot API: a send in flight at a crash may arrive twice.
        chat_id = platform_chat_id(chat_key)
        await sender.patiently(f"reminder to chat {chat_id}", lambda: bot.send_message(chat_id, text))

    return send


def console_send(stdout: TextIO, chat_key: str, prompt: Callable[[], str] = str) -> Send:
    """Print a reminder of the console chat `chat_key` (others' stay queued for their console),
    then `prompt()`: the prompt it printed over, drawn again ("" when none was waiting)."""

    async def send(key_of_chat: str, text: str, key: str) -> None:
        if key_of_chat != chat_key:
            raise NotDelivered(f"{key_of_chat} is another console chat")
        stdout.write(f"\n{printable(text)}\n{prompt()}")  # a reminder's words may carry escapes
        stdout.flush()

    return send


def discord_send(client: discord.Client, budget_s: float) -> Send:
    """Send a reminder to a Discord channel with the adapter's retries."""
    from bot.adapters.discord.send import send_with_retry

    async def send(chat_key: str, text: str, key: str) -> None:
        channel_id = platform_chat_id(chat_key)
        channel = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
        # The occurrence's own nonce: a send repeated after a crash is kept once by Discord.
        nonce = int.from_bytes(hashlib.sha256(key.encode()).digest()[:7], "big")
        if await send_with_retry(channel, text, budget_s=budget_s, nonce=nonce) is None:  # type: ignore[arg-type]
            raise NotDelivered(f"Discord did not take the reminder for channel {channel_id}")

    return send
