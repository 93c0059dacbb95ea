"""The reminder and dispatch routes of the memory API as typed calls over the one memory client."""

from __future__ import annotations

from bot.chat.memory.client import MemoryClient, MemoryRefused
from memory_engine.api import routes
from memory_engine.reminders import wire as w

Reminder = w.Reminder
DispatchItem = w.DispatchItem


class ReminderApi:
    """`/v1/chats/{chat}/reminders...`, `/timezone`, `/delivered` and `/v1/dispatch/...`."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    async def add(self, chat: str, body: w.ReminderRequest) -> Reminder:
        """Keep a reminder (`text`, `due_at` ms UTC, `author`, `author_id`, `tz`, `every`)."""
        return (await self.client.call(routes.ADD_REMINDER, chat, body=body))["reminder"]

    async def pending(self, chat: str, author_id: str | None = None) -> list[Reminder]:
        """The chat's pending reminders, soonest first."""
        return (await self.client.call(routes.REMINDERS, chat, query={"author_id": author_id}))["reminders"]

    async def get(self, chat: str, reminder_id: int) -> Reminder | None:
        """One reminder, None when it is gone (cancelled, forgotten)."""
        try:
            answer = await self.client.call(routes.REMINDER, chat, path={"reminder_id": int(reminder_id)})
        except MemoryRefused as err:
            if err.status == 404:
                return None
            raise
        return answer["reminder"]

    async def cancel(self, chat: str, reminder_id: int, author_id: str | None) -> Reminder:
        """Cancel one (only `author_id`'s when given): MemoryRefused 404 / 403 otherwise."""
        answer = await self.client.call(
            routes.CANCEL_REMINDER,
            chat,
            query={"author_id": author_id},
            path={"reminder_id": int(reminder_id)},
        )
        return answer["cancelled"]

    async def set_timezone(self, chat: str, author: str, author_id: str, timezone: str) -> None:
        """Keep the person's time zone as their fact `timezone`."""
        body: w.TimezoneRequest = {"timezone": timezone, "author": author, "author_id": author_id}
        await self.client.call(routes.SET_TIMEZONE, chat, body=body)

    async def set_followups(self, chat: str, author: str, author_id: str, on: bool) -> None:
        """Keep the person's opt-in to follow-ups in this chat as their fact `followups`."""
        body: w.FollowupsRequest = {"on": on, "author": author, "author_id": author_id}
        await self.client.call(routes.SET_FOLLOWUPS, chat, body=body)

    async def delivered(
        self, chat: str, reminder_id: int, due_at: int, sent_at: int, late: bool, next_due_at: int | None
    ) -> bool:
        """Record one occurrence as sent (idempotent); True when this call recorded it."""
        body: w.DeliveredRequest = {
            "reminder_id": reminder_id,
            "due_at": due_at,
            "sent_at": sent_at,
            "late": late,
            "next_due_at": next_due_at,
        }
        return bool((await self.client.call(routes.REMINDER_DELIVERED, chat, body=body))["recorded"])

    async def lease(self, owner: str, prefixes: list[str], limit: int, lease_ms: int) -> list[DispatchItem]:
        """Lease due occurrences of chats with one of `prefixes` (telegram:, discord:, console:)."""
        body: w.LeaseRequest = {"owner": owner, "prefixes": prefixes, "limit": limit, "lease_ms": lease_ms}
        return (await self.client.call(routes.DISPATCH_LEASE, body=body))["items"]

    async def ack(self, keys: list[str]) -> int:
        """Mark occurrences done in the dispatch queue."""
        body: w.AckRequest = {"keys": keys}
        return (await self.client.call(routes.DISPATCH_ACK, body=body))["acked"]

    async def release(self, key: str, owner: str, retry_at: int) -> None:
        """Give a lease back after a failed send: retried from `retry_at`."""
        body: w.ReleaseRequest = {"key": key, "owner": owner, "retry_at": retry_at}
        await self.client.call(routes.DISPATCH_RELEASE, body=body)

    async def state(self) -> w.QueueState:
        """The dispatch queue's counts: `{"open", "done"}`."""
        return await self.client.call(routes.DISPATCH_STATE)
