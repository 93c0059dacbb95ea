"""How each platform sends a due reminder (the courier's `send`): retried within the send budget,
raising when it could not be delivered, so the reminder is kept and tried again later."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.router.reminders_delivery import Send

if TYPE_CHECKING:
    import discord
    from telegram import Bot

    from bot.adapters.telegram_send import TelegramSender


class NotDelivered(Exception):
    """The platform did not take the reminder within the send budget."""


def platform_chat_id(chat_key: str) -> int:
    """The platform's chat id in a chat key (`telegram:-100123`, `discord:98765[:user]`)."""
    return int(chat_key.split(":")[1])


def telegram_send(bot: Bot, sender: TelegramSender) -> Send:
    """Send a reminder to a Telegram chat with the adapter's retries (5xx, 429, timeouts)."""

    async def send(chat_key: str, text: str) -> None:
        chat_id = platform_chat_id(chat_key)
        await sender.patiently(f"reminder to chat {chat_id}", lambda: bot.send_message(chat_id, text))

    return send


def discord_send(client: discord.Client, budget_s: float) -> Send:
    """Send a reminder to a Discord channel with the adapter's retries."""
    from bot.adapters.discord_send import send_with_retry

    async def send(chat_key: str, text: str) -> None:
        channel_id = platform_chat_id(chat_key)
        channel = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
        if await send_with_retry(channel, text, budget_s=budget_s) is None:  # type: ignore[arg-type]
            raise NotDelivered(f"Discord did not take the reminder for channel {channel_id}")

    return send
