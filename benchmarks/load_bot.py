"""The whole bot pipeline under load: 50 concurrent chats, a model that answers at once.

Part 1 drives `Pipeline.handle` directly: the memory turn and reply over HTTP to the embedded
local memory host (real SQLite in a temporary folder), tier choice, prompt building, and a
real HTTP call through the openai SDK to a fake OpenAI-compatible server that answers at
once. Part 2 goes through Telegram: the fake Bot API server, python-telegram-bot (polling,
AIORateLimiter, per-chat ordering) and the adapter, answers sent whole.

Afterwards every chat is counted in the memory worker (GET /stats: each question and each
answer exactly once) and, for Telegram, on the fake server (one answer per question), so
"lost" and "doubled" are measured, not assumed.

    .venv/bin/python benchmarks/load_bot.py [--chats 50] [--turns 20] [--telegram-turns 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pipeline import SENTENCES as PIPELINE_SENTENCES
from bot.app import build_pipeline
from bot.chat.types import IncomingMessage
from bot.config import DEFAULT_CONFIG, Settings, settings_from
from tests.fakes.openai_server import Echo, FakeOpenAI

SENTENCES = PIPELINE_SENTENCES[:6]  # the six this benchmark has always measured with


@dataclass
class Figures:
    """What one run measured."""

    name: str
    turns: int
    seconds: float
    latencies_ms: list[float]
    errors: int
    lost: int
    doubled: int

    def row(self) -> str:
        """One line of the table."""
        lat = sorted(self.latencies_ms) or [0.0]
        p50 = statistics.median(lat)
        p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
        return (
            f"{self.name:<28} {self.turns:>6} {self.turns / self.seconds:>8.1f} {p50:>8.1f} {p99:>8.1f} "
            f"{self.errors:>6} {self.lost:>5} {self.doubled:>7}"
        )


HEADER = (
    f"{'scenario':<28} {'turns':>6} {'turns/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
    f"{'errors':>6} {'lost':>5} {'doubled':>7}"
)


def settings_for(openai_url: str, **env: str) -> Settings:
    """The default config/bot.toml with every tier on the fake model."""
    with open(DEFAULT_CONFIG, "rb") as fh:
        data = tomllib.load(fh)
    return settings_from(
        data, {"OPENAI_API_KEY": "sk-bench-0123456789abcdef", "OPENAI_BASE_URL": openai_url, **env}
    )


async def count(router, chats: list[str], expected: int) -> tuple[int, int]:
    """(lost, doubled) messages over `chats`, each expected to hold `expected` messages."""
    lost = doubled = 0
    for chat in chats:
        total = int((await router.memory.stats(chat))["total_messages"])
        lost += max(0, expected - total)
        doubled += max(0, total - expected)
    return lost, doubled


async def bench_router(data: Path, chats: int, turns: int) -> Figures:
    """`chats` concurrent chats, `turns` messages each, through Pipeline.handle."""
    async with FakeOpenAI(default=Echo()) as openai, build_pipeline(settings_for(openai.url), data) as router:
        latencies: list[float] = []
        errors = 0

        async def chat(c: int) -> None:
            nonlocal errors
            for t in range(turns):
                message = IncomingMessage(
                    chat_key=f"bench:{c}",
                    author=f"user{c}",
                    author_id=f"u{c}",
                    text=f"{SENTENCES[t % len(SENTENCES)]} ({t})",
                    message_id=f"{c}-{t}",
                    is_admin=True,
                    platform="console",
                )
                started = time.perf_counter()
                try:
                    reply = await router.handle(message)
                    errors += not reply.ok
                except Exception:
                    errors += 1
                latencies.append((time.perf_counter() - started) * 1000.0)

        started = time.perf_counter()
        await asyncio.gather(*(chat(c) for c in range(chats)))
        seconds = time.perf_counter() - started
        await router.flush_outbox()
        lost, doubled = await count(router, [f"bench:{c}" for c in range(chats)], 2 * turns)
    return Figures(
        f"Pipeline.handle x{chats} chats", chats * turns, seconds, latencies, errors, lost, doubled
    )


async def bench_telegram(data: Path, chats: int, turns: int) -> Figures:
    """`chats` private Telegram chats sending `turns` messages each, all at once."""
    from bot.adapters.telegram import adapter as tgad
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeOpenAI(default=Echo()) as openai, FakeTelegram() as tg:
        settings = settings_for(openai.url, TELEGRAM_BOT_TOKEN=tg.token, TELEGRAM_API_BASE_URL=tg.base_url)
        settings = replace(settings, telegram=replace(settings.telegram, streaming=False))
        async with build_pipeline(settings, data) as router:
            app = tgad.build_application(router, settings)
            serving = asyncio.create_task(tgad.serve(router, settings, app=app, poll_timeout=5))
            await tg.wait_until(lambda: tg.calls_to("getUpdates"), timeout=30)
            users = [tg.user(1000 + c, f"User{c}") for c in range(chats)]
            rooms = [tg.private_chat(u) for u in users]
            sent_at: dict[tuple[int, int], float] = {}
            started = time.perf_counter()
            clock0 = time.monotonic()
            for t in range(turns):
                for user, room in zip(users, rooms, strict=True):
                    m = tg.send(room, user, f"{SENTENCES[t % len(SENTENCES)]} ({t})")
                    sent_at[(room["id"], m["message_id"])] = time.monotonic()
            expected = chats * turns
            answered = lambda: sum(len(tg.bot_messages(r["id"])) for r in rooms) >= expected  # noqa: E731
            await tg.wait_until(answered, timeout=600)
            seconds = time.perf_counter() - started
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
            latencies = []
            for call in tg.calls_to("sendMessage", ok=True):
                reply = call.params.get("reply_parameters") or {}
                key = (call.params.get("chat_id"), reply.get("message_id"))
                if key in sent_at:
                    latencies.append((call.at - max(sent_at[key], clock0)) * 1000.0)
            errors = len(tg.calls_to("sendMessage", ok=False))
            shown = [len(tg.bot_messages(r["id"])) for r in rooms]
            lost_tg = sum(max(0, turns - n) for n in shown)
            doubled_tg = sum(max(0, n - turns) for n in shown)
            await router.flush_outbox()
            lost, doubled = await count(router, [f"telegram:{r['id']}" for r in rooms], 2 * turns)
    return Figures(
        f"Telegram x{chats} chats", expected, seconds, latencies, errors, lost + lost_tg, doubled + doubled_tg
    )


async def main() -> int:
    """Run both parts and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20, help="messages per chat through Pipeline.handle")
    parser.add_argument(
        "--telegram-turns", type=int, default=4, help="messages per chat through Telegram (0: skip)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(await bench_router(Path(tmp) / "router", args.chats, args.turns))
        if args.telegram_turns:
            rows.append(await bench_telegram(Path(tmp) / "telegram", args.chats, args.telegram_turns))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# the bot pipeline under load: instant fake model over HTTP, embedded memory host; "
        f"{os.cpu_count()} CPUs, load {load:.2f}"
    )
    print(HEADER)
    print("-" * len(HEADER))
    for row in rows:
        print(row.row())
    print("lost/doubled: counted per chat in the memory worker (and on the fake Telegram server) afterwards.")
    print("Telegram's pace is bounded by AIORateLimiter (30 requests/s per bot, Telegram's own limit).")
    return 1 if any(r.errors or r.lost or r.doubled for r in rows) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
