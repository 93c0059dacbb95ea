"""`/dashboard`: a chat admin's one-time link to this chat's page on the owner's dashboard.

The link is signed with the memory API token's key and names this chat alone: it opens
no other chat, whatever chats its holder administers elsewhere. It is delivered privately
(Telegram: the admin's private chat with the bot; Discord: an ephemeral answer; the
console prints it) and is good for one login within `LINK_MINUTES`.
"""

from __future__ import annotations

from bot.chat.commands.registry import Command, CommandContext
from bot.chat.memory.client import HttpMemoryClient
from bot.chat.types import CommandResult

LINK_MINUTES = 10
NO_DASHBOARD = "The dashboard needs the memory worker over HTTP with a token; this bot has neither."


async def _dashboard(ctx: CommandContext) -> CommandResult:
    client = ctx.memory.client
    m = ctx.message
    link = None
    if isinstance(client, HttpMemoryClient):
        who = f"{m.platform}:{m.author_id}"
        link = client.dashboard_link(role="admin", who=who, chats=(ctx.chat,), minutes=LINK_MINUTES)
    if link is None:
        return CommandResult(NO_DASHBOARD)
    text = (
        f"Your one-time link to this chat's dashboard (valid {LINK_MINUTES} minutes, "
        f"one login, this chat only):\n{link}"
    )
    return CommandResult(text, private=True)


COMMANDS = (
    Command(
        "dashboard",
        "a private one-time link to this chat's page on the web dashboard",
        _dashboard,
        who="admin",
    ),
)
