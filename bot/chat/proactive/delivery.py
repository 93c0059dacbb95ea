"""Delivering due reminders exactly once: the bot's side of the hand-over.

The memory worker's chats hand their due reminders to one dispatch queue; the `Courier`
leases from it (one request every `poll_s`, never one per chat), reads each reminder from
its chat, sends it through the platform, and records the send. The order makes what the
user sees exactly once:

1. lease (a crash before the send: the lease is taken back by the restarted bot, which
   holds the same owner id, or runs out for anyone else; nothing was sent, it is sent then);
2. read the reminder in its chat (cancelled or forgotten since: acked, not sent; its
   occurrence already recorded as sent: acked, not sent again);
3. send, retried by the adapter within its budget; a failure gives the lease back, to be
   tried again after `retry_s` (the reminder is kept, never dropped);
4. write the send to a local journal (fsynced sqlite) at once, then record it in the chat
   (`delivered`, idempotent per occurrence) and ack the lease. A crash after the send finds
   the journal entry at restart and finishes 4 without sending again.

The one window left is a send in flight at the crash: the platform took the message but the
answer never came back (one HTTP round trip). Discord closes it (the occurrence's own nonce,
`enforce_nonce`: a repeat is kept once), so Discord chats are delivered in parallel; the
Telegram Bot API has no idempotency key, so Telegram reminders go one at a time, and a SIGKILL
can double at most the one in flight. A reminder sent more than `late_after_s` after its
time says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bot.chat import limits as caps
from bot.chat.memory.client import MemoryClient, MemoryRefused, MemoryUnavailable
from bot.chat.proactive.followups import followup_text, is_followup
from bot.chat.proactive.reminder_routes import DispatchItem, Reminder, ReminderApi
from bot.chat.proactive.when import every_of, format_when, next_occurrence
from bot.chat.types import ReminderSend
from bot.config import LimitSettings, ReminderSettings

log = logging.getLogger(__name__)

Send = ReminderSend  # (chat key, text, occurrence key): raises if not sent
LEASE_BATCH = 20


def _utcnow() -> datetime:
    return datetime.now(UTC)


def reminder_text(r: Reminder, late_by_s: float, late_after_s: float) -> str:
    """What the chat reads: whose reminder, its words, and when it is late, that it is."""
    if is_followup(every_of(r)):  # a check-in is asked when it is asked: never "late"
        return followup_text(r)
    who = f" for {r['author']}" if r.get("author") else ""
    text = f"⏰ Reminder{who}: {r['text']}"
    if late_by_s > late_after_s:
        due = datetime.fromtimestamp(r["due_at"] / 1000, UTC)
        text += f"\n(late: it was due {format_when(due, r['tz'])})"
    return text


@dataclass(frozen=True)
class Sent:
    """One send in the journal: done on the platform, maybe not yet recorded in memory."""

    key: str
    chat_key: str
    reminder_id: int
    due_at: int
    sent_at: int
    late: bool
    next_due_at: int | None


def _sent(row: tuple) -> Sent:
    key, chat_key, reminder_id, due_at, sent_at, late, next_due_at = row
    return Sent(key, chat_key, int(reminder_id), int(due_at), int(sent_at), bool(late), next_due_at)


class Journal:
    """The bot's record of sends not yet recorded in memory, and its owner id (one file per platform)."""

    def __init__(self, path: Path, platform: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")  # a send in the journal survives a power cut
        self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, chat_key TEXT, reminder_id INTEGER, "
            "due_at INTEGER, sent_at INTEGER, late INTEGER, next_due_at INTEGER)"
        )
        row = self.db.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('owner', ?)", (f"{platform}:{uuid.uuid4().hex[:12]}",))
            row = self.db.execute("SELECT value FROM meta WHERE key = 'owner'").fetchone()
        self.owner = str(row[0])

    def record(self, s: Sent) -> None:
        """Write one send (before anything else is awaited)."""
        self.db.execute(
            "INSERT OR REPLACE INTO sent VALUES (?, ?, ?, ?, ?, ?, ?)",
            (s.key, s.chat_key, s.reminder_id, s.due_at, s.sent_at, int(s.late), s.next_due_at),
        )

    def find(self, key: str) -> Sent | None:
        """The journal entry of one occurrence, if it was sent."""
        row = self.db.execute("SELECT * FROM sent WHERE key = ?", (key,)).fetchone()
        return None if row is None else _sent(row)

    def unrecorded(self) -> list[Sent]:
        """Every send not yet recorded in memory."""
        return [_sent(r) for r in self.db.execute("SELECT * FROM sent")]

    def remove(self, key: str) -> None:
        """Forget one send once memory has it."""
        self.db.execute("DELETE FROM sent WHERE key = ?", (key,))

    def close(self) -> None:
        """Close the file."""
        self.db.close()


