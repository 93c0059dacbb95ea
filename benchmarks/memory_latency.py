"""Per-turn latency of the memory (record + retrieve + prompt) at 1k, 10k and 100k messages.

    .venv/bin/python benchmarks/memory_latency.py --data ../shared/locomo/locomo-dev.json

Three designs, measured in the same run on the same LoCoMo turns (cycled):
- in process: `ChatMemory.turn` over `SqliteStorage` (a file, WAL), no HTTP;
- over HTTP: POST /v1/chats/{chat}/turn to a local host (EmbeddedMemoryHost on a temp dir),
  the chat prefilled with POST /import (which also gives the import throughput);
- the seed's design: a BM25 index kept as one JSON blob in SQLite that is loaded, extended,
  rebuilt with rank-bm25, queried and saved on every message. It is slow, so only a few
  turns are measured at large N (the table says how many).
Prints a table with p50/p99 and the ratios; writes a PNG of latency vs N (log axes).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from locomo_recall import _words, load, turns

SIZES = (1_000, 10_000, 100_000)
IMPORT_BATCH = 5_000
# Turns measured per size for the seed's design (each one rebuilds the whole index).
SEED_TURNS = {1_000: 30, 10_000: 8, 100_000: 3}


def _progress(text: str) -> None:
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def _done() -> None:
    print(file=sys.stderr)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; the max for small samples."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class Corpus:
    """LoCoMo turns cycled forever, each with a fresh message_id."""

    def __init__(self, data: str):
        self.turns = [t for conv in load(data) for t in turns(conv)]
        self.cycle: Iterator[dict[str, Any]] = itertools.cycle(self.turns)
        self.n = 0

    def take(self, count: int, prefix: str) -> list[dict[str, Any]]:
        """The next `count` turns as import messages with unique message ids."""
        out = []
        for _ in range(count):
            t = next(self.cycle)
            self.n += 1
            out.append(
                {
                    "role": "user",
                    "text": t["text"],
                    "author": t["author"],
                    "author_id": t["author"].lower(),
                    "message_id": f"{prefix}-{self.n}",
                    "ts": t["ts"],
                }
            )
        return out


# -- in process --------------------------------------------------------------------------


def in_process(corpus: Corpus, n: int, turns_measured: int, tmp: Path) -> list[float]:
    """Turn latencies (ms) of ChatMemory over SqliteStorage after prefilling n messages."""
    from memory_engine import ChatMemory

    from memory_worker.local import SqliteStorage

    storage = SqliteStorage(tmp / f"inproc-{n}.sqlite3")
    memory = ChatMemory(storage, retention=10 * n)
    done = 0
    while done < n:
        batch = corpus.take(min(IMPORT_BATCH, n - done), f"p{n}")
        memory.import_messages(batch)
        done += len(batch)
        _progress(f"in process, N={n:,}: prefilled {done:,}")
    out = []
    for i, m in enumerate(corpus.take(turns_measured + 5, f"pt{n}")):
        started = time.perf_counter()
        memory.turn(m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"])
        if i >= 5:  # the first few warm the caches
            out.append((time.perf_counter() - started) * 1000)
        if i % 25 == 0:
            _progress(f"in process, N={n:,}: turn {i}/{turns_measured + 5}")
    storage.close()
    _done()
    return out


# -- over HTTP ---------------------------------------------------------------------------


async def over_http(
    corpus: Corpus, sizes: tuple[int, ...], turns_measured: int, tmp: Path
) -> tuple[dict[int, list[float]], dict[str, float]]:
    """Turn latencies (ms) over HTTP per size, and the import throughput of the prefill."""
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost

    results: dict[int, list[float]] = {}
    rates: dict[int, float] = {}
    imported, import_s = 0, 0.0
    # Retention above the largest size: the point is N messages searchable in one chat.
    async with EmbeddedMemoryHost(tmp / "host", retention=10 * max(sizes)) as host:
        headers = {"authorization": f"Bearer {host.token}"}
        # aiohttp's client: about 0.4 ms a round trip here, httpx's about 1.2 ms; the client
        # shares the event loop with the host, so its cost would count against the worker.
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(host.url, headers=headers, timeout=timeout) as http:
            for n in sizes:
                chat = f"bench:latency-{n}"
                done, size_s = 0, 0.0
                while done < n:
                    batch = corpus.take(min(IMPORT_BATCH, n - done), f"h{n}")
                    started = time.perf_counter()
                    async with http.post(f"/v1/chats/{chat}/import", json={"messages": batch}) as r:
                        r.raise_for_status()
                        answer = await r.json()
                    import_s += time.perf_counter() - started
                    size_s += time.perf_counter() - started
                    imported += answer["imported"]
                    done += len(batch)
                    _progress(
                        f"over HTTP, N={n:,}: imported {done:,} "
                        f"({imported / import_s:,.0f} messages/s so far)"
                    )
                rates[n] = n / size_s
                await _settle(http, chat, n)
                out = []
                for i, m in enumerate(corpus.take(turns_measured + 5, f"ht{n}")):
                    body = {
                        "text": m["text"],
                        "author": m["author"],
                        "author_id": m["author_id"],
                        "message_id": m["message_id"],
                    }
                    started = time.perf_counter()
                    async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
                        await r.read()
                    elapsed = (time.perf_counter() - started) * 1000
                    r.raise_for_status()
                    if i >= 5:
                        out.append(elapsed)
                    if i % 25 == 0:
                        _progress(f"over HTTP, N={n:,}: turn {i}/{turns_measured + 5}")
                results[n] = out
                _done()
    return results, {"imported": imported, "seconds": import_s, "rates": rates}


async def _settle(http: Any, chat: str, n: int, limit_s: float = 600) -> None:
    """Wait until the background compaction of the imported history has caught up."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        async with http.get(f"/v1/chats/{chat}/stats") as r:
            stats = await r.json()
        if stats["active_messages"] <= 30:
            return
        _progress(
            f"over HTTP, N={n:,}: background compaction, "
            f"{stats['active_messages']:,} messages left to summarize"
        )
        await asyncio.sleep(0.5)


