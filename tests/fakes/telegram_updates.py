"""The fake Bot API's methods that deliver updates: getUpdates, webhooks, and the bot's session."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tests.fakes.telegram_errors import ApiError, bad
from tests.fakes.telegram_world import Call, TelegramWorld


class UpdateMethods(TelegramWorld):
    """getMe, logOut, close, getUpdates, the webhook methods, and the webhook delivery loop."""

    async def _m_getMe(self, params: dict, files: dict) -> dict:
        return self.bot_user

    async def _m_logOut(self, params: dict, files: dict) -> bool:
        return True

    async def _m_close(self, params: dict, files: dict) -> bool:
        return True

    async def _m_getUpdates(self, params: dict, files: dict) -> list[dict]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active;"
                " use deleteWebhook to delete the webhook first",
            )
        offset = params.get("offset") or 0
        limit = min(max(params.get("limit") or 100, 1), 100)
        timeout = max(float(params.get("timeout") or 0), 0.0)
        if params.get("allowed_updates") is not None:
            self.allowed_updates = params["allowed_updates"]  # remembered, as on the real server
        allowed = self.allowed_updates
        # A newer getUpdates ends an older one still waiting, as on the real server.
        async with self._changed:
            self._poll_generation += 1
            generation = self._poll_generation
            self._changed.notify_all()
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]

        def ready() -> list[dict]:
            if allowed:  # kinds the bot did not ask for are never delivered
                self._updates = [u for u in self._updates if any(k in u for k in allowed)]
            return self._updates[:limit]

        deadline = time.monotonic() + timeout
        async with self._changed:
            while not (batch := ready()):
                if generation != self._poll_generation:
                    raise ApiError(
                        409,
                        "Conflict: terminated by other getUpdates request;"
                        " make sure that only one bot instance is running",
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                try:
                    async with asyncio.timeout(left):
                        await self._changed.wait()
                except TimeoutError:
                    return []
        return batch

    async def _m_deleteWebhook(self, params: dict, files: dict) -> bool:
        self.webhook_url = ""
        self.webhook_secret = None
        if params.get("drop_pending_updates") in (True, "true", "True"):
            self._updates.clear()
        return True

    async def _m_setWebhook(self, params: dict, files: dict) -> bool:
        url = params.get("url") or ""
        if url and not url.startswith(("https://", "http://127.0.0.1")):
            raise bad("bad webhook: An HTTPS URL must be provided for webhook")
        self.webhook_url = url
        self.webhook_secret = params.get("secret_token")
        if params.get("drop_pending_updates") in (True, "true", "True"):
            self._updates.clear()
        if url and self._webhook_task is None:
            self._webhook_task = asyncio.get_running_loop().create_task(self._deliver_webhooks())
        self._webhook_wake.set()
        return True

    async def _m_getWebhookInfo(self, params: dict, files: dict) -> dict:
        return {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._updates),
        }

    # --- webhook delivery

    async def _deliver_webhooks(self) -> None:
        """POST pending updates to the webhook, one at a time, retrying like Telegram does."""
        async with aiohttp.ClientSession() as session:
            while True:
                await self._webhook_wake.wait()
                self._webhook_wake.clear()
                while self.webhook_url and self._updates:
                    update = self._updates[0]
                    headers = (
                        {"X-Telegram-Bot-Api-Secret-Token": self.webhook_secret}
                        if self.webhook_secret
                        else {}
                    )
                    try:
                        async with session.post(self.webhook_url, json=update, headers=headers) as resp:
                            delivered = resp.status == 200
                    except aiohttp.ClientError:
                        delivered = False
                    self.calls.append(
                        Call("webhook", {"update_id": update["update_id"]}, status=200 if delivered else 502)
                    )
                    if delivered:
                        self._updates.pop(0)
                        self._notify()
                    else:
                        # The real server retries later; tests get a prompt retry.
                        try:
                            async with asyncio.timeout(0.2):
                                await self._webhook_wake.wait()
                        except TimeoutError:
                            pass
                        self._webhook_wake.clear()
