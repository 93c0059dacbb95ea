"""The fake Discord's gateway websocket (HELLO, IDENTIFY, RESUME) and the events tests inject on it."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.discord_world import (
    EVERYONE_PERMISSIONS,
    MESSAGE_CONTENT_INTENT,
    Connection,
    DiscordWorld,
    iso_now,
)


class GatewayEvents(DiscordWorld):
    """Injected MESSAGE_CREATE and INTERACTION_CREATE events, and the gateway protocol that carries them."""

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
            "timestamp": iso_now(),
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
