"""A/B of the Worker on Pyodide: another commit's `memory_worker/src` against this checkout's.

    .venv/bin/python benchmarks/pyodide_ab.py --baseline-ref main [--n 10000] [--turns 300]

Two Pyodide hosts (`chatbot memory serve --runtime pyodide`: Node 22, the real workers SDK),
one running REF's `memory_worker/src` on REF's emulator (`memory_worker/pyodide`'s .mjs files,
from `git archive`, with this checkout's node_modules), one this checkout's; each chat
prefilled alike to N messages by POST /import and its compaction settled. Then the same
turns alternate between the two hosts (the order alternating too), so both see the same
moments of the machine's load. Prints each host's CPU ms per turn (Node's, from /proc; and
without what it spent while its compaction alarms ran, from the host's `stats`), p50 and mean
latency, and how many answers were identical byte for byte (timestamps aside).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from math import isnan
from math import nan as NAN
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from memory_latency import Corpus
from pyodide_latency import TOKEN, WARM_TURNS, batches_of, host_stats, prefill, process_cpu_s

from memory_worker.pyodide_runtime import HOST_SCRIPT, SRC_DIR, PyodideHost

ROOT = Path(__file__).parents[1]
TIMESTAMP = re.compile(rb"\d{4}-\d\d-\d\dT[\d:.]+Z")  # the server's own clock in answers


def checkout(ref: str, into: Path) -> tuple[Path, Path]:
    """`memory_worker/src` and the host script of a commit, extracted under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "memory_worker/src", "memory_worker/pyodide"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    host_dir = into / "memory_worker" / "pyodide"
    # The npm packages (Node, Pyodide) are this checkout's: only the emulator's own code differs.
    (host_dir / "node_modules").symlink_to((HOST_SCRIPT.parent / "node_modules").resolve())
    return into / "memory_worker" / "src", host_dir / HOST_SCRIPT.name


async def run(
    srcs: dict[str, tuple[Path, Path]], corpus: Corpus, n: int, turns: int, tmp: Path
) -> dict[str, Any]:
    """Both hosts prefilled alike; the same turns alternating; CPU, latencies, answers."""
    import aiohttp

    env = {"RETENTION_MESSAGES": str(10 * n)}
    hosts = {
        key: PyodideHost(tmp / f"host{i}", TOKEN, env=env, src_dir=src, host_script=script, control=True)
        for i, (key, (src, script)) in enumerate(srcs.items())
    }
    for host in hosts.values():
        await asyncio.to_thread(host.start)
    headers = {"authorization": f"Bearer {TOKEN}"}
    timeout = aiohttp.ClientTimeout(total=900)
    sessions = {k: aiohttp.ClientSession(h.url, headers=headers, timeout=timeout) for k, h in hosts.items()}
    chat = f"ab-{n}"
    try:
        batches = batches_of(corpus, n, "p")  # the same messages for both
        for key, session in sessions.items():
            await prefill(session, chat, batches, key)
        messages = corpus.take(turns + WARM_TURNS, "t")
        pids = {k: h.proc.pid for k, h in hosts.items() if h.proc is not None}
        cpu: dict[str, float] = {}
        alarms: dict[str, dict[str, Any]] = {}
        latencies: dict[str, list[float]] = {k: [] for k in hosts}
        answers: dict[str, list[bytes]] = {k: [] for k in hosts}
        keys = list(hosts)
        for i, m in enumerate(messages):
            if i == WARM_TURNS:
                # `stats` answers once no alarm runs: the CPU reads bracket whole alarms.
                alarms = {k: host_stats(h) for k, h in hosts.items()}
                cpu = {k: process_cpu_s(pid) for k, pid in pids.items()}
            body = {f: m[f] for f in ("text", "author", "author_id", "message_id")}
            for key in keys if i % 2 == 0 else keys[::-1]:
                started = time.perf_counter()
                async with sessions[key].post(f"/v1/chats/{chat}/turn", json=body) as r:
                    data = await r.read()
                elapsed = (time.perf_counter() - started) * 1000
                r.raise_for_status()
                if i >= WARM_TURNS:
                    latencies[key].append(elapsed)
                    answers[key].append(TIMESTAMP.sub(b"T", data))
        end = {k: host_stats(h) for k, h in hosts.items()}
        cpu_ms = {k: (process_cpu_s(pid) - cpu[k]) * 1000 / turns for k, pid in pids.items()}
        # An emulator older than these counters (REF's) reports none: NaN.
        alarm_ms = {
            k: (end[k].get("alarm_cpu_ms", NAN) - alarms[k].get("alarm_cpu_ms", 0)) / turns for k in hosts
        }
        alarm_count = {k: end[k].get("alarms", 0) - alarms[k].get("alarms", 0) for k in hosts}
    finally:
        for session in sessions.values():
            await session.close()
        for host in hosts.values():
            host.stop()
    same = sum(a == b for a, b in zip(*answers.values(), strict=True))
    return {
        "cpu_ms": cpu_ms,
        "alarm_ms": alarm_ms,
        "alarms": alarm_count,
        "latencies": latencies,
        "identical": same,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: --baseline-ref, --n, --turns, --data."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", default="main", help="the commit whose memory_worker/src is A")
    parser.add_argument("--data", default=str(ROOT.parent / "shared/locomo/locomo-dev.json"))
    parser.add_argument("--n", type=int, default=10_000, help="messages in each chat")
    parser.add_argument("--turns", type=int, default=300, help="turns measured on each host")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        srcs = {
            args.baseline_ref: checkout(args.baseline_ref, tmp / "ref"),
            "this checkout": (SRC_DIR, HOST_SCRIPT),
        }
        out = asyncio.run(run(srcs, Corpus(args.data), args.n, args.turns, tmp))
    for key in srcs:
        lat = out["latencies"][key]
        cpu_ms = out["cpu_ms"][key]
        alarm_ms = out["alarm_ms"][key]
        without = (
            "its emulator counts no alarms"
            if isnan(alarm_ms)
            else f"{cpu_ms - alarm_ms:5.2f} without its {out['alarms'][key]} compaction alarms"
        )
        print(
            f"{key:>16}: CPU {cpu_ms:6.2f} ms a turn ({without}), p50 {statistics.median(lat):6.2f} ms, "
            f"mean {statistics.mean(lat):6.2f} ms"
        )
    print(
        f"identical answers: {out['identical']}/{args.turns} ({args.turns} turns at N={args.n:,}); "
        f"load {load:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
