"""The reminder and dispatch routes of the memory API, typed, over the one memory client."""

from __future__ import annotations

from typing import Any, TypedDict, cast
from urllib.parse import quote

from bot.router.memory import MemoryClient, MemoryRefused


class Reminder(TypedDict):
    """A reminder as the memory worker keeps it (memory_engine.reminders.Reminder)."""

    id: int
    author: str
    author_id: str
    text: str
    due_at: int
    tz: str
    every: dict[str, Any] | None
    created_at: str
    state: str
    sent_count: int
    last_sent_at: int | None
    last_late: int


class DispatchItem(TypedDict):
    """One due occurrence leased from the dispatch queue (a pointer into its chat)."""

    key: str
    chat_key: str
    reminder_id: int
    due_at: int
    attempts: int


_ITEM_ANSWERS = frozenset({403, 404})  # about the reminder itself: no reason to retry


def _chat(chat: str) -> str:
    # Every character quoted, "." too: a key never becomes a path trick.
    return "/v1/chats/" + quote(chat, safe="").replace(".", "%2E")


class ReminderApi:
    """`/v1/chats/{chat}/reminders...`, `/timezone`, `/delivered` and `/v1/dispatch/...`."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    async def add(self, chat: str, body: dict[str, Any]) -> Reminder:
        """Keep a reminder (`text`, `due_at` ms UTC, `author`, `author_id`, `tz`, `every`)."""
        data = await self.client.request("POST", _chat(chat) + "/reminders", json=body)
        return cast(Reminder, data["reminder"])

    async def pending(self, chat: str, author_id: str | None = None) -> list[Reminder]:
        """The chat's pending reminders, soonest first."""
        params = {"author_id": author_id} if author_id else None
        data = await self.client.request("GET", _chat(chat) + "/reminders", params=params)
        return cast(list[Reminder], data["reminders"])

    async def get(self, chat: str, reminder_id: int) -> Reminder | None:
        """One reminder, None when it is gone (cancelled, forgotten)."""
        try:
            data = await self.client.request(
                "GET", _chat(chat) + f"/reminders/{int(reminder_id)}", refusals=_ITEM_ANSWERS
            )
        except MemoryRefused as err:
            if err.status == 404:
                return None
            raise
        return cast(Reminder, data["reminder"])

    async def cancel(self, chat: str, reminder_id: int, author_id: str | None) -> Reminder:
        """Cancel one (only `author_id`'s when given): MemoryRefused 404 / 403 otherwise."""
        params = {"author_id": author_id} if author_id is not None else None
        data = await self.client.request(
            "DELETE", _chat(chat) + f"/reminders/{int(reminder_id)}", params=params, refusals=_ITEM_ANSWERS
        )
        return cast(Reminder, data["cancelled"])

    async def set_timezone(self, chat: str, author: str, author_id: str, timezone: str) -> None:
        """Keep the person's time zone as their fact `timezone`."""
        body = {"timezone": timezone, "author": author, "author_id": author_id}
        await self.client.request("PUT", _chat(chat) + "/timezone", json=body)

    async def delivered(
        self, chat: str, reminder_id: int, due_at: int, sent_at: int, late: bool, next_due_at: int | None
    ) -> bool:
        """Record one occurrence as sent (idempotent); True when this call recorded it."""
        body = {
            "reminder_id": reminder_id,
            "due_at": due_at,
            "sent_at": sent_at,
            "late": late,
            "next_due_at": next_due_at,
        }
        data = await self.client.request("POST", _chat(chat) + "/delivered", json=body)
        return bool(data.get("recorded"))

    async def lease(self, owner: str, prefixes: list[str], limit: int, lease_ms: int) -> list[DispatchItem]:
        """Lease due occurrences of chats with one of `prefixes` (telegram:, discord:, console:)."""
        body = {"owner": owner, "prefixes": prefixes, "limit": limit, "lease_ms": lease_ms}
        data = await self.client.request("POST", "/v1/dispatch/lease", json=body)
        return cast(list[DispatchItem], data["items"])

    async def ack(self, keys: list[str]) -> int:
        """Mark occurrences done in the dispatch queue."""
        data = await self.client.request("POST", "/v1/dispatch/ack", json={"keys": keys})
        return int(data["acked"])

    async def release(self, key: str, owner: str, retry_at: int) -> None:
        """Give a lease back after a failed send: retried from `retry_at`."""
        body = {"key": key, "owner": owner, "retry_at": retry_at}
        await self.client.request("POST", "/v1/dispatch/release", json=body)
