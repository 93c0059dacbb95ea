"""The fake Discord's world: users, guilds, channels, members and roles, the call log, and waiting on it."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.discord_files import AttachmentStore

MANAGE_GUILD = 1 << 5
MESSAGE_CONTENT_INTENT = 1 << 15
ADMINISTRATOR = 1 << 3
# The permissions @everyone has in a fresh guild (view, send, read history, ...), no manage_guild.
EVERYONE_PERMISSIONS = 0x0000_0006_3784_0E41 & ~(MANAGE_GUILD | ADMINISTRATOR)
ALL_PERMISSIONS = (1 << 50) - 1
MAX_CONTENT = 2000
EPHEMERAL = 1 << 6

# Interaction callback types (Discord's numbering).
CHANNEL_MESSAGE = 4
DEFERRED_CHANNEL_MESSAGE = 5
DEFERRED_UPDATE_MESSAGE = 6
UPDATE_MESSAGE = 7


def iso_now() -> str:
    """The current time as Discord writes timestamps (ISO 8601, UTC)."""
    return datetime.now(UTC).isoformat()


@dataclass
class Call:
    """One REST call the client made."""

    method: str
    path: str  # relative to /api/v10, e.g. "/channels/1/messages"
    query: dict[str, str]
    json: Any = None
    files: list[tuple[str, bytes]] = field(default_factory=list)
    status: int = 200
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class Connection:
    """One gateway websocket connection and what the client sent on it."""

    ws: web.WebSocketResponse
    received: list[dict] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    ready: bool = False  # identified or resumed: dispatches may flow


class DiscordWorld:
    """The state of the fake Discord and what tests do with it; the gateway and REST are in mixins."""

    def __init__(self, token: str = "fake-bot-token") -> None:
        self.token = token
        self._ids = itertools.count(1_100_000_000_000_000_000)
        self.bot = self.make_user("chatbot", bot=True)
        self.application_id = self.bot["id"]
        self.owner = self.make_user("owner")
        self.calls: list[Call] = []
        self.messages: dict[str, dict] = {}
        self.channels: dict[str, dict] = {}
        self.guilds: dict[str, dict] = {}
        self.members: dict[tuple[str, str], dict] = {}
        self.commands: dict[str | None, list[dict]] = {}  # guild id (None: global) -> commands
        self.interactions: dict[str, dict] = {}  # interaction id -> {"payload", "responses"}
        self.connections: list[Connection] = []
        self.session_id: str | None = None
        self._seq = 0
        self._event_log: list[dict] = []  # every dispatch of the session, for RESUME replay
        self._nonces: dict[tuple[str, str], dict] = {}
        self._faults: list[tuple[Callable[[Call], bool], Callable[[web.Request], Any]]] = []
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.message_content_enabled = True  # the portal switch of the privileged intent
        self.files = AttachmentStore()  # user attachments, served over HTTP like Discord's CDN

    # ---- the world -------------------------------------------------------------------------

    def snowflake(self) -> str:
        """A new unique id, as Discord sends them (a string)."""
        return str(next(self._ids))

    def make_user(self, name: str, bot: bool = False) -> dict:
        """A user object."""
        return {
            "id": self.snowflake(),
            "username": name,
            "global_name": name.title(),
            "discriminator": "0",
            "avatar": None,
            "bot": bot,
            "public_flags": 0,
        }

    def add_guild(self, name: str = "Guild", owner: dict | None = None) -> dict:
        """A guild with an @everyone role, an Admin role (manage_guild) and a #general channel."""
        gid = self.snowflake()
        owner = owner or self.owner
        guild = {
            "id": gid,
            "name": name,
            "icon": None,
            "owner_id": owner["id"],
            "roles": [
                self._role(gid, "@everyone", EVERYONE_PERMISSIONS, 0),
                self._role(self.snowflake(), "Admin", EVERYONE_PERMISSIONS | MANAGE_GUILD, 1),
                # The role Discord creates for a bot when it joins (mentionable as the bot).
                {
                    **self._role(self.snowflake(), "chatbot", EVERYONE_PERMISSIONS, 2),
                    "managed": True,
                    "tags": {"bot_id": self.bot["id"]},
                },
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": [],
            "threads": [],
            "members": [],
            "voice_states": [],
            "presences": [],
            "member_count": 0,
            "large": False,
            "unavailable": False,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "system_channel_flags": 0,
            "joined_at": iso_now(),
        }
        self.guilds[gid] = guild
        self.add_member(guild, self.bot, roles=[guild["roles"][2]])
        self.add_channel(guild, "general")
        return guild

    def admin_role(self, guild: dict) -> dict:
        """The guild's role that carries manage_guild."""
        return guild["roles"][1]

    def bot_role(self, guild: dict) -> dict:
        """The bot's managed role in the guild."""
        return guild["roles"][2]

    @staticmethod
    def _role(rid: str, name: str, permissions: int, position: int) -> dict:
        return {
            "id": rid,
            "name": name,
            "permissions": str(permissions),
            "position": position,
            "color": 0,
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }

    def add_channel(self, guild: dict, name: str, parent: dict | None = None) -> dict:
        """A text channel (or, with `parent`, a public thread in it)."""
        cid = self.snowflake()
        if parent is None:
            channel = {
                "id": cid,
                "type": 0,
                "guild_id": guild["id"],
                "name": name,
                "position": len(guild["channels"]),
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "last_message_id": None,
                "rate_limit_per_user": 0,
            }
            guild["channels"].append(channel)
        else:
            channel = {
                "id": cid,
                "type": 11,
                "guild_id": guild["id"],
                "name": name,
                "parent_id": parent["id"],
                "owner_id": self.owner["id"],
                "last_message_id": None,
                "rate_limit_per_user": 0,
                "message_count": 0,
                "member_count": 1,
                "thread_metadata": {
                    "archived": False,
                    "auto_archive_duration": 1440,
                    "archive_timestamp": iso_now(),
                    "locked": False,
                },
                "flags": 0,
            }
            guild["threads"].append(channel)
        self.channels[cid] = channel
        return channel

    def add_dm(self, user: dict) -> dict:
        """A DM channel between the bot and `user`."""
        cid = self.snowflake()
        channel = {"id": cid, "type": 1, "recipients": [user], "last_message_id": None}
        self.channels[cid] = channel
        return channel

    def add_member(self, guild: dict, user: dict, roles: list[dict] = ()) -> dict:
        """Make `user` a member of `guild` with `roles`."""
        member = {
            "user": user,
            "roles": [r["id"] for r in roles],
            "joined_at": iso_now(),
            "deaf": False,
            "mute": False,
            "nick": None,
            "flags": 0,
        }
        self.members[(guild["id"], user["id"])] = member
        guild["members"].append(member)
        guild["member_count"] = len(guild["members"])
        return member

    def permissions_of(self, guild: dict, user: dict) -> int:
        """The guild-level permissions Discord computes for a member (owner: all)."""
        if guild["owner_id"] == user["id"]:
            return ALL_PERMISSIONS
        member = self.members[(guild["id"], user["id"])]
        perms = 0
        for role in guild["roles"]:
            if role["id"] == guild["id"] or role["id"] in member["roles"]:
                perms |= int(role["permissions"])
        return ALL_PERMISSIONS if perms & ADMINISTRATOR else perms

    # ---- waiting and asserting -------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until `predicate()` is truthy (re-checked on every call/frame); return its value."""

        async with asyncio.timeout(timeout):  # not wait_for: it can swallow cancellation on 3.11
            async with self._changed:
                return await self._changed.wait_for(predicate)

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        """Recorded calls whose method matches and whose path fully matches `pattern`."""
        return [c for c in self.calls if c.method == method and re.fullmatch(pattern, c.path)]

    def sent_to(self, channel: dict) -> list[Call]:
        """Successful message posts to `channel`."""
        return [c for c in self.calls_to("POST", rf"/channels/{channel['id']}/messages") if c.status == 200]

    def shown(self, channel: dict) -> list[str]:
        """What the channel shows now: the bot's messages there (after edits), oldest first."""
        return [
            m["content"]
            for m in self.messages.values()
            if m["channel_id"] == channel["id"]
            and m["author"]["id"] == self.bot["id"]
            and not m.get("deleted")
        ]

    def responses(self, interaction_id: str) -> list[Call]:
        """Callback calls answering an interaction."""
        return self.interactions[interaction_id]["responses"]

    def final_message(self, interaction_id: str) -> dict | None:
        """What the user sees as the interaction's answer: the original response (after edits)."""
        return self.interactions[interaction_id].get("original")
