"""Ctrl-C and SIGTERM end `chatbot chat`, `telegram` and `discord` at once, whatever is in flight,
and nothing acknowledged is lost (issue 21, item 9).

Each case starts the real command and something that would hold it for minutes: a model
that never answers, a summarizer that never answers (a compaction in flight), a platform or
memory worker that accepts connections and never replies, one that refuses them. The
process must end long before that (STOP_WITHIN is a bound far below the hang, not a timing
claim: benchmarks/shutdown.py measures the real figures), and what was acknowledged is
still there afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator

import pytest

from bot.chat.memory.client import HttpMemoryClient
from bot.chat.memory.outbox import Outbox
from memory_worker.local import EmbeddedMemoryHost
from memory_worker.local.offline import OfflineSummarizer
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import Answer, FakeOpenAI, Hang
from tests.support import TcpGate, clean_env, discord_env, wait_until

HANG_S = 300.0  # what is in flight would hold the process this long
STOP_WITHIN = 20.0  # ... and it ends well before (the shutdown itself takes about 2 s)


class BlackHole:
    """A server that accepts connections and never answers."""

    def __init__(self) -> None:
        self.held: list[asyncio.StreamWriter] = []  # the connections it holds
        self.url = ""

    async def _hold(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.held.append(writer)


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[BlackHole]:
    """A running BlackHole on a port of its own."""
    hole = BlackHole()
    server = await asyncio.start_server(hole._hold, "127.0.0.1", 0)
    hole.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield hole
    finally:
        for writer in hole.held:
            writer.transport.abort()
        server.close()


async def chatbot(tmp_path, *args: str, **env: str) -> asyncio.subprocess.Process:
    """`chatbot ARGS` as a real process in `tmp_path`, output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        "--data",
        str(tmp_path / "data"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
        env=clean_env(**env),
    )


async def stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
    """Send `sig`; the exit status, stderr and stdout once the process ended (within STOP_WITHIN)."""
    proc.send_signal(sig)
    try:
        async with asyncio.timeout(STOP_WITHIN):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode(), out.decode()


async def stats(data_dir, chat: str) -> dict:
    """The stats of one chat in a stopped bot's embedded memory."""
    async with EmbeddedMemoryHost(data_dir / "memory") as host, HttpMemoryClient(host.url, host.token) as mem:
        return await mem.stats(chat)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_telegram_with_a_model_that_never_answers_stops_and_keeps_the_message(tg, tmp_path, sig):
    alice = tg.user(111, "Alice")
    chat = tg.private_chat(alice)
    async with FakeOpenAI(default=Hang(HANG_S)) as model:
        proc = await chatbot(
            tmp_path,
            "telegram",
            OPENAI_API_KEY="sk-test-stop-0123456789abcdef",
            OPENAI_BASE_URL=model.url,
            TELEGRAM_BOT_TOKEN=tg.token,
            TELEGRAM_API_BASE_URL=tg.base_url,
        )
        await tg.wait_until(lambda: tg.calls_to("getUpdates"), timeout=60)
        tg.send(chat, alice, "please think about this for a long time")
        await model.wait_requests(1, timeout=30)
        rc, err, _ = await stop(proc, sig)
    assert rc == 0, err
    assert (await stats(tmp_path / "data", "telegram:111"))["total_messages"] >= 1  # the question stays


@pytest.mark.parametrize("command", ["telegram", "discord"])
async def test_a_platform_that_hangs_at_start_does_not_hold_the_stop(tmp_path, command):
    async with black_hole() as hole:
        url = hole.url
        env = (
            {"TELEGRAM_BOT_TOKEN": "123:fake", "TELEGRAM_API_BASE_URL": url + "/bot"}
            if command == "telegram"
            else {"DISCORD_BOT_TOKEN": "fake", "DISCORD_API_BASE_URL": url + "/api/v10"}
        )
        proc = await chatbot(tmp_path, command, **env)
        await wait_until(lambda: hole.held, timeout=60, what="the bot calling the platform")
        rc, err, _ = await stop(proc)
    assert rc == 0, err


