"""What compaction costs: disk per chat under the retention cap, and turn latency while it runs.

    .venv/bin/python benchmarks/compaction_cost.py [--data ../shared/locomo/locomo-dev.json]

1. Bytes on disk of one chat after 10,000 and 100,000 messages (imported, then compacted
   in the background by the offline summarizer until caught up), with the default
   retention cap (50,000) and, for comparison, with no cap.
2. p50/p99 of POST /turn on one chat: with nothing else running, with another chat's
   20,000-message backlog being compacted (the host's offline summarizer: a child process),
   the same with the summarizer's CPU work on the event loop (the seed's design, the
   baseline in the same run), and with a compaction waiting on a slow summarizer.
Prints a table and writes benchmarks/compaction_cost.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory_worker.local import EmbeddedMemoryHost  # noqa: E402


def locomo_texts(path: Path) -> list[str]:
    """Every turn of the LoCoMo file, in order (cycled by callers)."""
    data = json.loads(path.read_text())
    out = []
    for conv in data:
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            out += [t["text"] for t in c[f"session_{n}"]]
            n += 1
    return out


def chat_bytes(host: EmbeddedMemoryHost, chat: str) -> int:
    """Bytes of the chat's database files (db + WAL)."""
    path = host.host.store.path_for(chat)
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def fill(client: httpx.AsyncClient, chat: str, texts: list[str], n: int) -> None:
    """Import n messages (texts cycled) in batches, printing progress."""
    batch = 5000
    for start in range(0, n, batch):
        msgs = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "author": "A" if i % 2 == 0 else "assistant",
                "text": texts[i % len(texts)],
                "message_id": f"m{i}",
            }
            for i in range(start, min(n, start + batch))
        ]
        r = await client.post(f"/v1/chats/{chat}/import", json={"messages": msgs}, timeout=120)
        r.raise_for_status()
        print(f"\r  {chat}: imported {min(n, start + batch):,}/{n:,}", end="", flush=True)
    print()


async def caught_up(client: httpx.AsyncClient, chat: str, timeout: float = 1800) -> dict:
    """Wait until background compaction has summarized the backlog."""
    deadline = time.monotonic() + timeout
    while True:
        s = (await client.get(f"/v1/chats/{chat}/stats")).json()
        print(f"\r  {chat}: {s['active_messages']:,} messages left to summarize   ", end="", flush=True)
        if s["active_messages"] <= 25 or time.monotonic() > deadline:
            print()
            return s
        await asyncio.sleep(0.5)


async def disk_figures(texts: list[str]) -> list[tuple[str, int, int, int]]:
    """(setting, messages, kept, bytes) for 10k and 100k, capped and uncapped."""
    rows = []
    for retention, label in ((None, "cap 50,000 (default)"), (10**9, "no cap")):
        for n in (10_000, 100_000):
            with tempfile.TemporaryDirectory() as d:
                async with EmbeddedMemoryHost(Path(d), retention=retention) as host:
                    async with httpx.AsyncClient(
                        base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}
                    ) as c:
                        chat = f"bench:{n}"
                        await fill(c, chat, texts, n)
                        s = await caught_up(c, chat)
                    host.host.store.close()  # checkpoint the WAL: what stays on disk
                    rows.append((label, n, s["total_messages"], chat_bytes(host, chat)))
    return rows


async def turn_latency(
    client: httpx.AsyncClient, chat: str, texts: list[str], n: int, offset: int
) -> list[float]:
    """Milliseconds of n turns."""
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = await client.post(
            f"/v1/chats/{chat}/turn", json={"text": texts[(offset + i) % len(texts)], "author": "A"}
        )
        out.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    return out


def pct(values: list[float], q: float) -> float:
    """The q-th percentile."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


async def _on_the_loop(previous, messages):
    """The offline summarizer as the seed ran it: its CPU work on the host's event loop."""
    from memory_engine.compaction.compact import offline_summary

    return offline_summary(previous, messages)


async def _beside_a_backlog(texts: list[str], summarizer) -> list[float]:
    """Turns on a 10k-message chat while another chat's 20k-message backlog compacts."""
    with tempfile.TemporaryDirectory() as d:
        async with (
            EmbeddedMemoryHost(Path(d), summarizer=summarizer) as host,
            httpx.AsyncClient(base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}) as c,
        ):
            await fill(c, "bench:a", texts, 10_000)
            await caught_up(c, "bench:a")
            await fill(c, "bench:b", texts, 20_000)  # its compaction now churns in the background
            busy: list[float] = []
            while len(busy) < 200:
                busy += await turn_latency(c, "bench:a", texts, 20, 50_000 + len(busy))
                await c.post("/v1/chats/bench:a/compact")
            left = (await c.get("/v1/chats/bench:b/stats")).json()["active_messages"]
            print(f"  (bench:b still had {left:,} messages to summarize when the turns ended)")
            return busy