# -- the seed's design -------------------------------------------------------------------


class SeedBlobIndex:
    """The seed's memory: the whole BM25 corpus as one JSON blob, rebuilt on every message."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT)")

    def prefill(self, messages: list[dict[str, Any]]) -> None:
        """Store the blob for these messages at once (not timed)."""
        blob = {
            "ids": [m["message_id"] for m in messages],
            "texts": [m["text"] for m in messages],
            "docs": [_words(m["text"]) for m in messages],
        }
        self.db.execute("INSERT OR REPLACE INTO kv VALUES ('bm25', ?)", (json.dumps(blob),))

    def turn(self, message: dict[str, Any], k: int = 3) -> list[str]:
        """Load, extend, rebuild, query and save: what the seed did per message."""
        from rank_bm25 import BM25Okapi

        blob = json.loads(self.db.execute("SELECT value FROM kv WHERE key = 'bm25'").fetchone()[0])
        query = _words(message["text"])
        blob["ids"].append(message["message_id"])
        blob["texts"].append(message["text"])
        blob["docs"].append(query)
        bm25 = BM25Okapi([d or [""] for d in blob["docs"]])
        scores = bm25.get_scores(query)
        best = sorted(range(len(scores) - 1), key=lambda i: -scores[i])[:k]
        self.db.execute("UPDATE kv SET value = ? WHERE key = 'bm25'", (json.dumps(blob),))
        return [blob["texts"][i] for i in best]


def seed_design(corpus: Corpus, n: int, turns_measured: int, tmp: Path) -> list[float]:
    """Turn latencies (ms) of the seed's JSON-blob BM25 index at n messages."""
    seed = SeedBlobIndex(tmp / f"seed-{n}.sqlite3")
    _progress(f"seed design, N={n:,}: building the blob")
    seed.prefill(corpus.take(n, f"s{n}"))
    out = []
    for i, m in enumerate(corpus.take(turns_measured, f"st{n}")):
        _progress(f"seed design, N={n:,}: turn {i + 1}/{turns_measured}")
        started = time.perf_counter()
        seed.turn(m)
        out.append((time.perf_counter() - started) * 1000)
    seed.db.close()
    _done()
    return out


