"""Stopping at once: how `chatbot chat`, `telegram` and `discord` end on Ctrl-C and SIGTERM.

One path for the three. The first SIGINT or SIGTERM sets `stop`: the adapter takes no new
message and the answers in hand get `grace_s` to finish; then the main task is cancelled
and the `async with` blocks close in order (records still unsent stay in the outbox on
disk, replayed at the next start: nothing acknowledged is lost). A second signal cancels
at once; in the console Ctrl-C always does. A watchdog thread ends the process `hard_s`
after the first signal whatever is still running (a compaction, a child process, a
platform that does not answer): by then every acknowledged record is in SQLite. Once the
`async with` blocks are closed, a stopped process ends with `os._exit`: the interpreter's
teardown of the loaded libraries would take up to 2 s more on a busy machine.

The handlers are installed explicitly (`signal.signal`), never left to Python's default: a
process started with SIGINT ignored (a CI runner starts background jobs so) would otherwise
never see Ctrl-C. That is why the console once ignored it in a
whole-suite CI run and not when its test ran alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

log = logging.getLogger(__name__)

GRACE_S = 1.25  # answers in hand may finish this long after the first signal
HARD_S = 1.75  # after the first signal the process ends by then, whatever is still running
CLOSE_S = 0.3  # each closing step that waits for something outside (outbox flush, host drain)


def run_until_signalled(
    main: Callable[[asyncio.Event], Awaitable[int | None]],
    *,
    grace_s: float = GRACE_S,
    hard_s: float = HARD_S,
    sigint_at_once: bool = False,
    sigint_rc: int = 0,
) -> int:
    """Run `main(stop)` until it ends or a signal stops it; the exit status.

    `sigint_at_once`: Ctrl-C cancels without a grace (the console's Ctrl-C means now);
    `sigint_rc`: the status after Ctrl-C (130 in the console, as shells expect).
    """
    received: list[int] = []
    previous: dict[int, Any] = {}

    async def guarded() -> int:
        task = asyncio.current_task()
        assert task is not None  # guarded() runs as the loop's main task
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        deadline: list[asyncio.TimerHandle] = []

        def on_signal(sig: int) -> None:
            first = not received
            received.append(sig)
            if not first or (sig == signal.SIGINT and sigint_at_once):
                log.info("signal %s: stopping now", signal.Signals(sig).name)
                stop.set()
                task.cancel()
            else:
                log.info("signal received: finishing the answers in hand (at most %.2f s)", grace_s)
                stop.set()
                deadline.append(loop.call_later(grace_s, task.cancel))

        watching: list[bool] = []

        def on_raw_signal(sig: int, _frame: object) -> None:
            # A plain handler, not loop.add_signal_handler: it runs between two bytecodes even
            # while the loop is busy (start-up imports the model SDK for seconds on a loaded
            # machine), so the watchdog starts at once; the loop then stops the rest in order.
            if not watching:
                watching.append(True)
                _watchdog(hard_s, lambda: _status(received or [sig], sigint_rc))
            loop.call_soon_threadsafe(on_signal, sig)

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, OSError):  # not in the main thread
                previous[sig] = signal.signal(sig, on_raw_signal)
        try:
            rc = await main(stop)
        except asyncio.CancelledError:
            if not received:
                raise
            log.info("stopped by a signal")
            return _status(received, sigint_rc)
        except RuntimeError as exc:  # a missing token or similar: say it, no traceback
            log.debug("start-up failed", exc_info=True)
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            for handle in deadline:
                handle.cancel()
        log.info("stopped cleanly")
        return _status(received, sigint_rc) if received and rc is None else (rc or 0)

    try:
        rc = asyncio.run(guarded())
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return sigint_rc
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        # Stopped by a signal, and everything is closed (outbox, memory, clients): end now. The
        # interpreter's own teardown of the loaded libraries takes up to 2 s more on a busy
        # machine, and no thread may run during it, the watchdog's included.
        _exit_now(rc)
    return rc


def _exit_now(status: int) -> NoReturn:
    """Flush the logs and the output, and end the process without the interpreter's teardown."""
    with contextlib.suppress(Exception):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


def _status(received: list[int], sigint_rc: int) -> int:
    return sigint_rc if received and received[0] == signal.SIGINT else 0


def _watchdog(after_s: float, status: Callable[[], int]) -> None:
    """End the process `after_s` from now if it is still running (a daemon thread: the loop
    may be blocked, or the interpreter may be joining a child's thread at exit)."""

    def fire() -> None:
        log.warning("still stopping after %.1f s: exiting now (unsent records stay in the outbox)", after_s)
        _exit_now(status())

    timer = threading.Timer(after_s, fire)
    timer.daemon = True
    timer.start()