async def latency_figures(texts: list[str]) -> dict[str, list[float]]:
    """Turn latencies on a 10k-message chat: idle, beside a CPU-bound compaction, beside a waiting one."""
    results: dict[str, list[float]] = {}
    slow_gate = asyncio.Event()

    async def slow_summarizer(previous, messages):
        await slow_gate.wait()  # a summarizer that takes as long as the measurement
        from memory_engine.compaction.compact import offline_summary

        return offline_summary(previous, messages)

    with tempfile.TemporaryDirectory() as d:
        async with (
            EmbeddedMemoryHost(Path(d)) as host,
            httpx.AsyncClient(base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}) as c,
        ):
            await fill(c, "bench:a", texts, 10_000)
            await caught_up(c, "bench:a")
            idle = []
            for round_ in range(10):  # 20 turns stay under the threshold: no compaction runs
                idle += await turn_latency(c, "bench:a", texts, 20, 1000 * round_)
                await c.post("/v1/chats/bench:a/compact")
            results["no compaction in flight"] = idle
    # The host's default: the offline summarizer in a worker thread. The baseline, in the same
    # run: the seed's design, the same summarizer on the event loop.
    results["another chat's backlog compacting"] = await _beside_a_backlog(texts, None)
    results["the same, summarizer on the event loop (seed)"] = await _beside_a_backlog(texts, _on_the_loop)
    with tempfile.TemporaryDirectory() as d:
        async with (
            EmbeddedMemoryHost(Path(d), summarizer=slow_summarizer) as host,
            httpx.AsyncClient(base_url=host.url, headers={"Authorization": f"Bearer {host.token}"}) as c,
        ):
            await fill(c, "bench:a", texts, 10_000)  # its compaction waits on the summarizer
            results["own compaction waiting on the summarizer"] = await turn_latency(
                c, "bench:a", texts, 200, 7
            )
            slow_gate.set()
    return results


def plot(latencies: dict[str, list[float]], disk: list[tuple[str, int, int, int]], path: Path) -> None:
    """Box plot of turn latency and a bar chart of disk use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.boxplot(list(latencies.values()), showfliers=False)
    a.set_xticks(range(1, len(latencies) + 1), [k.replace(" ", "\n", 2) for k in latencies], fontsize=8)
    a.set_ylabel("POST /turn latency (ms)")
    a.set_title("Turn latency, 10k-message chat")
    labels = [f"{n // 1000}k\n{s.split(' (')[0]}" for s, n, _, _ in disk]
    b.bar(labels, [x / 2**20 for *_, x in disk], color=["tab:blue", "tab:blue", "tab:gray", "tab:gray"])
    b.set_ylabel("MiB on disk per chat")
    b.set_title("Disk per chat after compaction")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "locomo" / "locomo-dev.json")
    parser.add_argument("--skip-disk", action="store_true", help="only the latency figures")
    args = parser.parse_args()
    texts = locomo_texts(args.data)
    print(f"{len(texts):,} LoCoMo turns, cycled")
    print("Turn latency with and without compaction in flight:")
    lat = await latency_figures(texts)
    disk = [] if args.skip_disk else await disk_figures(texts)
    print("\n| turn on a 10k-message chat | p50 ms | p99 ms | turns |")
    print("|---|---:|---:|---:|")
    base = statistics.median(lat["no compaction in flight"])
    base99 = pct(lat["no compaction in flight"], 99)
    for name, values in lat.items():
        p50, p99 = pct(values, 50), pct(values, 99)
        print(f"| {name} | {p50:.2f} ({p50 / base:.2f}x) | {p99:.2f} ({p99 / base99:.2f}x) | {len(values)} |")
    if disk:
        print("\n| retention | messages written | messages kept | bytes on disk | bytes/kept msg |")
        print("|---|---:|---:|---:|---:|")
        for label, n, kept, size in disk:
            mib, per_kept = size / 2**20, size / max(kept, 1)
            print(f"| {label} | {n:,} | {kept:,} | {size:,} ({mib:.1f} MiB) | {per_kept:.0f} |")
        out = Path(__file__).with_name("compaction_cost.png")
        plot(lat, disk, out)
        print(f"\nplot: {out}")


if __name__ == "__main__":
    asyncio.run(main())
