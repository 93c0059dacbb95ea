"""The offline summarizer for the local host: CPU work that must not stall the event loop.

A live chat's compaction folds about 20 messages (a few ms, like a turn): it runs inline.
A backlog's batch (up to 200 messages, 24,000 characters: 60-80 ms of pure Python) runs in
a child process. A worker thread is not enough: it holds the GIL, and every turn of every
chat, which releases the GIL at each SQLite step, waits for it again (p50 3x slower, measured).
The child gets plain data (the previous summary and the batch's rows), never a connection:
reading the batch and committing the summary stay on the event loop, as in the Durable Object.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the child process is started by the first large batch: its modules load then
    from concurrent.futures import ProcessPoolExecutor

    from memory_engine.api.wire import Message

# Batches with more text than this go to the child process (about 20 chat messages).
INLINE_MAX_CHARS = 3000
NICENESS = 10
STOP_POLL_S = 0.1  # how soon the child notices the host stopping or gone

SummaryFn = Callable[[str, list["Message"]], str]


class OfflineSummarizer:
    """A `Summarize` running `fn` (`compaction.offline.offline_summary`) inline or in a child process."""

    def __init__(self, fn: SummaryFn | None = None, inline_max_chars: int = INLINE_MAX_CHARS):
        self._fn = fn  # None: the engine's offline_summary, imported at the first summary
        self.inline_max_chars = inline_max_chars
        self._pool: ProcessPoolExecutor | None = None
        self._stop: Any = None  # the child's stop event (a multiprocessing Event)

    @property
    def fn(self) -> SummaryFn:
        """The summary function run inline or in the child."""
        if self._fn is None:
            from memory_engine.compaction.compact import offline_summary

            self._fn = offline_summary
        return self._fn

    @fn.setter
    def fn(self, fn: SummaryFn) -> None:
        self._fn = fn

    async def __call__(self, previous: str, messages: list[Message]) -> str:
        """The new summary of `messages` merged into `previous`."""
        from concurrent.futures.process import BrokenProcessPool

        from memory_engine.compaction.compact import SummarizerError

        if sum(len(m.get("text") or "") for m in messages) <= self.inline_max_chars:
            return self.fn(previous, messages)
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn, not fork: the host has threads (asyncio's executor), and a forked child
            # could inherit a lock held by one of them.
            # Niced: background work yields the CPU to the host's turns when cores are scarce.
            context = multiprocessing.get_context("spawn")
            self._stop = context.Event()
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=context,
                initializer=_child_started,
                initargs=(os.getpid(), self._stop),
            )
        rows = [m.copy() for m in messages]
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self.fn, previous, rows)
        except BrokenProcessPool as err:
            # The child died (killed, out of memory): nothing was committed; the alarm retries
            # with backoff, and the next call starts a fresh child.
            self._pool = None
            raise SummarizerError("the offline summarizer's process died") from err

    def close(self) -> None:
        """Stop the child process at once (a batch it is summarizing is dropped; its alarm stays
        pending). The stop event, not only a shutdown of the pool: the interpreter's exit would
        still wait for the batch in hand, so a Ctrl-C could take as long as the summary."""
        if self._pool is not None:
            pool, stop = self._pool, self._stop
            self._pool = self._stop = None
            stop.set()
            # Not `shutdown(wait=False)` here: it drops the pool's queues and stop event at
            # once, and a child still starting then finds their named semaphores gone (it
            # printed a FileNotFoundError traceback). A thread waits for the child instead,
            # holding them (the child ends at once once started: the stop event is set); not a
            # daemon, so the interpreter's exit waits for it too.
            threading.Thread(target=_reap, args=(pool, stop), name="offline-summarizer-reap").start()


def _reap(pool: ProcessPoolExecutor, stop: Any) -> None:
    """Cancel what the closed pool still holds and wait for its child to end (holding `stop`)."""
    pool.shutdown(wait=True, cancel_futures=True)
    del stop


def _child_started(parent_pid: int, stop: Any) -> None:
    """In the child: run niced, and exit when told to or when the host is gone (a `kill -9`
    leaves no orphan)."""
    os.nice(NICENESS)

    def watch() -> None:
        while os.getppid() == parent_pid and not stop.wait(STOP_POLL_S):
            pass
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
