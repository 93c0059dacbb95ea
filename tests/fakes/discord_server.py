"""An in-process fake Discord: REST (aiohttp.web) and gateway websocket on 127.0.0.1.

discord.py talks to it over real HTTP and a real websocket. It serves the routes discord.py
calls under `Route.BASE` (`/api/v10/...`), speaks the gateway protocol (HELLO, IDENTIFY,
READY, GUILD_CREATE, heartbeat ACK, RESUME with replay, INVALID_SESSION), injects
MESSAGE_CREATE and INTERACTION_CREATE events, records every call for assertions and can
drop the gateway connection to exercise reconnects.

Payload shapes follow Discord's API v10 documentation; JSON answers carry
`content-type: application/json` exactly, because discord.py only parses that.

    async with FakeDiscord() as fake:
        guild = fake.add_guild(); alice = fake.make_user("alice"); fake.add_member(guild, alice)
        settings: DISCORD_API_BASE_URL=fake.api_base, DISCORD_GATEWAY_URL=fake.gateway_url,
                  DISCORD_BOT_TOKEN=fake.token
        await fake.user_says(guild["channels"][0], alice, f"{fake.mention(fake.bot)} hi", mentions=[fake.bot])
        await fake.wait_for(lambda: fake.shown(guild["channels"][0]))
        iid = await fake.invoke("help", alice, guild["channels"][0]); fake.final_message(iid)
        await fake.drop_gateway(abort=True)  # the client resumes; missed events are replayed

Events are only delivered within a session: inject them after the client identified
(`fake.identifies`); while the connection is down they are kept and replayed on RESUME.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import aiohttp
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


def _now() -> str:
    return datetime.now(UTC).isoformat()


def json_response(data: Any, status: int = 200) -> web.Response:
    """A JSON answer whose content-type is exactly `application/json` (what discord.py checks)."""
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


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


class FakeDiscord:
    """The fake Discord server; use `async with FakeDiscord() as fake:`."""

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

    # ---- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        app.router.add_get("/attachments/{path:.*}", self.files.serve)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the port the system chose for port 0
        self.files.base_url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc) -> None:
        for conn in self.connections:
            if not conn.ws.closed:
                await conn.ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        """The value for `discord.http.Route.BASE` / DISCORD_API_BASE_URL."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        """The value for DISCORD_GATEWAY_URL."""
        return f"ws://127.0.0.1:{self.port}/gateway"

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
            "joined_at": _now(),
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
                    "archive_timestamp": _now(),
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
            "joined_at": _now(),
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

    # ---- injecting events ------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict) -> None:
        """Send a DISPATCH event; while disconnected it is kept and replayed on RESUME."""
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        self._event_log.append(frame)
        conn = self.connections[-1] if self.connections else None
        if conn is not None and not conn.ws.closed and conn.ready:
            await conn.ws.send_json(frame)

    def message_payload(
        self,
        channel: dict,
        author: dict,
        content: str,
        *,
        mentions: list[dict] = (),
        mention_roles: list[dict] = (),
        reply_to: dict | None = None,
        type: int = 0,
        embeds: list[dict] = (),
        attachments: list[dict] = (),
    ) -> dict:
        """A message object as Discord sends it in MESSAGE_CREATE (and REST answers)."""
        mid = self.snowflake()
        msg: dict[str, Any] = {
            "id": mid,
            "channel_id": channel["id"],
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": list(mentions),
            "mention_roles": [r["id"] for r in mention_roles],
            "attachments": list(attachments),
            "embeds": list(embeds),
            "pinned": False,
            "type": 19 if reply_to is not None and type == 0 else type,
            "flags": 0,
            "components": [],
        }
        guild_id = channel.get("guild_id")
        if guild_id:
            msg["guild_id"] = guild_id
            member = self.members.get((guild_id, author["id"]))
            if member is not None:
                msg["member"] = {k: v for k, v in member.items() if k != "user"}
        if reply_to is not None:
            msg["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                **({"guild_id": guild_id} if guild_id else {}),
            }
            msg["referenced_message"] = reply_to
        self.messages[mid] = msg
        return msg

    async def user_says(self, channel: dict, author: dict, content: str, **kwargs) -> dict:
        """A user posts a message: MESSAGE_CREATE is dispatched; returns the message."""
        msg = self.message_payload(channel, author, content, **kwargs)
        await self.dispatch("MESSAGE_CREATE", msg)
        return msg

    def mention(self, user: dict) -> str:
        """The markup of a user mention."""
        return f"<@{user['id']}>"

    async def invoke(
        self,
        name: str,
        user: dict,
        channel: dict,
        options: dict[str, Any] | None = None,
    ) -> str:
        """A user runs slash command `name` in `channel`: INTERACTION_CREATE; returns its id."""
        scope = channel.get("guild_id")
        commands = self.commands.get(scope) or self.commands.get(None) or []
        command = next((c for c in commands if c["name"] == name), None)
        if command is None:
            raise AssertionError(f"command /{name} was never synced (have {[c['name'] for c in commands]})")
        type_of = {o["name"]: o["type"] for o in command.get("options", [])}
        data: dict[str, Any] = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": [{"name": k, "type": type_of[k], "value": v} for k, v in (options or {}).items()],
        }
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        payload = self._interaction(2, user, channel, data)
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload["id"]

    async def click(self, message: dict, custom_id: str, user: dict) -> str:
        """A user clicks the button `custom_id` on `message`: INTERACTION_CREATE; returns its id."""
        channel = self.channels[message["channel_id"]]
        data = {"custom_id": custom_id, "component_type": 2}
        payload = self._interaction(3, user, channel, data, message=message)
        await self.dispatch("INTERACTION_CREATE", payload)
        return payload["id"]

    def _interaction(
        self, type: int, user: dict, channel: dict, data: dict, message: dict | None = None
    ) -> dict:
        iid = self.snowflake()
        payload: dict[str, Any] = {
            "id": iid,
            "application_id": self.application_id,
            "type": type,
            "data": data,
            "channel_id": channel["id"],
            "channel": channel,
            "token": f"itoken-{iid}",
            "version": 1,
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": channel.get("guild_id") or user["id"]},
            "attachment_size_limit": 8 * 1024 * 1024,
            "app_permissions": str(EVERYONE_PERMISSIONS),
        }
        guild_id = channel.get("guild_id")
        if guild_id:
            guild = self.guilds[guild_id]
            member = dict(self.members[(guild_id, user["id"])])
            member["permissions"] = str(self.permissions_of(guild, user))
            payload.update(guild_id=guild_id, member=member, guild_locale="en-US", context=0)
            payload["guild"] = {"id": guild_id, "locale": "en-US", "features": []}
        else:
            payload.update(user=user, context=1)
        if message is not None:
            payload["message"] = message
        self.interactions[iid] = {"payload": payload, "responses": []}
        return payload

    # ---- the gateway -----------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None, autoping=True)
        await ws.prepare(request)
        conn = Connection(ws=ws)
        self.connections.append(conn)
        await ws.send_json({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None})
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                conn.received.append(frame)
                await self._on_gateway_frame(conn, frame)
                await self._notify()
        finally:
            conn.closed.set()
            await self._notify()
        return ws

    async def _on_gateway_frame(self, conn: Connection, frame: dict) -> None:
        op, d = frame.get("op"), frame.get("d")
        if op == 1:  # heartbeat
            await conn.ws.send_json({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:  # identify: a new session
            if d.get("token") != self.token:
                await conn.ws.close(code=4004, message=b"Authentication failed.")
                return
            if d.get("intents", 0) & MESSAGE_CONTENT_INTENT and not self.message_content_enabled:
                await conn.ws.close(code=4014, message=b"Disallowed intent(s).")
                return
            self.session_id = self.snowflake()
            self._seq = 0
            self._event_log = []
            conn.ready = True
            await self.dispatch("READY", self._ready())
            for guild in self.guilds.values():
                await self.dispatch("GUILD_CREATE", guild)
        elif op == 6:  # resume: replay what the client missed
            if d.get("session_id") != self.session_id or d.get("token") != self.token:
                await conn.ws.send_json({"op": 9, "d": False, "s": None, "t": None})
                return
            seq = d.get("seq") or 0
            for frame_ in [f for f in self._event_log if f["s"] > seq]:
                await conn.ws.send_json(frame_)
            conn.ready = True
            await self.dispatch("RESUMED", {})

    def _ready(self) -> dict:
        return {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": g, "unavailable": True} for g in self.guilds],
            "session_id": self.session_id,
            "resume_gateway_url": self.gateway_url,
            "application": {"id": self.application_id, "flags": 0},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
        }

    @property
    def identifies(self) -> list[dict]:
        """Every IDENTIFY payload received."""
        return [f["d"] for c in self.connections for f in c.received if f.get("op") == 2]

    @property
    def resumes(self) -> list[dict]:
        """Every RESUME payload received."""
        return [f["d"] for c in self.connections for f in c.received if f.get("op") == 6]

    async def drop_gateway(self, code: int = 4000, abort: bool = False) -> None:
        """Drop the current gateway connection: close with `code`, or cut the TCP stream."""
        conn = self.connections[-1]
        conn.ready = False
        if abort:
            # aiohttp has no public way to cut a websocket's TCP stream without a close frame.
            transport = conn.ws._req.transport  # type: ignore[union-attr]  # open while connected
            transport.abort()
        else:
            await conn.ws.close(code=code)
        await conn.closed.wait()

    # ---- REST ------------------------------------------------------------------------------

    def fail_next(self, predicate: Callable[[Call], bool], how: str = "disconnect", times: int = 1) -> None:
        """Make the next `times` matching calls fail: "disconnect" (no answer) or "500"/"429"."""
        for _ in range(times):
            self._faults.append((predicate, how))

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        call = Call(request.method, path, dict(request.query))
        if request.content_type == "application/json":
            call.json = await request.json()
        elif request.content_type.startswith("multipart/"):
            form = await request.post()
            for key, value in form.items():
                if key == "payload_json":
                    call.json = json.loads(value)
                elif hasattr(value, "file"):
                    call.files.append((value.filename, value.file.read()))
        self.calls.append(call)
        try:
            fault = next((f for f in self._faults if f[0](call)), None)
            if fault is not None:
                self._faults.remove(fault)
                return await self._fault(request, call, fault[1])
            if request.headers.get("Authorization") != f"Bot {self.token}" and not path.startswith(
                ("/webhooks/", "/interactions/")
            ):
                call.status = 401
                return json_response({"message": "401: Unauthorized", "code": 0}, 401)
            response = await self._route(request.method, path, call)
            call.status = response.status
            return response
        finally:
            await self._notify()

    async def _fault(self, request: web.Request, call: Call, how: str) -> web.StreamResponse:
        if how == "disconnect":
            call.status = 0
            assert request.transport is not None  # the request is still being served
            request.transport.abort()
            return web.Response(status=500)  # never reaches the client: the connection is gone
        if how == "429":
            call.status = 429
            body = {"message": "You are being rate limited.", "retry_after": 0.05, "global": False}
            # discord.py treats a 429 without `Via` as a Cloudflare ban, so send what Discord sends.
            headers = {
                "Via": "1.1 google",
                "Retry-After": "1",
                "X-RateLimit-Limit": "5",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset-After": "0.05",
                "X-RateLimit-Bucket": "fake-bucket",
                "X-RateLimit-Scope": "user",
            }
            resp = json_response(body, 429)
            resp.headers.update(headers)
            return resp
        call.status = int(how)
        return json_response({"message": "Internal Server Error", "code": 0}, int(how))

    _ROUTES: ClassVar[list[tuple[str, str, str]]] = [
        ("GET", r"/users/@me", "_get_me"),
        ("GET", r"/(?:oauth2/)?applications/@me", "_get_application"),
        ("GET", r"/gateway(?:/bot)?", "_get_gateway"),
        ("POST", r"/channels/(?P<cid>\d+)/messages", "_post_message"),
        ("GET", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "_get_message"),
        ("DELETE", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "_delete_message"),
        ("PATCH", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", "_patch_message"),
        ("POST", r"/channels/(?P<cid>\d+)/typing", "_typing"),
        ("GET", r"/channels/(?P<cid>\d+)", "_get_channel"),
        ("POST", r"/users/@me/channels", "_create_dm"),
        ("GET", r"/guilds/(?P<gid>\d+)/members/(?P<uid>\d+)", "_get_member"),
        ("GET", r"/guilds/(?P<gid>\d+)/roles", "_get_roles"),
        ("PUT", r"/applications/(?P<app>\d+)(?:/guilds/(?P<gid>\d+))?/commands", "_put_commands"),
        ("GET", r"/applications/(?P<app>\d+)(?:/guilds/(?P<gid>\d+))?/commands", "_get_commands"),
        ("POST", r"/interactions/(?P<iid>\d+)/(?P<tok>[^/]+)/callback", "_callback"),
        ("POST", r"/webhooks/(?P<app>\d+)/(?P<tok>[^/]+)", "_followup"),
        (
            "PATCH",
            r"/webhooks/(?P<app>\d+)/(?P<tok>[^/]+)/messages/(?P<mid>@original|\d+)",
            "_edit_webhook_message",
        ),
        (
            "GET",
            r"/webhooks/(?P<app>\d+)/(?P<tok>[^/]+)/messages/(?P<mid>@original|\d+)",
            "_get_webhook_message",
        ),
    ]

    async def _route(self, method: str, path: str, call: Call) -> web.Response:
        for m, pattern, handler in self._ROUTES:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                return await getattr(self, handler)(call, **match.groupdict())
        return json_response({"message": "404: Not Found", "code": 0}, 404)

    async def _get_me(self, call: Call) -> web.Response:
        return json_response({**self.bot, "verified": True, "mfa_enabled": False, "flags": 0})

    async def _get_application(self, call: Call) -> web.Response:
        return json_response(
            {
                "id": self.application_id,
                "name": "chatbot",
                "description": "",
                "icon": None,
                "rpc_origins": [],
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": self.owner,
                "summary": "",
                "verify_key": "0" * 64,
                "team": None,
                "flags": 0,
                "bot": self.bot,
                "interactions_endpoint_url": None,
            }
        )

    async def _get_gateway(self, call: Call) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return json_response({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    def _too_long(self, body: dict | None) -> web.Response | None:
        content = (body or {}).get("content") or ""
        if len(content) > MAX_CONTENT:
            return json_response(
                {
                    "message": "Invalid Form Body",
                    "code": 50035,
                    "errors": {
                        "content": {
                            "_errors": [
                                {
                                    "code": "BASE_TYPE_MAX_LENGTH",
                                    "message": "Must be 2000 or fewer in length.",
                                }
                            ]
                        }
                    },
                },
                400,
            )
        return None

    def _bot_message(
        self, channel_id: str, body: dict, files: list[tuple[str, bytes]], flags: int = 0
    ) -> dict:
        channel = self.channels.get(channel_id) or {"id": channel_id}
        reply_to = None
        ref = body.get("message_reference")
        if ref:
            reply_to = self.messages.get(str(ref["message_id"]))
        msg = self.message_payload(channel, self.bot, body.get("content") or "", reply_to=reply_to)
        msg["flags"] = int(body.get("flags") or 0) | flags
        msg["embeds"] = body.get("embeds") or []
        msg["components"] = body.get("components") or []
        msg["attachments"] = [
            {
                "id": self.snowflake(),
                "filename": name,
                "size": len(data),
                "url": f"http://127.0.0.1:{self.port}/attachments/{name}",
                "proxy_url": f"http://127.0.0.1:{self.port}/attachments/{name}",
                "content_type": "image/png" if name.endswith(".png") else "application/octet-stream",
            }
            for name, data in files
        ]
        if body.get("nonce") is not None:
            msg["nonce"] = body["nonce"]
        return msg

    async def _post_message(self, call: Call, cid: str) -> web.Response:
        body = call.json or {}
        if cid not in self.channels:
            return json_response({"message": "Unknown Channel", "code": 10003}, 404)
        if (bad := self._too_long(body)) is not None:
            return bad
        if not body.get("content") and not call.files and not body.get("embeds"):
            return json_response({"message": "Cannot send an empty message", "code": 50006}, 400)
        nonce_key = (cid, str(body.get("nonce")))
        if body.get("enforce_nonce") and nonce_key in self._nonces:
            return json_response(self._nonces[nonce_key])  # Discord answers the first message again
        msg = self._bot_message(cid, body, call.files)
        if body.get("nonce") is not None:
            self._nonces[nonce_key] = msg
        return json_response(msg)

    async def _get_message(self, call: Call, cid: str, mid: str) -> web.Response:
        msg = self.messages.get(mid)
        if msg is None or msg["channel_id"] != cid:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        return json_response(msg)

    async def _patch_message(self, call: Call, cid: str, mid: str) -> web.Response:
        msg = self.messages.get(mid)
        if msg is None or msg["channel_id"] != cid:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        if (bad := self._too_long(call.json)) is not None:
            return bad
        if "content" in (call.json or {}):
            msg["content"] = call.json["content"]
            msg["edited_timestamp"] = _now()
        return json_response(msg)

    async def _delete_message(self, call: Call, cid: str, mid: str) -> web.Response:
        msg = self.messages.get(mid)
        if msg is None or msg["channel_id"] != cid or msg.get("deleted"):
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        msg["deleted"] = True
        return web.Response(status=204)

    async def _typing(self, call: Call, cid: str) -> web.Response:
        return web.Response(status=204)

    async def _get_channel(self, call: Call, cid: str) -> web.Response:
        if cid not in self.channels:
            return json_response({"message": "Unknown Channel", "code": 10003}, 404)
        return json_response(self.channels[cid])

    async def _create_dm(self, call: Call) -> web.Response:
        uid = str((call.json or {}).get("recipient_id"))
        for channel in self.channels.values():
            if channel["type"] == 1 and channel["recipients"][0]["id"] == uid:
                return json_response(channel)
        return json_response({"message": "Unknown User", "code": 10013}, 404)

    async def _get_member(self, call: Call, gid: str, uid: str) -> web.Response:
        member = self.members.get((gid, uid))
        if member is None:
            return json_response({"message": "Unknown Member", "code": 10007}, 404)
        return json_response(member)

    async def _get_roles(self, call: Call, gid: str) -> web.Response:
        return json_response(self.guilds[gid]["roles"])

    async def _put_commands(self, call: Call, app: str, gid: str | None) -> web.Response:
        if app != self.application_id:
            return json_response({"message": "Unknown Application", "code": 10002}, 404)
        stored = []
        for body in call.json or []:
            name = body.get("name", "")
            if not re.fullmatch(r"[-_\w]{1,32}", name) or name != name.lower():
                return json_response({"message": "Invalid Form Body", "code": 50035}, 400)
            if not 1 <= len(body.get("description", "")) <= 100:
                return json_response({"message": "Invalid Form Body", "code": 50035}, 400)
            command = {
                "id": self.snowflake(),
                "application_id": self.application_id,
                "version": self.snowflake(),
                "type": 1,
                "options": [],
                "default_member_permissions": None,
                "nsfw": False,
                **body,
            }
            if command["default_member_permissions"] is not None:  # Discord answers a string
                command["default_member_permissions"] = str(command["default_member_permissions"])
            if gid:
                command["guild_id"] = gid
            stored.append(command)
        self.commands[gid] = stored
        return json_response(stored)

    async def _get_commands(self, call: Call, app: str, gid: str | None) -> web.Response:
        return json_response(self.commands.get(gid, []))

    async def _callback(self, call: Call, iid: str, tok: str) -> web.Response:
        interaction = self.interactions.get(iid)
        if interaction is None or interaction["payload"]["token"] != tok:
            return json_response({"message": "Unknown interaction", "code": 10062}, 404)
        if interaction["responses"]:
            return json_response(
                {"message": "Interaction has already been acknowledged.", "code": 40060}, 400
            )
        body = call.json or {}
        kind, data = body.get("type"), body.get("data") or {}
        if (bad := self._too_long(data)) is not None:
            return bad
        payload = interaction["payload"]
        result: dict[str, Any] = {"interaction": {"id": iid, "type": payload["type"]}}
        if kind == CHANNEL_MESSAGE:
            msg = self._bot_message(payload["channel_id"], data, call.files)
            msg["interaction_metadata"] = {"id": iid, "type": payload["type"], "user": self._invoker(payload)}
            interaction["original"] = msg
            result["interaction"].update(
                response_message_id=msg["id"],
                response_message_loading=False,
                response_message_ephemeral=bool(msg["flags"] & EPHEMERAL),
            )
            result["resource"] = {"type": kind, "message": msg}
        elif kind == DEFERRED_CHANNEL_MESSAGE:
            msg = self._bot_message(payload["channel_id"], {"content": "", "flags": data.get("flags", 0)}, [])
            msg["flags"] |= 1 << 7  # LOADING
            interaction["original"] = msg
            result["interaction"].update(
                response_message_id=msg["id"],
                response_message_loading=True,
                response_message_ephemeral=bool(msg["flags"] & EPHEMERAL),
            )
        elif kind in (UPDATE_MESSAGE, DEFERRED_UPDATE_MESSAGE):
            target = self.messages[payload["message"]["id"]]
            interaction["original"] = target
            if kind == UPDATE_MESSAGE:
                for key in ("content", "components", "embeds"):
                    if key in data:
                        target[key] = data[key]
            result["resource"] = {"type": kind, "message": target}
        else:
            return json_response({"message": f"unsupported callback type {kind}", "code": 50035}, 400)
        interaction["responses"].append(call)
        return json_response(result)

    @staticmethod
    def _invoker(payload: dict) -> dict:
        return payload["member"]["user"] if "member" in payload else payload["user"]

    def _interaction_by_token(self, app: str, tok: str) -> dict | None:
        if app != self.application_id:
            return None
        return next((i for i in self.interactions.values() if i["payload"]["token"] == tok), None)

    async def _followup(self, call: Call, app: str, tok: str) -> web.Response:
        interaction = self._interaction_by_token(app, tok)
        if interaction is None or not interaction["responses"]:
            return json_response({"message": "Unknown Webhook", "code": 10015}, 404)
        if (bad := self._too_long(call.json)) is not None:
            return bad
        msg = self._bot_message(interaction["payload"]["channel_id"], call.json or {}, call.files)
        interaction.setdefault("followups", []).append(msg)
        return json_response(msg)

    async def _edit_webhook_message(self, call: Call, app: str, tok: str, mid: str) -> web.Response:
        interaction = self._interaction_by_token(app, tok)
        if interaction is None or "original" not in interaction:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        if (bad := self._too_long(call.json)) is not None:
            return bad
        msg = interaction["original"] if mid == "@original" else self.messages[mid]
        body = call.json or {}
        for key in ("content", "components", "embeds"):
            if key in body:
                msg[key] = body[key]
        msg["flags"] &= ~(1 << 7)
        if call.files:
            msg["attachments"] = self._bot_message(msg["channel_id"], {}, call.files)["attachments"]
        interaction.setdefault("edits", []).append(call)
        return json_response(msg)

    async def _get_webhook_message(self, call: Call, app: str, tok: str, mid: str) -> web.Response:
        interaction = self._interaction_by_token(app, tok)
        if interaction is None or "original" not in interaction:
            return json_response({"message": "Unknown Message", "code": 10008}, 404)
        return json_response(interaction["original"] if mid == "@original" else self.messages[mid])

    # ---- waiting and asserting -------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until `predicate()` is truthy (re-checked on every call/frame); return its value."""

        async def until() -> Any:
            async with self._changed:
                while not (value := predicate()):
                    await self._changed.wait()
                return value

        async with asyncio.timeout(timeout):  # not wait_for: it can swallow cancellation on 3.11
            return await until()

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