class Courier:
    """Leases due reminders of one platform's chats and delivers each exactly once."""

    def __init__(
        self,
        api: ReminderApi,
        send: Send,
        journal: Journal,
        *,
        prefixes: list[str],
        settings: ReminderSettings | None = None,
        clock: Callable[[], datetime] = _utcnow,
        parallel: bool = False,
        limits: LimitSettings | None = None,
    ) -> None:
        self.api = api
        self.limits = limits  # a follow-up waits while its person or chat is over a daily cap
        self.send = send
        self.journal = journal
        self.prefixes = prefixes
        self.settings = settings or ReminderSettings()
        self.clock = clock
        # Chats in parallel only where the platform dedups a repeated send (Discord's nonce):
        # a send in flight at a SIGKILL may arrive twice, so elsewhere one at a time.
        self.parallel = parallel
        self.delivered = 0  # sends this courier made (tests, benchmarks)
        self.last_leased = 0
        self.wake = asyncio.Event()

    def now_ms(self) -> int:
        """The clock in milliseconds."""
        return int(self.clock().timestamp() * 1000)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Deliver until `stop` is set or cancelled; the memory worker being down is waited out."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self.tick()
                if self.last_leased >= LEASE_BATCH:
                    continue  # a full batch: more may be waiting
            except MemoryUnavailable as err:
                log.warning("reminders: memory unavailable (%s); trying again", err)
            except Exception:
                log.exception("reminders: delivery round failed; trying again")
            self.wake.clear()
            if stop.is_set():  # stopped during the round: no poll interval to wait out
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_s):
                    await self.wake.wait()

    async def tick(self) -> int:
        """One round: finish journalled sends, lease what is due, deliver it; how many were sent."""
        for sent in self.journal.unrecorded():
            await self._record(sent)
        items = await self.api.lease(
            self.journal.owner, self.prefixes, LEASE_BATCH, int(self.settings.lease_s * 1000)
        )
        # Chats in parallel (a slow chat or platform retry holds up no other), each chat's
        # reminders in due order.
        by_chat: dict[str, list[DispatchItem]] = {}
        for item in items:
            by_chat.setdefault(item["chat_key"], []).append(item)

        async def one_chat(mine: list[DispatchItem]) -> None:
            for item in mine:
                await self.deliver(item)

        before, self.last_leased = self.delivered, len(items)
        if not self.parallel:
            by_chat = {"": items}
        outcomes = await asyncio.gather(*(one_chat(v) for v in by_chat.values()), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return self.delivered - before

    async def deliver(self, item: DispatchItem) -> None:
        """Send one leased occurrence unless it was sent, cancelled or forgotten."""
        done = self.journal.find(item["key"])
        if done is not None:  # sent before a crash: record it, never send again
            await self._record(done)
            return
        r = await self.api.get(item["chat_key"], item["reminder_id"])
        if r is None or r["state"] != "pending" or r["due_at"] != item["due_at"]:
            await self.api.ack([item["key"]])  # gone, or this occurrence is recorded as sent
            return
        now = self.now_ms()
        if is_followup(every_of(r)) and await self._capped(item, r):
            return
        late_by_s = (now - item["due_at"]) / 1000
        text = reminder_text(r, late_by_s, self.settings.late_after_s)
        try:
            await self.send(item["chat_key"], text, item["key"])
        except Exception as err:
            retry_at = now + int(self.settings.retry_s * 1000)
            log.warning("reminder %s not delivered (%s); kept, retried later", item["key"], err)
            with contextlib.suppress(MemoryUnavailable, MemoryRefused):
                await self.api.release(item["key"], self.journal.owner, retry_at)
            return
        sent = Sent(
            item["key"],
            item["chat_key"],
            item["reminder_id"],
            item["due_at"],
            self.now_ms(),
            late_by_s > self.settings.late_after_s,
            self._next_due(r),
        )
        self.journal.record(sent)  # first thing after the send: no await in between
        self.delivered += 1
        await self._record(sent)

    async def _capped(self, item: DispatchItem, r: Reminder) -> bool:
        """Over a daily cap a follow-up (an answer like any other) waits: released until the reset."""
        if self.limits is None or not caps.caps_of(self.limits):
            return False
        usage = await self.api.client.usage(item["chat_key"], r["author_id"] or None)
        # The check-in would be one more answer: counted as if its person had sent a message.
        hit = caps.check(
            self.limits, usage.get("today"), usage.get("today_author"), self.clock(), one_more=True
        )
        if hit is None:
            return False
        log.info("follow-up %s waits: cap %s reached", item["key"], hit.name)
        await self.api.release(item["key"], self.journal.owner, int(hit.resets_at.timestamp() * 1000))
        return True

    def _next_due(self, r: Reminder) -> int | None:
        every = every_of(r)
        if not every or is_followup(every):
            return None
        after = max(self.clock(), datetime.fromtimestamp(r["due_at"] / 1000, UTC))
        return int(next_occurrence(every, r["tz"], after).timestamp() * 1000)

    async def _record(self, s: Sent) -> None:
        """Record a journalled send in its chat and ack it; the journal keeps it until both landed."""
        try:
            await self.api.delivered(s.chat_key, s.reminder_id, s.due_at, s.sent_at, s.late, s.next_due_at)
        except MemoryRefused as err:  # the reminder is gone (forgotten): nothing left to record
            log.info("reminder %s: send not recorded (%s)", s.key, err.error)
        await self.api.ack([s.key])
        self.journal.remove(s.key)


class ReminderDesk:
    """The `ReminderDeliveries` of the service adapters see: a courier per platform, started and stopped."""

    def __init__(
        self,
        client: MemoryClient,
        data_dir: Path,
        settings: ReminderSettings,
        clock: Callable[[], datetime] | None = None,
        limits: LimitSettings | None = None,
    ) -> None:
        self.api = ReminderApi(client)
        self.limits = limits
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.clock = clock or _utcnow
        self._running: list[tuple[asyncio.Task[None], asyncio.Event, Journal]] = []
        self.couriers: list[Courier] = []  # the started ones (tests, /health-like checks)

    def courier(
        self, platform: str, send: Send, parallel: bool = False, prefix: str | None = None
    ) -> Courier:
        """A courier for the chats of `platform` (or those starting with `prefix`); its journal is
        DATA/reminders-PLATFORM.sqlite3."""
        journal = Journal(self.data_dir / f"reminders-{platform}.sqlite3", platform)
        return Courier(
            self.api,
            send,
            journal,
            prefixes=[prefix or f"{platform}:"],
            settings=self.settings,
            clock=self.clock,
            parallel=parallel,
            limits=self.limits,
        )

    def start(self, platform: str, send: Send, parallel: bool = False, prefix: str | None = None) -> Courier:
        """Start delivering the reminders of `platform`'s chats in the background (`parallel`:
        chats at once, for a platform that keeps one copy of a repeated send)."""
        courier = self.courier(platform, send, parallel, prefix)
        stop = asyncio.Event()
        task = asyncio.create_task(courier.run(stop), name=f"reminders-{platform}")
        self._running.append((task, stop, courier.journal))
        self.couriers.append(courier)
        return courier

    async def stop(self) -> None:
        """Stop every courier (a send in hand is finished first, within a few seconds)."""
        for _, stop, _ in self._running:
            stop.set()
        for courier in self.couriers:
            courier.wake.set()  # a courier between rounds stops now, not after its poll interval
        for task, _, journal in self._running:
            try:
                async with asyncio.timeout(10.0):
                    await task
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            journal.close()
        self._running.clear()
        self.couriers.clear()
