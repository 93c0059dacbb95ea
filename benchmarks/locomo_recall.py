"""Retrieval recall on LoCoMo through the memory worker's HTTP API, beside a rank-bm25 baseline.

    .venv/bin/python benchmarks/locomo_recall.py --data ../shared/locomo/locomo-dev.json

Each conversation is imported into a fresh chat of a local host (EmbeddedMemoryHost on a
temp dir) with POST /import (message_id = dia_id, author = speaker, ts from the session
date), then every question with evidence is sent to GET /search (k=3 and k=10).
Recall@k = |top-k ∩ evidence| / |evidence|, averaged over those questions, per category
and overall. The baseline is rank-bm25's BM25Okapi over a plain lower-case word split.

`--holdout` adds the leave-conversations-out check: the retrieval knobs are tuned on some
conversations in process and measured on the others, beside the shipped defaults.

`--pad-to N` adds the recall at a chat's size: each conversation is imported (in process)
between the other conversations' turns, N messages in all, and asked its own questions. A
LoCoMo conversation has ~600 turns, where few terms reach retrieval.COUNT_CAP or exhaust
SCORE_BUDGET; at 10k they bind, and only this figure sees what they cost.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from recall_ablation import unseen_recall
from recall_data import load, progress, questions, turns
from recall_report import chart, report_holdout, table
from recall_scoring import KS, Tally, fts5_plain_baseline, rank_bm25_baseline, sum_tallies

# What other benchmarks import from here (prompt_size.py).
__all__ = ["load", "main", "turns"]


# -- the memory worker over HTTP ---------------------------------------------------------


async def worker_over_http(convs: list[dict[str, Any]]) -> tuple[list[Tally], dict[str, Any]]:
    """Import every conversation into a local host and score its search route, per conversation."""
    import httpx

    from memory_worker.local import EmbeddedMemoryHost

    tallies: list[Tally] = []
    timing: dict[str, Any] = {"import_s": 0.0, "imported": 0, "search_ms": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedMemoryHost(Path(tmp)) as host:
            headers = {"authorization": f"Bearer {host.token}"}
            async with httpx.AsyncClient(base_url=host.url, headers=headers, timeout=60) as http:
                for c_no, conv in enumerate(convs, 1):
                    name = conv.get("sample_id", f"conv-{c_no}")
                    chat = f"locomo:{name}"
                    msgs = turns(conv)
                    started = time.perf_counter()
                    r = await http.post(f"/v1/chats/{chat}/import", json={"messages": msgs})
                    r.raise_for_status()
                    timing["import_s"] += time.perf_counter() - started
                    timing["imported"] += r.json()["imported"]
                    qs = questions(conv, {m["message_id"] for m in msgs})
                    tally = Tally()
                    for q_no, q in enumerate(qs, 1):
                        ranked: dict[int, list[str]] = {}
                        for k in KS:
                            started = time.perf_counter()
                            r = await http.get(
                                f"/v1/chats/{chat}/search", params={"q": q["question"], "k": k}
                            )
                            timing["search_ms"].append((time.perf_counter() - started) * 1000)
                            r.raise_for_status()
                            ranked[k] = [m["message_id"] for m in r.json()["results"]]
                        tally.add(q["category"], q["evidence"], ranked)
                        if q_no % 20 == 0 or q_no == len(qs):
                            progress(
                                f"[{c_no}/{len(convs)}] {name}: {len(msgs)} turns imported, "
                                f"question {q_no}/{len(qs)}"
                            )
                    tallies.append(tally)
    print(file=sys.stderr)
    return tallies, timing


def padded_recall(convs: list[dict[str, Any]], size: int) -> tuple[float, ...]:
    """Overall R@3/R@10 with each conversation padded to `size` messages by the others' turns.

    Half the padding comes before the conversation and half after, each padding turn with a
    message id of its own (the same turn may repeat), so only the conversation's own turns
    are evidence. In process, the shipped weights.
    """
    from memory_engine import ChatMemory
    from memory_worker.local import SqliteStorage

    total = Tally()
    for c_no, conv in enumerate(convs):
        own = turns(conv)
        others = [t for o, c in enumerate(convs) if o != c_no for t in turns(c)]
        pad = [
            dict(t, message_id=f"pad{n}-{t['message_id']}")
            for n, t in zip(range(max(0, size - len(own))), itertools.cycle(others), strict=False)
        ]
        half = len(pad) // 2
        msgs = pad[:half] + own + pad[half:]
        memory = ChatMemory(SqliteStorage(":memory:"), retention=10 * size)
        for start in range(0, len(msgs), 1000):
            memory.import_messages(msgs[start : start + 1000])
        for q_no, q in enumerate(questions(conv, {t["message_id"] for t in own}), 1):
            res = memory.search(q["question"], max(KS))["results"]
            total.add(q["category"], q["evidence"], [m["message_id"] for m in res])
            if q_no % 50 == 0:
                progress(f"padded to {size:,}: conversation {c_no + 1}/{len(convs)}, question {q_no}")
    print(file=sys.stderr)
    return total.recall()


def baseline_of(ref: str, data: str, unseen: bool, pad_to: int = 0) -> dict[str, Any]:
    """Dev (and with `unseen`, unseen-split) recall of the engine at git `ref`, this benchmark's code.

    REF's `memory_worker` is exported to a temp dir (git archive) and put first on the path
    of a child process that runs this file with --summary-json: the same questions and
    scoring, only the engine differs.
    """
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", ref, "memory_worker"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        out = Path(tmp) / "summary.json"
        cmd = [sys.executable, __file__, "--data", data, "--summary-json", str(out)]
        cmd += ["--png", str(Path(tmp) / "r.png")] + (["--unseen-only"] if unseen else [])
        cmd += ["--pad-to", str(pad_to)] if pad_to else []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([f"{tmp}/memory_worker/src", tmp])}
        subprocess.run(cmd, check=True, env=env)
        return dict(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; write the chart."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON (e.g. ../shared/locomo/locomo-dev.json)")
    parser.add_argument("--png", default=str(Path(__file__).with_name("locomo_recall.png")))
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="also the ablation rows, tuned on 3 conversations and measured on the other 2 (every split)",
    )
    parser.add_argument("--ablation-png", default=str(Path(__file__).with_name("locomo_ablation.png")))
    parser.add_argument(
        "--baseline-ref",
        help="also measure the engine at this git ref (e.g. main) in a child process, and print "
        "before (the ref) / after (this tree): dev recall, and with --holdout the unseen-split recall",
    )
    parser.add_argument(
        "--pad-to",
        type=int,
        default=0,
        help="also the recall with each conversation padded to this many messages by the others' turns",
    )
    parser.add_argument("--summary-json", help=argparse.SUPPRESS)  # the child of --baseline-ref
    parser.add_argument("--unseen-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    convs = load(args.data)
    print(f"{len(convs)} conversations from {args.data}", file=sys.stderr)
    tallies, timing = asyncio.run(worker_over_http(convs))
    if args.summary_json:  # the child of --baseline-ref: the figures the parent compares, nothing else
        import memory_engine

        print(f"baseline engine: {memory_engine.__file__}", file=sys.stderr)
        summary: dict[str, Any] = {"dev": sum_tallies(tallies).recall()}
        if args.unseen_only:
            summary["unseen"] = unseen_recall(convs)
        if args.pad_to:
            summary["padded"] = padded_recall(convs, args.pad_to)
        Path(args.summary_json).write_text(json.dumps(summary))
        return 0
    bm25_t, plain_t = Tally(), Tally()
    for n, conv in enumerate(convs, 1):
        progress(f"baselines {n}/{len(convs)}")
        msgs = turns(conv)
        qs = questions(conv, {m["message_id"] for m in msgs})
        bm25_t = bm25_t.merge(rank_bm25_baseline(msgs, qs))
        plain_t = plain_t.merge(fts5_plain_baseline(msgs, qs))
    print(file=sys.stderr)
    systems = {"memory worker": sum_tallies(tallies), "plain FTS5": plain_t, "rank-bm25": bm25_t}
    print()
    print(table(systems))
    lat = sorted(timing["search_ms"])
    print(
        f"\nimport: {timing['imported']} turns in {timing['import_s']:.2f} s "
        f"({timing['imported'] / max(timing['import_s'], 1e-9):,.0f} messages/s); "
        f"search over HTTP: p50 {lat[len(lat) // 2]:.2f} ms, p99 {lat[int(len(lat) * 0.99)]:.2f} ms"
    )
    chart(systems, Path(args.png))
    print(f"chart: {args.png}")

    unseen = report_holdout(convs, Path(args.ablation_png)) if args.holdout else None
    padded = padded_recall(convs, args.pad_to) if args.pad_to else None
    if padded is not None:
        r3, r10 = padded
        print(f"\neach conversation padded to {args.pad_to:,} messages: R@3/R@10 {r3:.4f}/{r10:.4f}")
    if args.baseline_ref:
        before = baseline_of(args.baseline_ref, args.data, args.holdout, args.pad_to)
        dev = sum_tallies(tallies).recall()
        print(f"\nbefore ({args.baseline_ref}) / after (this tree), R@3/R@10, same questions, same run:")
        print(f"  dev split:     {before['dev'][0]:.4f}/{before['dev'][1]:.4f} -> {dev[0]:.4f}/{dev[1]:.4f}")
        if unseen is not None:
            old = before["unseen"]
            print(f"  unseen splits: {old[0]:.4f}/{old[1]:.4f} -> {unseen[0]:.4f}/{unseen[1]:.4f}")
        if padded is not None:
            old = before["padded"]
            new = f"{padded[0]:.4f}/{padded[1]:.4f}"
            print(f"  padded to {args.pad_to:,}: {old[0]:.4f}/{old[1]:.4f} -> {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
