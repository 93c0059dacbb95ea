"""Load on the memory host over HTTP, and on the whole bot pipeline, with figures.

Part 1 starts `chatbot memory serve` (a subprocess on 127.0.0.1, real SQLite in a temporary
folder, the offline summarizer compacting in the background) and drives it with many
concurrent clients: CHATS chats x TURNS turns, each turn followed by its reply, every write
carrying a message_id. Then it counts every chat (stats and usage) to find messages lost or
doubled, and reads the host's RSS from /proc and the disk used after a clean SIGTERM.

Part 2 (when `bot.app.build_pipeline` is there) runs the bot's own pipeline — router, memory
client, embedded memory host over HTTP, tier choice, prompt, recording — with an instant
in-process model, BOT_CHATS chats at once, then counts what each chat remembered.

    .venv/bin/python benchmarks/load.py [--chats 200] [--turns 50] [--clients 64]
                                        [--bot-chats 50] [--bot-turns 20] [--png benchmarks/load.png]

Prints progress, a table, writes a PNG and benchmarks/out/load.json. Exit status 1 when a
request failed or a message was lost or doubled.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "load-bench-token-3b8f0e"
# fmt: off
WORDS = [
    "lake", "tram", "river", "tea", "chess", "maps", "octopus", "garden", "train", "meeting", "walrus",
    "violin", "bread", "snow", "mountain", "lantern", "copper", "harbour", "owl", "library",
]
# fmt: on


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


SERVING = re.compile(r"^memory host serving .* on (http://\S+)$", re.M)


async def served_url(log: Path, proc: subprocess.Popen, timeout: float = 30) -> str:
    """The URL `chatbot memory serve --port 0` prints once it listens (the system picks the port,
    so no other process can take it between a guess and the bind)."""
    deadline = time.monotonic() + timeout
    while True:  # poll the log with a deadline until the host names its URL
        found = SERVING.search(log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found.group(1)
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit(f"the memory host did not start; see {log}")
        await asyncio.sleep(0.05)


def rss_kib(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of a process in KiB, from /proc."""
    out = {"VmRSS": 0, "VmHWM": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in out:
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out["VmRSS"], out["VmHWM"]


def disk_bytes(path: Path) -> int:
    """Bytes of every file under path."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def sentence(chat: int, i: int) -> str:
    """A plausible chat line that differs per chat and turn."""
    w = [WORDS[(chat * 7 + i * k) % len(WORDS)] for k in (1, 3, 5, 11)]
    if i % 10 == 3:
        return f"My name is User{chat} and I live in {w[0].title()}town"
    if i % 7 == 5:
        return f"do you remember what I said about the {w[1]} and the {w[2]}?"
    return f"turn {i}: today the {w[0]} was near the {w[1]}, and I thought about {w[2]} and {w[3]}"


@dataclass
class HostRun:
    turn_ms: list[float] = field(default_factory=list)
    reply_ms: list[float] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)  # seconds since start, per finished turn
    rss_samples: list[tuple[float, int]] = field(default_factory=list)
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    lost: int = 0
    doubled: int = 0
    usage_mismatch: int = 0
    compactions: int = 0
    peak_rss_kib: int = 0
    disk: int = 0
    chats_checked: int = 0


async def run_host_load(chats: int, turns: int, clients: int, workdir: Path) -> HostRun:
    """Part 1: the memory host alone, over HTTP."""
    data = workdir / "memory"
    chatbot = Path(sys.executable).with_name("chatbot")
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - the host writes to it until it stops, closed below
    proc = subprocess.Popen(
        [str(chatbot), "memory", "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(data)],
        env=dict(os.environ, MEMORY_API_TOKEN=TOKEN),
        stdout=log,
        stderr=log,
    )
    run = HostRun()
    base = await served_url(workdir / "serve.log", proc)
    # aiohttp's client: with 2 CPUs, httpx's per-request cost made the load generator,
    # not the host, the bottleneck (the host sat idle half the time under cProfile).
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        base,
        headers={"authorization": f"Bearer {TOKEN}"},
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=60),
    ) as client:
        deadline = time.monotonic() + 30
        while True:  # poll the port with a deadline until the host answers
            try:
                async with client.get("/health") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the memory host did not start; see serve.log")
            await asyncio.sleep(0.05)

        queue: asyncio.Queue[int] = asyncio.Queue()
        for c in range(chats):
            queue.put_nowait(c)
        total = chats * turns
        started = time.perf_counter()
        finished = asyncio.Event()

        def error(kind: str) -> None:
            run.errors += 1
            run.error_kinds[kind] = run.error_kinds.get(kind, 0) + 1

        async def post(path: str, body: dict, sink: list[float]) -> bool:
            t0 = time.perf_counter()
            try:
                async with client.post(path, json=body) as r:
                    await r.read()
                    status = r.status
            except (TimeoutError, aiohttp.ClientError) as err:
                error(type(err).__name__)
                return False
            sink.append((time.perf_counter() - t0) * 1000)
            if status != 200:
                error(f"HTTP {status}")
                return False
            return True

        async def worker() -> None:
            while True:
                try:
                    c = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                chat = f"load:{c}"
                for i in range(turns):
                    await post(
                        f"/v1/chats/{chat}/turn",
                        {
                            "text": sentence(c, i),
                            "author": f"User{c}",
                            "author_id": f"u{c}",
                            "message_id": f"u{i}",
                        },
                        run.turn_ms,
                    )
                    await post(
                        f"/v1/chats/{chat}/reply",
                        {
                            "text": f"Noted, User{c}: {WORDS[i % len(WORDS)]}.",
                            "tier": "standard",
                            "model": "instant",
                            "usage": {"prompt_tokens": 120, "completion_tokens": 12},
                            "latency_ms": 1.0,
                            "message_id": f"a{i}",
                        },
                        run.reply_ms,
                    )
                    run.done_at.append(time.perf_counter() - started)

        async def monitor() -> None:
            last = 0
            while not finished.is_set():
                now = time.perf_counter() - started
                run.rss_samples.append((now, rss_kib(proc.pid)[0]))
                done = len(run.done_at)
                if done - last >= total // 20 or (done == total and last != total):
                    last = done
                    print(
                        f"  host load: {done:6d}/{total} turns  {done / max(now, 1e-9):7.0f} turns/s  "
                        f"turn p50 {pct(run.turn_ms[-2000:], 50):5.1f} ms  errors {run.errors}",
                        flush=True,
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(finished.wait(), 0.25)

        mon = asyncio.create_task(monitor())
        await asyncio.gather(*(worker() for _ in range(clients)))
        run.wall_s = time.perf_counter() - started
        finished.set()
        await mon

        # Count every chat: what the host holds against what was sent.
        async def get(path: str) -> dict:
            async with client.get(path) as r:
                assert r.status == 200, (path, r.status)
                return await r.json()

        for c in range(chats):
            stats = await get(f"/v1/chats/load:{c}/stats")
            usage = await get(f"/v1/chats/load:{c}/usage")
            summary = await get(f"/v1/chats/load:{c}/summary")
            held = stats["total_messages"]
            run.lost += max(0, 2 * turns - held)
            run.doubled += max(0, held - 2 * turns)
            calls = sum(t["calls"] for t in usage["tiers"].values())
            run.usage_mismatch += abs(calls - turns)
            run.compactions += summary["compactions"]
            run.chats_checked += 1
    run.peak_rss_kib = rss_kib(proc.pid)[1]
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    log.close()
    if code != 0:
        print(f"  warning: the host exited with {code}")
    run.disk = disk_bytes(data)
    return run


@dataclass
class BotRun:
    handle_ms: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    lost: int = 0
    doubled: int = 0
    chats_checked: int = 0
    available: bool = True
    note: str = ""


async def run_bot_load(chats: int, turns: int, workdir: Path) -> BotRun:
    """Part 2: the bot's pipeline (router + embedded memory host over HTTP) with an instant model."""
    out = BotRun()
    try:
        from benchmarks.pipeline import InstantModel
        from bot.app import build_pipeline
        from bot.chat.types import IncomingMessage
        from bot.config import load_settings
    except Exception as err:  # another part of the project may not be there yet
        out.available, out.note = False, f"bot pipeline not available: {err}"
        return out
    settings = load_settings(env={}, env_file=None)
    total = chats * turns
    async with build_pipeline(settings, workdir / "bot", models={"standard": InstantModel()}) as router:
        started = time.perf_counter()
        done = 0

        async def chat_loop(c: int) -> None:
            nonlocal done
            for i in range(turns):
                msg = IncomingMessage(
                    chat_key=f"botload:{c}",
                    author=f"User{c}",
                    author_id=f"u{c}",
                    text=sentence(c, i),
                    message_id=f"m{i}",
                    platform="console",
                )
                t0 = time.perf_counter()
                try:
                    reply = await router.handle(msg)
                    if not reply.text:
                        out.errors += 1
                except Exception:
                    out.errors += 1
                out.handle_ms.append((time.perf_counter() - t0) * 1000)
                done += 1
                if done % max(1, total // 10) == 0:
                    now = time.perf_counter() - started
                    print(f"  bot pipeline: {done:5d}/{total} messages  {done / now:6.0f} msg/s", flush=True)

        await asyncio.gather(*(chat_loop(c) for c in range(chats)))
        out.wall_s = time.perf_counter() - started
        for c in range(chats):
            held = (await router.memory.stats(f"botload:{c}"))["total_messages"]
            out.lost += max(0, 2 * turns - held)
            out.doubled += max(0, held - 2 * turns)
            out.chats_checked += 1
    return out


def table(host: HostRun, bot: BotRun, args: argparse.Namespace) -> str:
    """The figures as a text table."""
    turns = len(host.done_at)
    rows = [
        (
            "scenario",
            f"memory host over HTTP: {args.chats} chats x {args.turns} turns (+ replies), "
            f"{args.clients} concurrent clients",
        ),
        ("turns completed", f"{turns} ({2 * turns} writes) in {host.wall_s:.1f} s"),
        ("throughput", f"{turns / host.wall_s:.0f} turns/s ({2 * turns / host.wall_s:.0f} requests/s)"),
        (
            "turn latency",
            f"p50 {pct(host.turn_ms, 50):.1f} ms, p99 {pct(host.turn_ms, 99):.1f} ms, "
            f"max {max(host.turn_ms, default=0):.1f} ms",
        ),
        ("reply latency", f"p50 {pct(host.reply_ms, 50):.1f} ms, p99 {pct(host.reply_ms, 99):.1f} ms"),
        ("errors", f"{host.errors} {host.error_kinds or ''}".strip()),
        (
            "messages lost / doubled",
            f"{host.lost} / {host.doubled} (counted in all {host.chats_checked} chats)",
        ),
        ("usage rows off", f"{host.usage_mismatch}"),
        ("compactions run meanwhile", f"{host.compactions}"),
        ("host RSS peak", f"{host.peak_rss_kib / 1024:.0f} MiB"),
        (
            "disk used",
            f"{host.disk / 1024 / 1024:.1f} MiB ({host.disk / max(1, args.chats) / 1024:.0f} KiB per chat)",
        ),
    ]
    if bot.available:
        n = len(bot.handle_ms)
        rows += [
            (
                "scenario",
                f"bot pipeline (router + embedded memory host, instant model): "
                f"{args.bot_chats} concurrent chats x {args.bot_turns} messages",
            ),
            ("messages answered", f"{n} in {bot.wall_s:.1f} s = {n / bot.wall_s:.0f} msg/s"),
            ("handle latency", f"p50 {pct(bot.handle_ms, 50):.1f} ms, p99 {pct(bot.handle_ms, 99):.1f} ms"),
            ("errors", f"{bot.errors}"),
            (
                "messages lost / doubled",
                f"{bot.lost} / {bot.doubled} (counted in all {bot.chats_checked} chats)",
            ),
        ]
    else:
        rows.append(("bot pipeline", bot.note))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def plot(host: HostRun, bot: BotRun, path: Path) -> None:
    """Latency distributions and throughput/RSS over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    for values, label in (
        (host.turn_ms, "host: turn"),
        (host.reply_ms, "host: reply"),
        (bot.handle_ms, "bot pipeline: handle"),
    ):
        if values:
            ordered = sorted(values)
            ax1.plot(ordered, [i / len(ordered) for i in range(len(ordered))], label=label)
    ax1.set_xscale("log")
    ax1.set_xlabel("latency (ms, log)")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("Latency CDF")
    ax1.grid(True, alpha=0.3)
    ax1.legend()
    if host.done_at:
        end = int(max(host.done_at)) + 1
        buckets = [0] * end
        for t in host.done_at:
            buckets[int(t)] += 1
        ax2.bar(range(end), buckets, width=1.0, color="tab:blue", alpha=0.6, label="turns/s")
        ax2.set_xlabel("seconds")
        ax2.set_ylabel("turns completed per second")
        ax3 = ax2.twinx()
        ax3.plot(
            [t for t, _ in host.rss_samples],
            [r / 1024 for _, r in host.rss_samples],
            color="tab:red",
            label="host RSS (MiB)",
        )
        ax3.set_ylabel("host RSS (MiB)")
        ax3.set_ylim(bottom=0)
        ax2.set_title(f"Memory host: {len(host.done_at)} turns, {host.errors} errors, {host.lost} lost")
        ax2.legend(loc="upper left")
        ax3.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def main() -> int:
    """Run both parts, print the table, write the PNG and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--bot-chats", type=int, default=50)
    parser.add_argument("--bot-turns", type=int, default=20)
    parser.add_argument("--png", type=Path, default=ROOT / "benchmarks" / "load.png")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "out" / "load.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="load-bench-") as tmp:
        work = Path(tmp)
        print(
            f"part 1: memory host, {args.chats} chats x {args.turns} turns, {args.clients} clients "
            f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)",
            flush=True,
        )
        host = await run_host_load(args.chats, args.turns, args.clients, work)
        print(f"part 2: bot pipeline, {args.bot_chats} chats x {args.bot_turns} messages", flush=True)
        bot = (
            await run_bot_load(args.bot_chats, args.bot_turns, work)
            if args.bot_chats
            else BotRun(available=False, note="skipped (--bot-chats 0)")
        )
    print()
    print(table(host, bot, args))
    plot(host, bot, args.png)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "host": {
                    "turns": len(host.done_at),
                    "wall_s": host.wall_s,
                    "turns_per_s": len(host.done_at) / host.wall_s,
                    "turn_p50_ms": pct(host.turn_ms, 50),
                    "turn_p99_ms": pct(host.turn_ms, 99),
                    "reply_p50_ms": pct(host.reply_ms, 50),
                    "reply_p99_ms": pct(host.reply_ms, 99),
                    "errors": host.errors,
                    "lost": host.lost,
                    "doubled": host.doubled,
                    "usage_mismatch": host.usage_mismatch,
                    "compactions": host.compactions,
                    "peak_rss_mib": host.peak_rss_kib / 1024,
                    "disk_mib": host.disk / 1024 / 1024,
                },
                "bot": {
                    "available": bot.available,
                    "messages": len(bot.handle_ms),
                    "wall_s": bot.wall_s,
                    "p50_ms": pct(bot.handle_ms, 50),
                    "p99_ms": pct(bot.handle_ms, 99),
                    "errors": bot.errors,
                    "lost": bot.lost,
                    "doubled": bot.doubled,
                    "note": bot.note,
                },
            },
            indent=2,
        )
    )
    print(f"\nwrote {args.png} and {args.json}")
    bad = host.errors or host.lost or host.doubled or bot.errors or bot.lost or bot.doubled
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
