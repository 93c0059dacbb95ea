"""Writes under load while `chatbot memory serve` is SIGKILLed and restarted: what a crash costs.

CHATS chats write at once through CLIENTS connections (each turn followed by its reply, every
write carrying a message_id). After a quarter, a half and three quarters of the writes were
acknowledged (`--kills 3`), the host's process group gets SIGKILL and the host is started again
at once on the same port. A client retries what was not acknowledged, with the same
message_id, after 10 ms, doubling up to 80 ms, until it is: a write's latency runs from its
first attempt to its acknowledgement, so the writes caught by a crash wait for the restart.
The p99 is theirs when more than 1 % of the writes are (the defaults: 3 x 32 of 2,560).

Afterwards every chat is counted: nothing lost, nothing doubled. `--bytecode` runs compiled
copies of the checkouts, as installed (see host_start.py).

    .venv/bin/python benchmarks/load_kills.py [--chats 32] [--turns 40] [--kills 3]
                                              [--compare /path/to/other/checkout]

With `--compare`, the same run is made on the other checkout's host (its code, this
interpreter's packages), the two alternating `--rounds` times (the machine's load changes
over a minute): each checkout's writes of all its rounds are pooled, with their ratios. Exit status 1
when a write was lost or doubled.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.host_start import compiled_copy  # noqa: E402 - after the path

TOKEN = "load-kills-token-6c1d0b"
# A client's pause before it retries a write that was not acknowledged: 10 ms, doubling up to
# 80 ms (32 clients retrying every few ms would take the CPU the restarting host needs).
RETRY_FIRST_S, RETRY_MAX_S = 0.01, 0.08


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def free_port() -> int:
    """A port free now (the host binds it again at each restart)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Run:
    checkout: Path
    write_ms: list[float] = field(default_factory=list)
    restart_ms: list[float] = field(default_factory=list)  # SIGKILL -> the next acknowledged write
    retries: int = 0
    kills: int = 0
    lost: int = 0
    doubled: int = 0
    wall_s: float = 0.0

    def add(self, other: Run) -> None:
        """Pool another run's figures into this one."""
        self.write_ms += other.write_ms
        self.restart_ms += other.restart_ms
        for name in ("retries", "kills", "lost", "doubled", "wall_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Host:
    """`chatbot memory serve` of one checkout on a fixed port, killable and restartable."""

    def __init__(self, root: Path, data: Path, port: int):
        self.root, self.data, self.port = root, data, port
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Spawn the host (its code first on sys.path; it runs in its own process group)."""
        path = os.pathsep.join([str(self.root), str(self.root / "memory_worker" / "src")])
        env = dict(os.environ, MEMORY_API_TOKEN=TOKEN, PYTHONPATH=path)
        env.pop("SUMMARY_BASE_URL", None)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "memory",
                "serve",
                "--port",
                str(self.port),
                "--data",
                str(self.data),
            ],
            env=env,
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the host's process group (its summarizer child too) and reap it."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        """SIGTERM: the host's clean stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


async def run_once(
    checkout: Path, root: Path, chats: int, turns: int, clients: int, kills: int, work: Path
) -> Run:
    """One run of `checkout`'s host, from its code at `root` (the checkout, or a compiled copy)."""
    run = Run(checkout)
    host = Host(root, work / "memory", free_port())
    url = f"http://127.0.0.1:{host.port}"
    total = chats * turns * 2
    points = [total * (k + 1) // (kills + 1) for k in range(kills)]
    acked = 0
    acked_event = asyncio.Event()
    killed_at: float | None = None
    host.start()
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=60)
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(url, headers=headers, connector=connector, timeout=timeout) as client:

        async def send(path: str, body: dict) -> None:
            """POST until acknowledged (the same message_id each time); its latency recorded."""
            nonlocal acked, killed_at
            first = time.perf_counter()
            pause = RETRY_FIRST_S
            while True:
                try:
                    async with client.post(path, json=body) as r:
                        await r.read()
                        if r.status == 200:
                            break
                        assert r.status >= 500, (path, r.status)
                except (aiohttp.ClientError, TimeoutError):
                    pass
                run.retries += 1
                await asyncio.sleep(pause)  # a client's retry pace, not a wait for an event
                pause = min(RETRY_MAX_S, pause * 2)
            now = time.perf_counter()
            run.write_ms.append((now - first) * 1000)
            if killed_at is not None:
                run.restart_ms.append((now - killed_at) * 1000)
                killed_at = None
            acked += 1
            acked_event.set()

        async def chat(c: int) -> None:
            for i in range(turns):
                text = f"turn {i} of chat {c}: the lantern by the harbour {i % 7}"
                await send(f"/v1/chats/load:{c}/turn", {"text": text, "author": "u", "message_id": f"u{i}"})
                await send(
                    f"/v1/chats/load:{c}/reply",
                    {"text": f"reply {i}", "tier": "fast", "model": "m", "message_id": f"a{i}"},
                )

        async def killer() -> None:
            nonlocal killed_at
            for point in points:
                while acked < point:
                    acked_event.clear()
                    await acked_event.wait()
                host.kill()
                run.kills += 1
                killed_at = time.perf_counter()
                host.start()

        # The clock starts once the host took a first write: its first start is not a crash.
        await send("/v1/chats/warmup/turn", {"text": "hello", "author": "u", "message_id": "w"})
        run.write_ms.clear()
        acked = 0
        started = time.perf_counter()
        semaphore = asyncio.Semaphore(clients)

        async def limited(c: int) -> None:
            async with semaphore:
                await chat(c)

        kill_task = asyncio.create_task(killer())
        await asyncio.gather(*(limited(c) for c in range(chats)))
        run.wall_s = time.perf_counter() - started
        await kill_task
        for c in range(chats):
            async with client.get(f"/v1/chats/load:{c}/stats") as r:
                held = (await r.json())["total_messages"]
            run.lost += max(0, 2 * turns - held)
            run.doubled += max(0, held - 2 * turns)
    host.stop()
    return run


def report(runs: list[Run], chats: int, turns: int) -> str:
    """The figures, and this checkout's against the compared one's."""
    lines = [
        f"{chats} chats x {turns} turns + replies ({2 * chats * turns} writes), "
        f"the host SIGKILLed {runs[0].kills}x in all (rounds pooled) and restarted at once",
        "",
        f"{'checkout':40s} {'p50':>8s} {'p99':>8s} {'max':>8s} {'restart':>9s} {'retries':>8s} "
        f"{'wall':>7s} {'lost':>5s} {'doubled':>7s}",
    ]
    for r in runs:
        restart = sorted(r.restart_ms)[len(r.restart_ms) // 2] if r.restart_ms else float("nan")
        lines.append(
            f"{str(r.checkout)[-40:]:40s} {pct(r.write_ms, 50):6.1f}ms {pct(r.write_ms, 99):6.0f}ms "
            f"{max(r.write_ms):6.0f}ms {restart:7.0f}ms {r.retries:8d} {r.wall_s:6.1f}s "
            f"{r.lost:5d} {r.doubled:7d}"
        )
    if len(runs) == 2:
        a, b = runs
        lines.append(
            f"this / compared: p50 {pct(a.write_ms, 50) / pct(b.write_ms, 50):.2f}, "
            f"p99 {pct(a.write_ms, 99) / pct(b.write_ms, 99):.2f}"
        )
    lines.append("restart: median time from a SIGKILL to the next acknowledged write; wall: all rounds")
    return "\n".join(lines)


def main() -> int:
    """Run the scenario (and the compared checkout's) and print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chats", type=int, default=32)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another checkout (e.g. main) to run alternately")
    parser.add_argument("--rounds", type=int, default=1, help="runs per checkout, alternating")
    parser.add_argument(
        "--bytecode", action="store_true", help="run compiled copies of the checkouts, as installed"
    )
    args = parser.parse_args()
    roots = [ROOT] + ([args.compare.resolve()] if args.compare else [])
    runs = [Run(root) for root in roots]
    with tempfile.TemporaryDirectory() as code:
        where = {
            r: compiled_copy(r, Path(code) / str(i)) if args.bytecode else r for i, r in enumerate(roots)
        }
        for i in range(args.rounds):
            for pooled in runs:
                with tempfile.TemporaryDirectory() as tmp:
                    print(f"round {i + 1}: {pooled.checkout} ...", flush=True)
                    one = asyncio.run(
                        run_once(
                            pooled.checkout,
                            where[pooled.checkout],
                            args.chats,
                            args.turns,
                            args.clients,
                            args.kills,
                            Path(tmp),
                        )
                    )
                pooled.add(one)
    print(("compiled copies (as installed)" if args.bytecode else "from source") + ":")
    print(report(runs, args.chats, args.turns))
    return 1 if any(r.lost or r.doubled for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
