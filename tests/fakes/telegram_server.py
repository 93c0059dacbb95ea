"""An in-process fake of the Telegram Bot API (aiohttp.web on 127.0.0.1) for tests.

python-telegram-bot talks to it over real HTTP through `ApplicationBuilder().base_url(fake.base_url)`.
It keeps a small world (users, chats, messages, member roles), answers the methods the bot
uses the way the real server does (same envelopes, same error texts, entities parsed and
text length checked after parsing), delivers injected updates by long polling (a waiting
`getUpdates` wakes as soon as an update is injected; updates stay pending until a later
`getUpdates` confirms them with `offset`, as on the real server) or by webhook, injects
faults, and records every call.

    async with FakeTelegram() as tg:
        alice = tg.user(1, "Alice")
        tg.send(tg.private_chat(alice), alice, "hello")
        msg = await tg.wait_for_message(alice["id"])
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aiohttp import web

from tests.fakes.telegram_errors import ApiError, bad
from tests.fakes.telegram_markup import (
    detect_entities,
    parse_html,
    parse_markdown,
    parse_markdown_v2,
    plain_text,
)
from tests.fakes.telegram_methods import MAX_CAPTION, MAX_TEXT, MAX_UPLOAD, ChatMethods
from tests.fakes.telegram_updates import UpdateMethods
from tests.fakes.telegram_world import TOKEN, Call, Document, Fault, TelegramWorld

# The names tests import from here, wherever they live now.
__all__ = [
    "MAX_CAPTION",
    "MAX_TEXT",
    "MAX_UPLOAD",
    "TOKEN",
    "ApiError",
    "Call",
    "Document",
    "FakeTelegram",
    "Fault",
    "TelegramWorld",
    "Upload",
    "bad",
    "detect_entities",
    "parse_html",
    "parse_markdown",
    "parse_markdown_v2",
    "plain_text",
]

# Fields PTB sends as JSON strings inside form data.
_JSON_FIELDS = {
    "reply_markup",
    "commands",
    "scope",
    "entities",
    "caption_entities",
    "allowed_updates",
    "reply_parameters",
    "link_preview_options",
    "media",
    "results",
}
_INT_FIELDS = {"chat_id", "message_id", "user_id", "offset", "limit", "timeout", "cache_time"}


class FakeTelegram(UpdateMethods, ChatMethods):
    """The fake Bot API server: a world of users and chats, updates to deliver, and a call log."""

    # --- lifecycle

    @property
    def base_url(self) -> str:
        """What to give PTB's `base_url` (the token is appended by PTB)."""
        return f"http://127.0.0.1:{self.port}/bot"

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_get("/file/bot{token}/{path:.*}", self.files.download)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the port the system chose for port 0
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._webhook_task:
            self._webhook_task.cancel()
        async with self._changed:
            self._poll_generation += 1  # release any waiting long poll
            self._changed.notify_all()
        if self._runner:
            await self._runner.cleanup()

    # --- HTTP

    async def _dispatch(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = Call(method, {})
        self.calls.append(call)
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            call.params, call.files = await _read_params(request)
            fault = self._take_fault(method)
            if fault:
                raise fault
            handler = getattr(self, "_m_" + method, None)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            result = await handler(call.params, call.files)
            return web.json_response({"ok": True, "result": result})
        except ApiError as e:
            call.status = e.code
            return _error(e)
        finally:
            async with self._changed:
                self._changed.notify_all()


def _error(e: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": e.code, "description": e.description}
    if e.parameters:
        body["parameters"] = e.parameters
    return web.json_response(body, status=e.code)


class Upload(bytes):
    """An uploaded file's bytes, with the file name the client gave."""

    filename: str = ""


async def _read_params(request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Parameters from the query, a JSON body, a form or a multipart body, typed like the server does."""
    raw: dict[str, Any] = dict(request.query)
    files: dict[str, bytes] = {}
    ctype = request.content_type
    if ctype == "application/json":
        body = await request.read()
        if body:
            raw.update(json.loads(body))
    elif ctype == "multipart/form-data":
        reader = await request.multipart()
        async for part in reader:
            if part.filename is not None:
                upload = Upload(await part.read())
                upload.filename = part.filename
                files[part.name] = upload
            else:
                raw[part.name] = await part.text()
    elif request.can_read_body:
        raw.update(await request.post())
    params: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, str) and key in _JSON_FIELDS:
            try:
                value = json.loads(value)
            except ValueError:
                raise bad(f"can't parse {key} JSON object") from None
        elif isinstance(value, str) and key in _INT_FIELDS:
            with contextlib.suppress(ValueError):
                value = int(value)
        params[key] = value
    return params, files