# -- output ------------------------------------------------------------------------------


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    """Latency vs N on log axes: p50 (solid) and p99 (dashed) per design."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, colour in (
        ("http", "memory worker over HTTP", "tab:blue"),
        ("inproc", "memory engine in process", "tab:green"),
        ("seed", "seed: JSON blob + rank-bm25 rebuild", "tab:red"),
    ):
        ax.plot(ns, [percentile(r[key], 50) for r in rows], "o-", color=colour, label=f"{label} p50")
        ax.plot(
            ns, [percentile(r[key], 99) for r in rows], "x--", color=colour, alpha=0.6, label=f"{label} p99"
        )
    ax.axhline(5, color="grey", lw=0.8, ls=":")
    ax.axhline(10, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("messages in the chat")
    ax.set_ylabel("per-turn latency (ms): record + retrieve + prompt")
    ax.set_title("Memory turn latency vs chat size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared/locomo/locomo-dev.json"))
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="comma-separated chat sizes")
    parser.add_argument("--turns", type=int, default=300, help="turns measured per size (ours)")
    parser.add_argument("--png", default=str(Path(__file__).with_name("memory_latency.png")))
    parser.add_argument(
        "--runtime",
        choices=("cpython", "pyodide"),
        default="cpython",
        help="pyodide: the Worker on Pyodide beside the local host at 10k messages (pyodide_latency.py)",
    )
    args = parser.parse_args(argv)
    if args.runtime == "pyodide":
        import pyodide_latency

        return pyodide_latency.main(["--data", args.data, "--turns", str(min(args.turns, 200))])
    sizes = tuple(int(s) for s in args.sizes.split(","))

    corpus = Corpus(args.data)
    print(f"{len(corpus.turns)} LoCoMo turns, cycled; sizes {sizes}", file=sys.stderr)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        http, imports = asyncio.run(over_http(corpus, sizes, args.turns, tmp))
        for n in sizes:
            rows.append(
                {
                    "n": n,
                    "http": http[n],
                    "inproc": in_process(corpus, n, args.turns, tmp),
                    "seed": seed_design(corpus, n, SEED_TURNS.get(n, 3), tmp),
                }
            )

    print()
    head = (
        f"{'N':>8} | {'in process p50':>14} {'p99':>6} | {'HTTP p50':>8} {'p99':>6} | "
        f"{'seed p50':>9} {'p99':>8} {'turns':>5} | {'seed/HTTP':>9} {'seed/in-proc':>12}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ip, hp, sp = (percentile(r[k], 50) for k in ("inproc", "http", "seed"))
        print(
            f"{r['n']:>8,} | {ip:>14.2f} {percentile(r['inproc'], 99):>6.2f} | "
            f"{hp:>8.2f} {percentile(r['http'], 99):>6.2f} | "
            f"{sp:>9.1f} {percentile(r['seed'], 99):>8.1f} {len(r['seed']):>5} | "
            f"{sp / hp:>8.0f}x {sp / ip:>11.0f}x"
        )
    print(
        f"(latencies in ms; ours over {args.turns} turns per size, the seed's over the few "
        "turns shown, each rebuilding its whole index)"
    )
    rate = imports["imported"] / imports["seconds"]
    print(
        f"import over HTTP: {imports['imported']:,} messages in {imports['seconds']:.1f} s = "
        f"{rate:,.0f} messages/s into one chat (batches of {IMPORT_BATCH:,}); per chat: "
        + ", ".join(f"{n:,}: {r:,.0f}/s" for n, r in imports["rates"].items())
    )
    print(
        f"machine load (1-min average) at start / end: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    chart(rows, Path(args.png))
    print(f"plot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
