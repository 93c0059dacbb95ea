"""How long `chatbot chat`, `telegram` and `discord` take to end after Ctrl-C or SIGTERM, with
something in flight that would hold them for minutes (issue 21: within 2 s, whatever it is).

    .venv/bin/python benchmarks/shutdown.py [--runs 3]

Each case starts the real command against the fakes of tests/fakes (a fake OpenAI server,
fake Telegram and Discord), waits until the thing in flight has started, sends the signal
and times signal -> exit. The cases: idle; a model call that never answers; a compaction
whose summarizer never answers; a platform that accepts connections and never replies at
start; a memory worker that never replies (an outbox record in flight).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.app.test_shutdown import black_hole  # noqa: E402
from tests.fakes.discord_server import FakeDiscord  # noqa: E402
from tests.fakes.openai_server import Answer, FakeOpenAI, Hang  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.support import clean_env, discord_env, wait_until  # noqa: E402

KEY = "sk-bench-shutdown-0123456789abcdef"


async def timed_stop(
    args: list[str], env: dict[str, str], ready: Callable[[Path], Awaitable[None]], sig: int
) -> float:
    """Start `chatbot ARGS`, await `ready(data_dir)`, send `sig`: seconds until it exited."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.cli",
            *args,
            "--data",
            str(data),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=tmp,
            env=clean_env(**env),
        )
        try:
            await ready_with(proc, data, ready)
            started = time.monotonic()
            proc.send_signal(sig)
            async with asyncio.timeout(60):
                await proc.wait()
            return time.monotonic() - started
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def ready_with(
    proc: asyncio.subprocess.Process, data: Path, ready: Callable[..., Awaitable[None]]
) -> None:
    await wait_until(lambda: (data / "outbox.sqlite3").exists(), timeout=60, what="start")
    await ready(proc)


async def cases(runs: int) -> list[tuple[str, list[float]]]:
    """Every case, `runs` times each."""
    out: list[tuple[str, list[float]]] = []

    async def run(name: str, once: Callable[[], Awaitable[float]]) -> None:
        times = [await once() for _ in range(runs)]
        out.append((name, times))
        print(f"{name}: {', '.join(f'{t:.2f}' for t in times)} s", file=sys.stderr)

    async def nothing(proc: asyncio.subprocess.Process) -> None:
        await asyncio.sleep(0.5)  # settled: the console waits for input

    chat = ["chat", "--chat", "console:bench"]
    await run("console, idle, Ctrl-C", lambda: timed_stop(chat, {}, nothing, signal.SIGINT))
    await run("console, idle, SIGTERM", lambda: timed_stop(chat, {}, nothing, signal.SIGTERM))

    async with FakeOpenAI(default=Hang(600)) as hang:
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": hang.url}

        async def asked(proc: asyncio.subprocess.Process) -> None:
            before = len(hang.requests)
            proc.stdin.write(b"a question the model never answers\n")
            await proc.stdin.drain()
            await hang.wait_requests(before + 1, timeout=60)

        await run(
            "console, model never answers, SIGTERM", lambda: timed_stop(chat, env, asked, signal.SIGTERM)
        )
        await run("console, model never answers, Ctrl-C", lambda: timed_stop(chat, env, asked, signal.SIGINT))

    async with FakeOpenAI(default=Answer("noted")) as model, FakeOpenAI(default=Hang(600)) as summarizer:
        env = {
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": model.url,
            "SUMMARY_BASE_URL": summarizer.url,
            "SUMMARY_MODEL": "s",
        }

        async def compacting(proc: asyncio.subprocess.Process) -> None:
            before = len(summarizer.requests)
            for i in range(30):
                proc.stdin.write(f"message {i}\n".encode())
            await proc.stdin.drain()
            await summarizer.wait_requests(before + 1, timeout=60)

        await run(
            "console, compaction in flight, SIGTERM",
            lambda: timed_stop(chat, env, compacting, signal.SIGTERM),
        )

    async with FakeTelegram() as tg, FakeOpenAI(default=Hang(600)) as hang:
        alice = tg.user(111, "Alice")
        dm = tg.private_chat(alice)
        env = {
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": hang.url,
            "TELEGRAM_BOT_TOKEN": tg.token,
            "TELEGRAM_API_BASE_URL": tg.base_url,
        }

        async def telegram_asked(proc: asyncio.subprocess.Process) -> None:
            before = len(hang.requests)
            await tg.wait_until(lambda: tg.calls_to("getUpdates"), timeout=60)
            tg.send(dm, alice, "think about it for a long time")
            await hang.wait_requests(before + 1, timeout=60)

        await run(
            "telegram, model never answers, SIGTERM",
            lambda: timed_stop(["telegram"], env, telegram_asked, signal.SIGTERM),
        )

    async with black_hole() as hole:

        async def calling(proc: asyncio.subprocess.Process) -> None:
            await wait_until(lambda: hole.held, timeout=60, what="the platform called")

        tg_env = {"TELEGRAM_BOT_TOKEN": "1:x", "TELEGRAM_API_BASE_URL": hole.url + "/bot"}
        await run(
            "telegram, Bot API hangs at start, SIGTERM",
            lambda: timed_stop(["telegram"], tg_env, calling, signal.SIGTERM),
        )
        dc_env = {"DISCORD_BOT_TOKEN": "x", "DISCORD_API_BASE_URL": hole.url + "/api/v10"}
        await run(
            "discord, REST hangs at start, SIGTERM",
            lambda: timed_stop(["discord"], dc_env, calling, signal.SIGTERM),
        )
        mem_env = {"OPENAI_API_KEY": KEY, "MEMORY_URL": hole.url, "MEMORY_API_TOKEN": "t" * 32}

        async def recording(proc: asyncio.subprocess.Process) -> None:
            before = len(hole.held)
            proc.stdin.write(b"remember this\n")
            await proc.stdin.drain()
            await wait_until(lambda: len(hole.held) > before, timeout=60, what="the worker called")

        await run(
            "console, memory worker hangs, SIGTERM",
            lambda: timed_stop(chat, mem_env, recording, signal.SIGTERM),
        )

    async def discord_connected() -> float:
        async with FakeDiscord() as fake, FakeOpenAI(default=Hang(600)) as hang:

            async def connected(proc: asyncio.subprocess.Process) -> None:
                await wait_until(lambda: fake.identifies, timeout=60, what="connected")

            return await timed_stop(["discord"], discord_env(fake, hang, KEY), connected, signal.SIGTERM)

    await run("discord, connected, SIGTERM", discord_connected)

    async def starting(proc: asyncio.subprocess.Process) -> None:
        pass  # the signal comes while it still starts (the model SDK is imported for seconds)

    await run(
        "console, during start-up, SIGTERM",
        lambda: timed_stop(chat, {"OPENAI_API_KEY": KEY}, starting, signal.SIGTERM),
    )
    return out


def main() -> int:
    """Print signal -> exit times per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = asyncio.run(cases(args.runs))
    print("| case | signal -> exit, median (max) |")
    print("| --- | ---: |")
    for name, times in results:
        print(f"| {name} | {statistics.median(times):.2f} s ({max(times):.2f} s) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
