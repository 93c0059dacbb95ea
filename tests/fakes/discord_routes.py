"""The fake Discord's REST routes: messages, channels, members, commands and interaction answers."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from aiohttp import web

from tests.fakes.discord_world import (
    CHANNEL_MESSAGE,
    DEFERRED_CHANNEL_MESSAGE,
    DEFERRED_UPDATE_MESSAGE,
    EPHEMERAL,
    MAX_CONTENT,
    UPDATE_MESSAGE,
    Call,
    DiscordWorld,
    iso_now,
)


def json_response(data: Any, status: int = 200) -> web.Response:
    """A JSON answer whose content-type is exactly `application/json` (what discord.py checks)."""
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"}
    )


class RestRoutes(DiscordWorld):
    """The REST routes discord.py calls under /api/v10, each to its handler."""

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
            msg["edited_timestamp"] = iso_now()
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
