"""The local host's compaction alarms: the Durable Object's `alarm()`, for every chat of the host.

A write that leaves too much un-summarized history sets the chat's persisted alarm and
returns at once; `CompactionScheduler.run` compacts due chats in the background, a few at
a time, and retries failures with the engine's backoff. The summarizer's wait (a model) or
work (the offline one, see `offline.py`) happens off the event loop, so a chat's compaction
never stalls the turns of any chat.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_engine.backoff import BACKOFF_BASE_MS, BACKOFF_MAX_MS
from memory_worker.local.alarms import AlarmTable
from memory_worker.local.chats import ChatStore

if TYPE_CHECKING:  # the engine's modules are imported by the calls (the host loads them after it listens)
    from memory_engine.compaction.compact import Summarize
    from memory_engine.engine import ChatMemory

log = logging.getLogger("memory_worker.local")

MAX_ALARMS_IN_FLIGHT = 4
UNEXPECTED_FAILURE_RETRY_MS = 60_000
MAX_IDLE_S = 1.0
TABLE_RETRY_S = 5.0  # the alarm table could not be read: look again after this (or MAX_IDLE_S)
HANDOVER_RETRY_MS = 5_000  # a due reminder that could not be handed over is tried again soon


def now_ms() -> int:
    """Wall-clock time in milliseconds, the unit of alarm due times."""
    return int(time.time() * 1000)


class CompactionScheduler:
    """Runs due compaction alarms of every chat, at most `max_in_flight` at a time."""

    def __init__(
        self,
        store: ChatStore,
        alarms: AlarmTable,
        summarize: Summarize,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
        max_in_flight: int = MAX_ALARMS_IN_FLIGHT,
        clock: Callable[[], int] = now_ms,
    ):
        self.now_ms = clock  # the engine's clock: reminders' due times are on it
        self.store = store
        self.alarms = alarms
        self.summarize = summarize
        self.backoff = (backoff_base_ms, backoff_max_ms)
        self.max_in_flight = max_in_flight
        self._wake = asyncio.Event()
        self._running: set[str] = set()
        self._tasks: set[asyncio.Task] = set()
        self._held: dict[str, int] = {}  # chat -> ms: alarms that could not be rescheduled
        self._unsaved: dict[str, int] = {}  # chat -> ms: reminders' wakes the table could not take
        self._loop_task: asyncio.Task | None = None
        self._failing = False  # the loop's last look at the table failed with an unexpected error

    @property
    def running(self) -> int:
        """How many compactions are in flight."""
        return len(self._running)

    @property
    def held(self) -> dict[str, int]:
        """Chats held back until a time (ms) because their alarm could not be rescheduled."""
        return dict(self._held)

    def after_write(self, chat_key: str, memory: ChatMemory) -> None:
        """Set the chat's alarm when its un-summarized history calls for a compaction."""
        from memory_engine.compaction.compact import alarm_needed, backing_off

        if chat_key in self._running:
            # Its alarm is running: when it ends, it sets the next one from what is left then
            # (`on_alarm`), so a write meanwhile has nothing to add. While a compaction waited
            # on its summarizer, every turn wrote the alarm table for nothing (~0.15 ms).
            return
        try:
            if alarm_needed(memory) and not (self.alarms.has(chat_key) and backing_off(memory)):
                # keep_earlier: a later alarm may be a reminder's; one in backoff is left alone.
                self.alarms.set(chat_key, self.now_ms(), keep_earlier=True)
                self._wake.set()
        except (sqlite3.Error, OSError) as err:
            # The write is committed: a compaction that cannot be scheduled now is scheduled
            # by the chat's next write, so the answer stays 200.
            log.warning("could not schedule compaction: %s", err)

    def after_reminders(self, chat_key: str, memory: ChatMemory) -> None:
        """Wake the chat's alarm by its earliest reminder not handed over yet (never later than set)."""
        from memory_engine.reminders.store import next_alarm_ms

        due = next_alarm_ms(memory.sql)
        if due is None:
            return
        if chat_key in self._held:  # held back for its compaction: not past this reminder's time
            self._held[chat_key] = min(self._held[chat_key], due)
        try:
            self.alarms.set(chat_key, due, keep_earlier=True)
        except (sqlite3.Error, OSError) as err:
            # The reminder is committed: the answer stays 200 (a retry would store it twice).
            # Its wake waits here until the loop can write it (`_save_wakes`).
            log.warning("could not set a reminder's alarm chat=%s (kept until it can be): %s", chat_key, err)
            self._unsaved[chat_key] = min(due, self._unsaved.get(chat_key, due))
        self._wake.set()

    def _save_wakes(self) -> None:
        """Write the reminders' wakes the alarm table refused before (a full disk), when it takes them."""
        for chat_key, due in list(self._unsaved.items()):
            self.alarms.set(chat_key, due, keep_earlier=True)
            del self._unsaved[chat_key]

    def poke(self) -> None:
        """Look at the alarm table again now (an injected clock moved)."""
        self._wake.set()

    def forget(self, chat_key: str) -> None:
        """Drop the alarm of a chat that no longer exists."""
        self._unsaved.pop(chat_key, None)
        self._held.pop(chat_key, None)  # a new chat under the key must not wait out the old one's hold
        self.alarms.delete(chat_key)

    def start(self) -> None:
        """Start the alarm loop in the running event loop."""
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        """Cancel the alarm loop and every compaction in flight (their alarms stay pending)."""
        pending = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._loop_task = None

    async def run(self) -> None:
        """Run due compaction alarms until cancelled (a few chats at a time)."""
        while True:
            self._wake.clear()
            now = self.now_ms()
            self._held = {k: until for k, until in self._held.items() if until > now}
            busy = self._running | set(self._held)
            timeout: float | None = None  # all slots busy: a finishing alarm wakes us
            failing = False  # this look hit a bug
            if self._unsaved:
                try:
                    self._save_wakes()
                except (sqlite3.Error, OSError):
                    pass  # still refused: tried again at the next look (within MAX_IDLE_S); logged once
                except Exception:  # a bug must not end the loop; the due alarms below still run
                    failing = self._failed("could not save the reminders' wakes")
            try:
                free = self.max_in_flight - len(self._running)
                for chat_key in self.alarms.due(now, busy, free) if free > 0 else []:
                    self._running.add(chat_key)
                    task = asyncio.create_task(self._run_alarm(chat_key))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                if len(self._running) < self.max_in_flight:
                    nxt = self.alarms.next_due(busy | self._running)
                    timeout = None if nxt is None else max(0.0, (nxt - self.now_ms()) / 1000)
            except (sqlite3.Error, OSError) as err:  # the alarm table cannot be read: try again soon
                log.warning("alarm table unavailable: %s", err)
                timeout = TABLE_RETRY_S
            except Exception:  # a bug must not end the loop (no chat's alarm would ever run again)
                failing = self._failed("alarm loop failed")
                timeout = TABLE_RETRY_S
            self._failing = failing
            if self._held:
                until = (min(self._held.values()) - now) / 1000
                timeout = until if timeout is None else min(timeout, until)
            # Look again at least every MAX_IDLE_S: a due reminder is never slept past when the
            # wall clock jumps (suspend, NTP) or an injected clock moves (tests).
            timeout = MAX_IDLE_S if timeout is None else min(timeout, MAX_IDLE_S)
            if timeout == 0:
                continue
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the cancellation
            # that stops this loop, and the host's shutdown then waits for ever.
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _failed(self, what: str) -> bool:
        """Log a bug the loop met, with its traceback, once per spell (every look would repeat it)."""
        if not self._failing:
            log.exception(what)
        return True

    async def _hand_over(self, chat_key: str, memory: ChatMemory) -> int | None:
        """Hand the chat's due reminders to the dispatch object; None, or when to try again if it failed."""
        from memory_worker.local.handover import hand_over

        try:
            await hand_over(self.store, chat_key, memory, self.now_ms)
        except Exception:
            log.exception("reminder hand-over failed chat=%s", chat_key)
            return self.now_ms() + HANDOVER_RETRY_MS
        return None

    async def _run_alarm(self, chat_key: str) -> None:
        from memory_engine.compaction.compact import on_alarm
        from memory_engine.reminders.store import next_wake

        delay: int | None = UNEXPECTED_FAILURE_RETRY_MS
        at: int | None = None  # when the run meant the alarm to ring next
        try:
            with self.store.pinned(chat_key):
                if not self.store.exists(chat_key):
                    self.alarms.delete(chat_key)
                    return
                memory = self.store.open(chat_key)
                # Reminders first: a compaction may wait on a model; a due reminder must not.
                retry_at = await self._hand_over(chat_key, memory)
                # Under the chat's lock, as a request (its turns run in worker threads); let go
                # while the summarizer is awaited.
                async with self.store.lock(chat_key):
                    if not self.store.exists(chat_key):  # forgotten meanwhile
                        self.alarms.delete(chat_key)
                        return
                    memory = self.store.open(chat_key)
                    try:
                        summarize = self.store.unlocked_while(chat_key, self.summarize)
                        delay = await on_alarm(memory, summarize, *self.backoff, now_ms=self.now_ms)
                    except Exception:
                        log.exception("compaction failed chat=%s", chat_key)
                        delay = UNEXPECTED_FAILURE_RETRY_MS
                    # Read after the compaction's await: a reminder added or cancelled meanwhile
                    # left the alarm to this run (no await from here to the write).
                    at = None
                    if self.store.exists(chat_key):
                        at = next_wake(self.store.open(chat_key).sql, self.now_ms(), delay, retry_at)
                if at is None:
                    self.alarms.delete(chat_key)
                else:
                    self.alarms.set(chat_key, at)
        except (sqlite3.Error, OSError) as err:
            # The alarm table cannot be written (a full disk): its row stays due, so hold the
            # chat back in memory for the delay, or the loop would run it again at once.
            log.warning("could not reschedule compaction chat=%s: %s", chat_key, err)
            now = self.now_ms()
            until = now + (delay or UNEXPECTED_FAILURE_RETRY_MS)
            if at is not None:  # no later than the alarm would have rung: a reminder may be due first
                until = min(until, max(at, now + HANDOVER_RETRY_MS))
            self._held[chat_key] = until
        except Exception:
            # Any other error (a bug) leaves the row due too: hold the chat back as long as an
            # unexpected compaction failure waits, so it is logged once a minute, not spun on;
            # the other chats' alarms run meanwhile.
            log.exception("alarm bookkeeping failed chat=%s", chat_key)
            self._held[chat_key] = self.now_ms() + max(delay or 0, UNEXPECTED_FAILURE_RETRY_MS)
        finally:
            self._running.discard(chat_key)
            self._wake.set()
