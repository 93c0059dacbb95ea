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

import json
from collections.abc import Callable

from aiohttp import web

from tests.fakes.discord_gateway import GatewayEvents
from tests.fakes.discord_routes import RestRoutes, json_response
from tests.fakes.discord_world import (
    ADMINISTRATOR,
    ALL_PERMISSIONS,
    CHANNEL_MESSAGE,
    DEFERRED_CHANNEL_MESSAGE,
    DEFERRED_UPDATE_MESSAGE,
    EPHEMERAL,
    EVERYONE_PERMISSIONS,
    MANAGE_GUILD,
    MAX_CONTENT,
    MESSAGE_CONTENT_INTENT,
    UPDATE_MESSAGE,
    Call,
    Connection,
    DiscordWorld,
)

# The names tests import from here, wherever they live now.
__all__ = [
    "ADMINISTRATOR",
    "ALL_PERMISSIONS",
    "CHANNEL_MESSAGE",
    "DEFERRED_CHANNEL_MESSAGE",
    "DEFERRED_UPDATE_MESSAGE",
    "EPHEMERAL",
    "EVERYONE_PERMISSIONS",
    "MANAGE_GUILD",
    "MAX_CONTENT",
    "MESSAGE_CONTENT_INTENT",
    "UPDATE_MESSAGE",
    "Call",
    "Connection",
    "DiscordWorld",
    "FakeDiscord",
    "json_response",
]


class FakeDiscord(GatewayEvents, RestRoutes):
    """The fake Discord server; use `async with FakeDiscord() as fake:`."""

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
