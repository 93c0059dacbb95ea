"""Per-turn latency of the memory (record + retrieve + prompt) at 1k, 10k and 100k messages.

    .venv/bin/python benchmarks/memory_latency.py --data ../shared/locomo/locomo-dev.json

Three designs, measured in the same run on the same LoCoMo turns (cycled):
- in process: `ChatMemory.turn` over `SqliteStorage` (a file, WAL), no HTTP;
- over HTTP: POST /v1/chats/{chat}/turn to a local host (EmbeddedMemoryHost on a temp dir),
  the chat prefilled with POST /import (which also gives the import throughput);
- the seed's design: a BM25 index kept as one JSON blob in SQLite that is loaded, extended,
  rebuilt with rank-bm25, queried and saved on every message. It is slow, so only a few
  turns are measured at large N (the table says how many).
Over HTTP, the largest size is also measured right after its import, without waiting for
the background compaction of the imported history (a fresh chat, same N).
Also measured: the full-text index's bytes per message (SQLite's dbstat over the
messages_fts tables), beside the previous design's index (one previous turn as context,
no after-context, no dates) built from the same messages in the same run.
Also measured (`--parts host`): the same turns to `chatbot memory serve` of this checkout in
a process of its own, its CPU read from its own CPU clock around each turn: what the memory
worker spends per turn (its HTTP server included), without the client's share of the round
trip that the one-process HTTP figure also counts.
Also measured (`--parts lockstep`): the seed's turns and ours over HTTP interleaved (each seed
turn followed by 15 of ours), so that the seed/HTTP ratio is not a ratio of two loads.
Also measured (`--parts split`): our turns over HTTP alternating with the engine's own
`ChatMemory.turn` on the same chat in the same process: what the host and HTTP add.
Also measured: a bare FTS5 design (insert + OR top-3 lookup, in process; `bare_fts5`), its
OR over the message's non-stopword tokens, and again over all of them.
Prints a table with p50/p99 and the ratios; writes a PNG of latency vs N (log axes).
`--parts` runs only some designs (a 100k run is slow), e.g. the 10k ratios alone:

    .venv/bin/python benchmarks/memory_latency.py --sizes 10000 --parts http,host,lockstep,inproc,seed,bare
    .venv/bin/python benchmarks/memory_latency.py --sizes 100000 --parts after-import,seed
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from latency_baselines import bare_fts5, previous_design, seed_design
from latency_corpus import IMPORT_BATCH, Corpus, percentile
from latency_ours import AFTER_IMPORT, host_alone, in_process, lockstep, over_http, split
from latency_ours import settle as _settle  # the name turn_ab.py calls it by
from latency_report import chart, goals, report

# What other benchmarks import from here (turn_ab.py, pyodide_latency.py, pyodide_ab.py).
__all__ = ["IMPORT_BATCH", "Corpus", "_settle", "main", "percentile"]

SIZES = (1_000, 10_000, 100_000)
# Turns measured per size for the seed's design (each one rebuilds the whole index).
# 20 at 10k: over 8, the seed's p50 moved between 330 and 520 CPU ms from run to run, and the
# seed/HTTP ratio with it.
SEED_TURNS = {1_000: 30, 10_000: 20, 100_000: 3}


PARTS = ("http", "host", "lockstep", "split", "after-import", "previous", "inproc", "seed", "bare")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared/locomo/locomo-dev.json"))
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="comma-separated chat sizes")
    parser.add_argument("--turns", type=int, default=300, help="turns measured per size (ours)")
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated, of {','.join(PARTS)} (default all; the plot needs http, inproc and seed): "
        "e.g. --sizes 10000 --parts http,inproc,seed,bare for the 10k ratios only, "
        "--sizes 100000 --parts after-import,seed for the turn right after a 100k import",
    )
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
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"unknown parts: {', '.join(sorted(parts - set(PARTS)))}")

    corpus = Corpus(args.data)
    print(f"{len(corpus.turns)} LoCoMo turns, cycled; sizes {sizes}; parts {sorted(parts)}", file=sys.stderr)
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    http: dict[Any, list[float]] = {}
    imports: dict[str, Any] = {}
    compared: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if parts & {"http", "after-import"}:
            http, imports = asyncio.run(
                over_http(
                    corpus,
                    sizes if "http" in parts else (),
                    args.turns,
                    tmp,
                    max(sizes) if "after-import" in parts else None,
                )
            )
        if "host" in parts:
            asyncio.run(host_alone(corpus, sizes, args.turns, tmp))
        if "lockstep" in parts:
            for n in sizes:
                asyncio.run(lockstep(corpus, n, SEED_TURNS.get(n, 3), tmp))
        if "split" in parts:
            for n in sizes:
                asyncio.run(split(corpus, n, args.turns, tmp))
        if "previous" in parts:
            compared = previous_design(corpus, tmp)
        for n in sizes:
            row: dict[str, Any] = {"n": n, "http": http.get(n)}
            if "inproc" in parts:
                row["inproc"], row["index"] = in_process(corpus, n, args.turns, tmp)
            if "seed" in parts:
                row["seed"] = seed_design(corpus, n, SEED_TURNS.get(n, 3), tmp)
            if "bare" in parts:
                row["bare"] = bare_fts5(corpus, n, args.turns, tmp)
                row["bare-all"] = bare_fts5(corpus, n, args.turns, tmp, stopwords=True)
            rows.append(row)

    report(rows, http, imports, compared, args.turns)
    print(
        f"machine load (1-min average) at start / end: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    goals(rows)
    if all(r.get(k) for r in rows for k in ("http", "inproc", "seed")) and AFTER_IMPORT in http:
        chart(rows, Path(args.png), http[AFTER_IMPORT])
        print(f"plot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
