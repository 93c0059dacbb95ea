"""The `chatbot` command run in this process: `bot.cli.main` with its own argv, stdin, working
folder and environment, its output captured.

A `python -m bot.cli` child pays the interpreter's start and the bot's imports (the model SDK
alone takes 1-3 s on a loaded machine) for every run; here they are paid once per session.
What the command does is the same code: argument parsing, settings read from the environment
and a `.env` in the working folder, the embedded memory host, the console on a pipe-like
stdin. What only a real process shows (signals, exit without teardown, a fresh interpreter's
imports) keeps its subprocess tests (tests/adapters/test_console.py, test_shutdown.py, test_app.py).

Runs are serial (the environment, the working folder and the standard streams are the
process's), which is how pytest runs tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memory_worker.local.logs import LOGGERS

_SERIAL = threading.Lock()


@dataclass(frozen=True)
class CliRun:
    """What one run of the command left: its status and its two output streams."""

    returncode: int
    stdout: str
    stderr: str


class _Input(io.StringIO):
    """A stdin that is no terminal (as a pipe): the console reads it line by line."""

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _process_state(cwd: Path, env: dict[str, str], stdin: str) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """The process's environment, folder, umask, streams and root logging, restored afterwards."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    saved_logging = root.level, list(root.handlers)
    # `memory serve` in this process configures its own loggers (httpx among them): put them back,
    # or a later test on this worker would see httpx at WARNING and not propagating.
    named = [logging.getLogger(name) for name in LOGGERS]
    saved_named = [(lg.level, list(lg.handlers), lg.propagate) for lg in named]
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin, sys.stdout, sys.stderr = _Input(stdin), out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        os.umask(saved_umask)
        root.setLevel(saved_logging[0])
        root.handlers[:] = saved_logging[1]
        for lg, (level, handlers, propagate) in zip(named, saved_named, strict=True):
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate = propagate


def run_cli(*argv: str, cwd: Path, env: dict[str, str], stdin: str = "") -> CliRun:
    """`chatbot ARGV` in this process, in `cwd`, with exactly `env` as its environment."""
    from bot.cli import main

    with _SERIAL, _process_state(cwd, env, stdin) as (out, err):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse's errors and --help
            code = exit_.code if isinstance(exit_.code, int) else 1
    return CliRun(code, out.getvalue(), err.getvalue())


async def run_cli_async(*argv: str, cwd: Path, env: dict[str, str], stdin: str = "") -> CliRun:
    """`run_cli` from a test's event loop (the command runs its own loop, in a thread)."""
    return await asyncio.to_thread(run_cli, *argv, cwd=cwd, env=env, stdin=stdin)
