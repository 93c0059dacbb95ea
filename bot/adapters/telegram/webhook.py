"""Telegram's webhook mode: an aiohttp server that takes updates into PTB's update queue.

Telegram signs each call with a secret derived from the bot token (never configured, so it
cannot leak from a config file); calls without it are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from telegram import Update
from telegram.ext import Application

from bot.config import Settings

log = logging.getLogger(__name__)
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]


def webhook_secret(token: str) -> str:
    """The secret Telegram sends with each webhook call: derived from the token, never configured."""
    return hashlib.sha256(b"webhook:" + token.encode()).hexdigest()[:48]


@contextlib.asynccontextmanager
async def webhook_server(app: Application, settings: Settings, host: str, port: int) -> AsyncIterator[int]:
    """An aiohttp server receiving Telegram's webhook calls (checked by secret) into the update queue;
    yields the port it listens on (port 0 binds a free one)."""
    from aiohttp import web

    url = settings.telegram.webhook_url or ""
    secret = webhook_secret(settings.telegram.token or "")

    async def receive(request: web.Request) -> web.Response:
        if request.headers.get("X-Telegram-Bot-Api-Secret-Token") != secret:
            return web.Response(status=403)
        try:
            update = Update.de_json(await request.json(), app.bot)
        except Exception:  # malformed body: Telegram would not send one; refuse it
            log.warning("refused a malformed webhook body")
            return web.Response(status=400)
        await app.update_queue.put(update)
        return web.Response(text="ok")

    web_app = web.Application()
    web_app.router.add_post(urlsplit(url).path or "/", receive)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = int(runner.addresses[0][1])
    try:
        await app.bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
        log.info(
            "Telegram bot @%s receiving updates at %s (listening on port %d)", app.bot.username, url, bound
        )
        yield bound
    finally:
        await runner.cleanup()
