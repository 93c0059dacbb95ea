"""CPU per turn at 10k messages, this tree against a git ref, in lock-step (A/B in one run).

    .venv/bin/python benchmarks/turn_ab.py --baseline-ref main --data ../shared/locomo/locomo-dev.json

On a shared machine one run's CPU per turn moves by +-25% with the load, more than most
changes. So the two engines run side by side: a child process per engine (the ref's
`memory_worker` exported with `git archive`, first on its path), each on its own copy of one
chat prefilled with N LoCoMo messages over HTTP and settled (its backlog compacted) by the
ref's code, then the same turns, turn i on one and then on the other (the order
alternating), so that the load hits both alike. `--mode http`: POST /turn to a local host
(EmbeddedMemoryHost) with an aiohttp client in the child's event loop, as in
memory_latency.py (the host's and the client's CPU both count); `--mode inproc`:
`ChatMemory.turn` on the chat's database file. Repeated `--repeats` times on fresh copies;
per turn the least CPU over the repeats, then the p50 and mean of those (and of all runs).
Each turn's retrieved messages (ids and scores) are compared between the two engines: the
run says how many turns differ (0 for a change that keeps every answer), and how many in
their ids alone (a change of bm25's statistics moves scores in far decimals, not rankings).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "turn-ab-" + "t" * 24
CHAT = "bench:turn-ab"


def _digest(answer: dict[str, Any]) -> str:
    """What two engines must agree on for a turn: the retrieved messages' ids and scores; then,
    after a space, their ids alone (a change of bm25's statistics moves scores, not rankings)."""
    retrieved = [(m["id"], m["score"]) for m in answer.get("retrieved") or []]
    ids = [m["id"] for m in answer.get("retrieved") or []]
    return " ".join(hashlib.sha256(json.dumps(x).encode()).hexdigest()[:16] for x in (retrieved, ids))


def _corpus(data: str) -> Any:
    sys.path.insert(0, str(Path(__file__).parent))
    import memory_latency

    return memory_latency.Corpus(data)


async def _prepare(data_dir: Path, data: str, n: int) -> None:
    """Import n messages into one chat of a host on `data_dir` and wait for its compaction."""
    corpus = _corpus(data)  # puts benchmarks/ on the path
    import aiohttp
    import memory_latency

    from memory_worker.local import EmbeddedMemoryHost

    async with EmbeddedMemoryHost(data_dir, token=TOKEN, retention=10 * n) as host:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(host.url, headers=headers) as http:
            for start in range(0, n, memory_latency.IMPORT_BATCH):
                batch = corpus.take(min(memory_latency.IMPORT_BATCH, n - start), "ab")
                async with http.post(f"/v1/chats/{CHAT}/import", json={"messages": batch}) as r:
                    r.raise_for_status()
            await memory_latency._settle(http, CHAT, n)


async def _serve_turns(data_dir: Path, data: str, n: int, turns: int, mode: str) -> None:
    """The child: on each line `i` of stdin, run turn i and print its CPU ms."""
    corpus = _corpus(data)
    corpus.take(n, "ab")  # the prefill's messages: the turns come after them
    batch = corpus.take(turns, "ab-turn")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def lines() -> Any:
        print("ready", flush=True)
        while line := (await reader.readline()).decode().strip():
            yield batch[int(line)]

    if mode == "inproc":
        from memory_engine import ChatMemory
        from memory_worker.local import SqliteStorage
        from memory_worker.local.chats import chat_file

        storage = SqliteStorage(data_dir / chat_file(CHAT))
        memory = ChatMemory(storage, retention=10 * n)
        async for m in lines():
            cpu = time.process_time()
            answer = memory.turn(
                m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"]
            )
            print((time.process_time() - cpu) * 1000, _digest(answer), flush=True)
        storage.close()
        return
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost

    async with EmbeddedMemoryHost(data_dir, token=TOKEN, retention=10 * n) as host:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(host.url, headers=headers) as http:
            async for m in lines():
                body = {k: m[k] for k in ("text", "author", "author_id", "message_id")}
                cpu = time.process_time()
                async with http.post(f"/v1/chats/{CHAT}/turn", json=body) as r:
                    raw = await r.read()
                spent = (time.process_time() - cpu) * 1000
                print(spent, _digest(json.loads(raw)), flush=True)


def _env(tree: Path | None) -> dict[str, str]:
    if tree is None:
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "memory_worker" / "src"), str(tree)])}