async def test_a_platform_that_refuses_connections_at_start_does_not_hold_the_stop(tmp_path):
    async with TcpGate() as gate:  # shut: connections are refused, and Telegram is retried with back-off
        proc = await chatbot(
            tmp_path, "telegram", TELEGRAM_BOT_TOKEN="123:fake", TELEGRAM_API_BASE_URL=gate.url + "/bot"
        )
        await wait_until(lambda: (tmp_path / "data" / "outbox.sqlite3").exists(), timeout=60, what="start")
        rc, err, _ = await stop(proc)
    assert rc == 0, err


async def test_discord_with_a_model_that_never_answers_stops(tmp_path):
    async with FakeDiscord() as fake, FakeOpenAI(default=Hang(HANG_S)) as model:
        proc = await chatbot(tmp_path, "discord", **discord_env(fake, model))
        await wait_until(lambda: fake.identifies, timeout=60, what="the bot connected")
        rc, err, _ = await stop(proc)
    assert rc == 0, err


async def test_console_stops_during_a_compaction_that_never_ends_and_keeps_every_message(tmp_path):
    async with FakeOpenAI(default=Answer("noted")) as model, FakeOpenAI(default=Hang(HANG_S)) as summarizer:
        proc = await chatbot(
            tmp_path,
            "chat",
            "--chat",
            "console:stop",
            OPENAI_API_KEY="sk-test-stop-0123456789abcdef",
            OPENAI_BASE_URL=model.url,
            SUMMARY_BASE_URL=summarizer.url,
            SUMMARY_MODEL="summarizer",
        )
        for i in range(30):  # past the compaction threshold: the summarizer is called, and hangs
            proc.stdin.write(f"message number {i}\n".encode())
        await proc.stdin.drain()
        await summarizer.wait_requests(1, timeout=60)
        rc, err, out = await stop(proc)
    assert rc == 0, err
    answered = out.count("noted")
    assert 2 * answered > 25  # the compaction was due; the lines not read yet were never taken
    # Every message taken is in memory, with its answer.
    assert (await stats(tmp_path / "data", "console:stop"))["total_messages"] == 2 * answered


async def test_console_stops_while_the_memory_worker_hangs_and_keeps_the_records(tmp_path):
    async with FakeOpenAI(default=Answer("noted")) as model, black_hole() as memory:
        proc = await chatbot(
            tmp_path,
            "chat",
            "--chat",
            "console:stop",
            OPENAI_API_KEY="sk-test-stop-0123456789abcdef",
            OPENAI_BASE_URL=model.url,
            MEMORY_URL=memory.url,
            MEMORY_API_TOKEN="t" * 32,
        )
        proc.stdin.write(b"remember this while the worker hangs\n")
        await proc.stdin.drain()
        await wait_until(lambda: memory.held, timeout=60, what="the bot calling the memory worker")
        rc, err, _ = await stop(proc)
    assert rc == 0, err
    with Outbox(tmp_path / "data" / "outbox.sqlite3") as box:
        assert len(box) >= 1  # the message waits on disk, replayed at the next start


def test_the_offline_summarizers_child_ends_when_it_is_closed(tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()

    async def run() -> int:
        import functools

        from tests.hosts.test_local_host import _held_summary

        summarizer = OfflineSummarizer(fn=functools.partial(_held_summary, str(flags)), inline_max_chars=0)
        rows = [{"role": "user", "author": "Ann", "text": "I live in Rome.", "ts": "t"}]
        task = asyncio.ensure_future(summarizer("", rows))
        await wait_until((flags / "started").exists, timeout=60, what="the summarizer's child process")
        task.cancel()
        summarizer.close()  # never released: it would summarize for ever
        return int((flags / "started").read_text())

    child = asyncio.run(run())
    deadline = time.monotonic() + STOP_WITHIN
    while _alive(child):
        assert time.monotonic() < deadline, "the child kept running after close()"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting for its parent to reap it is gone too
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"
    return True
