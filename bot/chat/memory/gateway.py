"""The memory gateway: the only code that talks to the memory worker.

It holds the HTTP client, the outbox of records the worker could not take yet, the back-off
that skips the worker for a while after a failure, and the background task that replays the
outbox, in order, once the worker is back. Turns and reply records go through `turn` and
`reply` (kept in the outbox when the worker is out of reach); every other route is passed
straight to the client and raises `MemoryUnavailable` / `MemoryRefused` like it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TypeVar

from bot.chat.memory.client import MemoryClient, MemoryRefused, MemoryRoutes, MemoryUnavailable, Query
from bot.chat.memory.outbox import Body, Kind, Outbox
from bot.chat.models.base import MemoryContext
from bot.chat.types import IncomingMessage
from bot.config import MemoryRetry
from memory_engine.api import wire
from memory_engine.api.routes import Route
from memory_engine.backoff import doubling

log = logging.getLogger(__name__)
B = TypeVar("B")
R = TypeVar("R")


class ForgetUnfinished(MemoryUnavailable):
    """A forget the worker could not take: the `dropped` records that waited in the outbox are
    gone (they will never be stored), what the worker holds is not forgotten yet."""

    def __init__(self, message: str, dropped: int, status: int | None = None) -> None:
        super().__init__(message, status)
        self.dropped = dropped


class MemoryGateway(MemoryRoutes):
    """The memory client, the outbox and the retries behind one surface; open it with `async with`.

    Its reads and admin actions (`search`, `facts`, ... of `MemoryRoutes`) go through `call`
    straight to the client; only `turn` and `reply` are kept in the outbox.
    """

    def __init__(
        self,
        client: MemoryClient,
        outbox: Outbox,
        *,
        retry: MemoryRetry | None = None,
        clock: Callable[[], float] = time.monotonic,
        close_timeout_s: float = 5.0,
    ) -> None:
        self.client = client
        self.outbox = outbox
        self.retry = retry or MemoryRetry()
        self._clock = clock
        self._down_until = 0.0
        self._failures = 0
        self._wake = asyncio.Event()
        self._replayer: asyncio.Task[None] | None = None
        self.close_timeout_s = close_timeout_s  # the last flush on the way out (the rest stays on disk)

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> MemoryGateway:
        self._replayer = asyncio.create_task(self._replay_loop(), name="outbox-replay")
        if len(self.outbox):
            self._wake.set()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._replayer is not None:
            self._replayer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._replayer
        # One last try, so a clean shutdown leaves nothing behind when the worker is up.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.close_timeout_s):
                await self.outbox.flush(self.client)

    async def _replay_loop(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow our own cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.retry.replay_interval_s):
                    await self._wake.wait()
            self._wake.clear()
            if not len(self.outbox):
                continue
            try:
                delivered = await self.outbox.flush(self.client)
            except Exception:  # never let the replayer die; the records stay in SQLite
                log.exception("outbox replay failed")
                continue
            if not len(self.outbox):
                self._up()
                log.info("outbox replayed: %d records", delivered)
            else:
                self._down(f"outbox replay stopped with {len(self.outbox)} records left")

    async def flush(self) -> int:
        """Replay the outbox now; how many records were delivered."""
        delivered = await self.outbox.flush(self.client)
        if not len(self.outbox):
            self._up()
        else:  # flush only stops early when the worker is unavailable
            self._down(f"outbox replay stopped with {len(self.outbox)} records left")
        return delivered

    def pending_for(self, chat: str) -> int:
        """How many records of one chat wait in the outbox."""
        return self.outbox.pending_for(chat)

    # -- back-off -----------------------------------------------------------------------

    def is_down(self) -> bool:
        """True while the worker is skipped after a failure."""
        return self._clock() < self._down_until

    def _down(self, why: str) -> None:
        # Warn once per outage; the retries while it lasts are debug noise.
        level = logging.DEBUG if self.is_down() else logging.WARNING
        log.log(level, "memory worker unavailable (%s); answering without memory, keeping records", why)
        self._down_until = self._clock() + doubling(
            self._failures, self.retry.retry_s, self.retry.retry_max_s
        )
        self._failures += 1

    def _up(self) -> None:
        self._down_until = 0.0
        self._failures = 0

    def _keep(self, chat: str, kind: Kind, body: Body) -> None:
        self.outbox.add(chat, kind, body)
        self._wake.set()

    # -- the two records of a message ---------------------------------------------------

    async def turn(self, message: IncomingMessage, text: str, message_id: str) -> MemoryContext | None:
        """Record a user message; its memory context, or None when the worker is out of reach
        (the record then waits in the outbox) or refuses it for good (too long, bad chat key).

        The caller holds the chat's lock, so one chat's messages go in arrival order.
        """
        body: wire.TurnRequest = {
            "text": text,
            "author": message.author,
            "author_id": message.author_id,
            "message_id": message_id,
        }
        if message.chat_title:
            body["title"] = message.chat_title
        chat = message.chat_key
        if len(self.outbox) and not self.is_down():
            await self.flush()
        if self.is_down() or self.outbox.pending_for(chat):
            self._keep(chat, "turn", body)  # older records of this chat wait: this one goes behind
            return None
        try:
            data = await self.client.turn(
                chat,
                text,
                author=message.author,
                author_id=message.author_id,
                message_id=message_id,
                title=message.chat_title,
            )
        except MemoryUnavailable as exc:
            self._down(str(exc))
            self._keep(chat, "turn", body)
            return None
        except asyncio.CancelledError:  # a shutdown: the worker may not have it; replaying is idempotent
            self._keep(chat, "turn", body)
            raise
        except MemoryRefused as exc:
            # 413 (too long), 400 (bad chat key): the worker will never take it; answer anyway.
            log.warning("memory refused the message in %s: %s", chat, exc.error)
            return None
        return MemoryContext.of(data)

    async def reply(self, chat: str, record: wire.ReplyRequest) -> None:
        """Record one model attempt; into the outbox when the worker is out of reach."""
        if self.is_down() or self.outbox.pending_for(chat):
            self._keep(chat, "reply", record)
            return
        try:
            await self.client.reply(chat, record)
        except MemoryUnavailable as exc:
            self._down(str(exc))
            self._keep(chat, "reply", record)
        except asyncio.CancelledError:
            self._keep(chat, "reply", record)
            raise
        except MemoryRefused as exc:
            log.warning("memory refused a reply record in %s: %s", chat, exc.error)

    # -- reads and admin actions, straight to the worker --------------------------------

    async def call(
        self,
        route: Route[B, R],
        chat: str | None = None,
        *,
        body: B | None = None,
        query: Query | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> R:
        """Any other route, straight to the worker (raises like the client does)."""
        return await self.client.call(route, chat, body=body, query=query, path=path)

    async def forget_author(self, chat: str, author_id: str) -> wire.ForgetAuthorAnswer:
        """Forget one person in a chat: what waits in the outbox first, then the worker's
        (ForgetUnfinished when the worker cannot be reached: the outbox's part is done)."""
        dropped = await self.outbox.forget(chat, author_id)  # first: nothing may be replayed after
        try:
            return await super().forget_author(chat, author_id)
        except MemoryUnavailable as exc:
            raise ForgetUnfinished(str(exc), dropped, exc.status) from exc

    async def forget_chat(self, chat: str) -> wire.ForgetChatAnswer:
        """Forget the whole chat: what waits in the outbox first, then the worker's
        (ForgetUnfinished when the worker cannot be reached: the outbox's part is done)."""
        dropped = await self.outbox.forget(chat)  # first: nothing of it may be replayed after
        try:
            return await super().forget_chat(chat)
        except MemoryUnavailable as exc:
            raise ForgetUnfinished(str(exc), dropped, exc.status) from exc

    # -- people's own data -------------------------------------------------------------

    async def export(self, chat: str, author_id: str | None = None) -> AsyncIterator[wire.ExportPage]:
        """The pages of an export, first to last: the first holds everything but later messages.

        The later pages ask for the messages up to the first page's `upto`, so together they
        are one consistent snapshot even while the chat goes on.
        """
        page = await self.client.export_page(chat, author_id)
        upto = page["export"]["upto"]
        yield page
        while (after := page["next_after"]) is not None:
            page = await self.client.export_page(chat, author_id, after=after, upto=upto)
            yield page
