"""Reminder delivery: delay after the due time, and how many were lost or doubled.

Real processes: `chatbot memory serve` (the local host) and `chatbot telegram` (the bot, on
MEMORY_URL), talking to the fake Telegram Bot API of tests/fakes. Reminders are set through
the memory API with due times spread over a window, each with a unique text; the delay of a
reminder is the time the fake Telegram received its sendMessage minus its due time. Three
runs, each against the same host:

- up: the bot runs throughout (the baseline the others are compared with);
- crash: the bot is killed with SIGKILL at random moments inside the window and restarted
  at once;
- downtime: the bot is stopped (SIGKILL) before the window and started again `--down` s after
  its end: delays are counted from the due time (they include the downtime) and from the
  restart.

    .venv/bin/python benchmarks/reminder_delivery.py [--reminders 200] [--chats 20] [--kills 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bot.chat.memory.client import HttpMemoryClient  # noqa: E402
from bot.chat.proactive.reminder_routes import ReminderApi  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402
from tests.support import MEMORY_TOKEN, clean_env  # noqa: E402
from tests.support.net import ServedMemory  # noqa: E402


class Bot:
    """`chatbot telegram` as a subprocess, restartable, SIGKILLed by `kill`."""

    def __init__(self, tmp: Path, tg: FakeTelegram, memory_url: str) -> None:
        self.tmp, self.tg, self.url = tmp, tg, memory_url
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.tmp / "bot.log", "ab")  # noqa: SIM115 - the child keeps it
        env = clean_env(
            TELEGRAM_BOT_TOKEN=self.tg.token,
            TELEGRAM_API_BASE_URL=self.tg.base_url,
            MEMORY_URL=self.url,
            MEMORY_API_TOKEN=MEMORY_TOKEN,
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "telegram", "--data", str(self.tmp / "bot")],
            cwd=self.tmp,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def schedule(api: ReminderApi, tag: str, n: int, chats: int, start_in: float, window: float) -> dict:
    """n reminders over `chats` chats, due evenly over `window` s from `start_in` s; text -> due (wall s)."""
    due: dict[str, float] = {}
    t0 = time.time() + start_in
    for i in range(n):
        at = t0 + window * i / max(1, n - 1)
        text = f"{tag}-{i}"
        await api.add(f"telegram:{1000 + i % chats}", {"text": text, "due_at": int(at * 1000)})
        due[text] = at
    return due


async def collect(tg: FakeTelegram, due: dict[str, float], timeout: float) -> tuple[dict, Counter]:
    """Wait until every reminder arrived (or `timeout`); first arrival (wall s) per text, and counts."""
    offset = time.time() - time.monotonic()
    prefix = "⏰ Reminder: "
    deadline = time.monotonic() + timeout
    while True:
        first: dict[str, float] = {}
        counts: Counter = Counter()
        for call in tg.calls_to("sendMessage", ok=True):
            text = str(call.params.get("text", ""))
            if text.startswith(prefix):
                key = text[len(prefix) :].split("\n")[0]
                if key in due:
                    counts[key] += 1
                    first.setdefault(key, call.at + offset)
        if len(first) == len(due) or time.monotonic() > deadline:
            return first, counts
        await asyncio.sleep(0.05)  # a poll step with a deadline


def report(name: str, due: dict, first: dict, counts: Counter, since: dict | None = None) -> dict:
    delays = [first[k] - due[k] for k in first]
    row = {
        "run": name,
        "n": len(due),
        "p50_s": statistics.median(delays) if delays else float("nan"),
        "p99_s": pct(delays, 99) if delays else float("nan"),
        "max_s": max(delays) if delays else float("nan"),
        "lost": len(due) - len(first),
        "doubled": sum(c - 1 for c in counts.values() if c > 1),
    }
    if since:
        after = [first[k] - since["at"] for k in first]
        row["p50_after_restart_s"] = statistics.median(after) if after else float("nan")
        row["p99_after_restart_s"] = pct(after, 99) if after else float("nan")
    return row


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reminders", type=int, default=200)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--window", type=float, default=20.0, help="seconds the due times spread over")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--down", type=float, default=10.0, help="seconds the bot stays down past the window")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(os.environ.get("KEEP_DIR") or tmp_s)
        async with FakeTelegram() as tg:
            for c in range(args.chats):  # the fake knows only the chats it was told of
                tg.private_chat(tg.user(1000 + c, f"user{c}"))
            served = ServedMemory(tmp / "memory", MEMORY_TOKEN)
            await served.start()
            bot = Bot(tmp, tg, served.url)
            try:
                async with HttpMemoryClient(served.url, MEMORY_TOKEN, timeout=30) as client:
                    api = ReminderApi(client)
                    bot.start()
                    await asyncio.sleep(3)  # the bot's start-up (imports, getMe) before the window
                    print("up ...", file=sys.stderr)
                    due = await schedule(api, "up", args.reminders, args.chats, 2.0, args.window)
                    first, counts = await collect(tg, due, args.window + 60)
                    rows.append(report("up", due, first, counts))
                    print(rows[-1], file=sys.stderr)

                    print("crash ...", file=sys.stderr)
                    due = await schedule(api, "crash", args.reminders, args.chats, 2.0, args.window)
                    start = min(due.values())
                    for at in sorted(rng.uniform(0, args.window) for _ in range(args.kills)):
                        await asyncio.sleep(max(0.0, start + at - time.time()))
                        bot.kill()
                        bot.start()
                    first, counts = await collect(tg, due, args.window + 90)
                    rows.append(report(f"crash (SIGKILL x{args.kills})", due, first, counts))
                    print(rows[-1], file=sys.stderr)

                    print("downtime ...", file=sys.stderr)
                    bot.kill()
                    due = await schedule(api, "down", args.reminders // 2, args.chats, 1.0, args.window / 2)
                    await asyncio.sleep(max(due.values()) - time.time() + args.down)
                    restart = {"at": time.time()}
                    bot.start()
                    first, counts = await collect(tg, due, 90)
                    rows.append(report(f"after {args.down:.0f} s down", due, first, counts, restart))
            finally:
                bot.kill()
                served.stop_quietly()
    base = rows[0]["p50_s"]
    print(
        f"\nreminder delivery: {args.reminders} reminders over {args.chats} chats, window {args.window:.0f} s"
    )
    print("| run | reminders | p50 delay | p99 delay | max | p50 vs up | lost | doubled |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        extra = ""
        if "p50_after_restart_s" in r:
            extra = (
                f" (from restart: p50 {r['p50_after_restart_s']:.2f} s, p99 {r['p99_after_restart_s']:.2f} s)"
            )
        print(
            f"| {r['run']} | {r['n']} | {r['p50_s']:.2f} s{extra} | {r['p99_s']:.2f} s | {r['max_s']:.2f} s "
            f"| {r['p50_s'] / base:.1f}x | {r['lost']} | {r['doubled']} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