def _child(tree: Path | None, data: str, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--data", data, "--child", *args]
    # cwd outside the repository: the ref's tree, not this one, must be found first
    pipe = subprocess.PIPE
    return subprocess.Popen(cmd, stdin=pipe, stdout=pipe, text=True, env=_env(tree), cwd="/")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def main(argv: list[str] | None = None) -> int:
    """Run both engines in lock-step; print CPU ms per turn of each and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/locomo/locomo-dev.json"))
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--mode", choices=("http", "inproc"), default="http")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # data_dir prepare|http|inproc n turns
    args = parser.parse_args(argv)
    if args.child:
        data_dir, what, n, turns = args.child
        if what == "prepare":
            asyncio.run(_prepare(Path(data_dir), args.data, int(n)))
        else:
            asyncio.run(_serve_turns(Path(data_dir), args.data, int(n), int(turns), what))
        return 0

    warm = 5  # the first turns warm the caches: not counted
    total = args.turns + warm
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ref_tree = tmp / "ref"
        ref_tree.mkdir()
        export = ["git", "-C", str(ROOT), "archive", args.baseline_ref, "memory_worker"]
        archive = subprocess.run(export, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(ref_tree)], input=archive, check=True)
        prepared = tmp / "prepared"
        print(f"prefilling {args.size:,} messages with {args.baseline_ref}'s engine...", file=sys.stderr)
        prep = _child(ref_tree, args.data, str(prepared), "prepare", str(args.size), "0")
        if prep.wait():
            return 1
        engines = {args.baseline_ref: ref_tree, "this tree": None}
        cpu: dict[str, list[list[float]]] = {name: [[] for _ in range(total)] for name in engines}
        answers: dict[str, list[set[str]]] = {name: [set() for _ in range(total)] for name in engines}
        ranked: dict[str, list[set[str]]] = {name: [set() for _ in range(total)] for name in engines}
        for rep in range(args.repeats):
            procs = {}
            for k, (name, tree) in enumerate(engines.items()):
                copy = tmp / f"run-{rep}-{k}"
                shutil.copytree(prepared, copy)
                procs[name] = _child(tree, args.data, str(copy), args.mode, str(args.size), str(total))
            for proc in procs.values():
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            for i in range(total):
                names = list(procs) if (i + rep) % 2 else list(reversed(procs))
                for name in names:
                    proc = procs[name]
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(f"{i}\n")
                    proc.stdin.flush()
                    spent, digest, ids = proc.stdout.readline().split()
                    cpu[name][i].append(float(spent))
                    answers[name][i].add(digest)
                    ranked[name][i].add(ids)
            for proc in procs.values():
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait()
            print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
    summary = {}
    for name, per_turn in cpu.items():
        least = [min(v) for v in per_turn[warm:]]
        every = [x for v in per_turn[warm:] for x in v]
        summary[name] = {
            "p50_of_least": percentile(least, 50),
            "mean_of_least": sum(least) / len(least),
            "p50": percentile(every, 50),
            "mean": sum(every) / len(every),
        }
    print(
        f"CPU ms per turn, {args.mode}, {args.size:,} messages, {args.turns} turns x {args.repeats} "
        "(least of the repeats per turn: p50 / mean | every run: p50 / mean)"
    )
    for name, s in summary.items():
        least = f"{s['p50_of_least']:6.3f} / {s['mean_of_least']:6.3f}"
        every = f"{s['p50']:6.3f} / {s['mean']:6.3f}"
        print(f"{name:>12}: {least} | {every}")
    base, ours = summary[args.baseline_ref], summary["this tree"]
    differ = sum(a != b for a, b in zip(answers[args.baseline_ref], answers["this tree"], strict=True))
    moved = sum(a != b for a, b in zip(ranked[args.baseline_ref], ranked["this tree"], strict=True))
    print(
        f"turns whose retrieved messages (ids, scores) differ from {args.baseline_ref}'s: "
        f"{differ} of {total} "
        f"(their ids alone: {moved})"
    )
    print(
        f"this tree / {args.baseline_ref}: p50 {ours['p50_of_least'] / base['p50_of_least']:.3f}, "
        f"mean {ours['mean_of_least'] / base['mean_of_least']:.3f} (least of the repeats)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
