"""The Worker on its real runtime: Pyodide cold start, and turn latency beside the local host.

    .venv/bin/python benchmarks/pyodide_latency.py [--n 10000] [--turns 200] [--cold-starts 3]
    .venv/bin/python benchmarks/memory_latency.py --runtime pyodide   (the same, from there)

In one run, on the same LoCoMo turns: `chatbot memory serve --runtime pyodide` (entry.py,
the engine and the workers SDK on Pyodide under Node 22, `node:sqlite` storage) and the
local host (EmbeddedMemoryHost, CPython + sqlite3), each over HTTP with the chat prefilled
to N messages by POST /import and its background compaction settled first. Each host's
turns are timed alone (its CPU per turn), then the same turns interleaved, one host after
the other (the p50 ratio of hosts that saw the same moments of the machine's load). Cold start is
the wall time from starting Node to the host's ready line (Pyodide loaded, entry.py
imported, HTTP listening), over a few starts. CPU per turn: the serving process's CPU
time over the measured turns (Node's from /proc; the local host's is this process's, its
client included), and what a million turns cost at Workers' published CPU-time price.
The two figures do not count the same work: the compactions that the turns set off run
inside Node (the Durable Object's alarm), while the local host summarizes a long batch in a
child process (a short one, and every compaction's reads and writes, on its event loop). So
the run also prints them like for like: the turns alone (Node's CPU less what it spent while
the alarms ran, from the host's `stats`; the local host's inline compaction work stays in its
figure), and compaction counted on both (the local host's process plus its children's).
The $ figure stays on Node's total: compaction is billed on Workers too. Then where a turn
goes: the Pyodide host's time in SQLite (its `stats`, less the alarms'), and the same turns
run once more by the engine alone in this process on the local chat's database, its SQLite
time summed (what Python adds to the same SQL, with no HTTP). Prints a table with the
ratios; writes a PNG.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from memory_latency import IMPORT_BATCH, Corpus, percentile

from memory_worker.local import SqliteStorage
from memory_worker.local.chats import chat_file
from memory_worker.pyodide_runtime import PyodideHost

TOKEN = "bench-token-0123456789abcdef"
COLD_STARTS = 3
WARM_TURNS = 5  # the first turns of each pass warm the caches: not counted
# Workers Paid, Standard usage model (developers.cloudflare.com/workers/platform/pricing/,
# read 2026-12-01): "30 million CPU milliseconds included per month + $0.02 per additional
# million CPU milliseconds"; requests "10 million included per month + $0.30 per additional
# million". A Durable Object's own request and duration charges come on top and are not
# modelled here.
CPU_USD_PER_MILLION_MS = 0.02
REQUEST_USD_PER_MILLION = 0.30
PRICE_READ = "2026-12-01"


def progress(text: str) -> None:
    """One overwritten status line on stderr."""
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def cold_starts(tmp: Path, count: int = COLD_STARTS) -> list[dict[str, float]]:
    """Start the Pyodide host `count` times on an empty folder: wall and in-host seconds."""
    out = []
    for i in range(count):
        progress(f"pyodide cold start {i + 1}/{count}")
        started = time.perf_counter()
        host = PyodideHost(tmp / f"cold-{i}", TOKEN).start()
        wall = time.perf_counter() - started
        out.append({"wall": wall, "node": host.ready["cold_start_s"], "pyodide": host.ready["pyodide_s"]})
        host.stop()
    print(file=sys.stderr)
    return out


def host_stats(host: PyodideHost) -> dict[str, Any]:
    """The Pyodide host's `stats` (once no alarm runs); an error if it failed: its figures say nothing."""
    stats = host.control("stats")
    if "error" in stats or stats["errors"]:
        raise RuntimeError(f"the Pyodide host: {stats.get('error') or stats['errors'][-1]}")
    return stats


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendant_pids(exclude: int) -> list[int]:
    """The live descendants of this process, except `exclude` and its own."""
    pids, stack = [], [os.getpid()]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*/children"):
            try:
                children = [int(c) for c in task.read_text().split()]
            except OSError:  # the task ended meanwhile
                continue
            for child in children:
                if child != exclude:
                    pids.append(child)
                    stack.append(child)
    return pids


def descendants_cpu_s(exclude: int) -> float:
    """CPU seconds of this process's descendants, live and reaped, except `exclude` and its own.

    The local host's summarizer runs in a child process (a process pool); the Node host,
    also this process's child, is left out.
    """
    total = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = total.ru_utime + total.ru_stime  # children already waited for
    for child in descendant_pids(exclude):
        try:
            seconds += process_cpu_s(child)
        except OSError:  # it ended meanwhile
            continue
    return seconds


def batches_of(corpus: Corpus, n: int, prefix: str) -> list[list[dict[str, Any]]]:
    """n messages of the corpus in import batches."""
    return [corpus.take(min(IMPORT_BATCH, n - done), prefix) for done in range(0, n, IMPORT_BATCH)]


async def prefill(http: Any, chat: str, batches: list[list[dict[str, Any]]], label: str) -> float:
    """Import the batches into one chat, wait for its background compaction; messages/s."""
    done, import_s = 0, 0.0
    n = sum(len(batch) for batch in batches)
    for batch in batches:
        started = time.perf_counter()
        async with http.post(f"/v1/chats/{chat}/import", json={"messages": batch}) as r:
            r.raise_for_status()
            await r.read()
        import_s += time.perf_counter() - started
        done += len(batch)
        progress(f"{label}: imported {done:,}/{n:,} ({done / import_s:,.0f} messages/s)")
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        async with http.get(f"/v1/chats/{chat}/stats") as r:
            stats = await r.json()
        if stats["active_messages"] <= 30 and stats["total_messages"] >= n:
            break
        progress(f"{label}: background compaction, {stats['active_messages']:,} left")
        await asyncio.sleep(0.5)  # polling the host's own progress, with a deadline
    print(file=sys.stderr)
    return n / import_s


async def turn_ms(http: Any, chat: str, message: dict[str, Any]) -> float:
    """One POST /turn; its wall time in ms."""
    body = {k: message[k] for k in ("text", "author", "author_id", "message_id")}
    started = time.perf_counter()
    async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
        await r.read()
    elapsed = (time.perf_counter() - started) * 1000
    r.raise_for_status()
    return elapsed


async def timed_turns(
    http: Any,
    chat: str,
    messages: list[dict[str, Any]],
    label: str,
    cpu: Callable[[], float],
    side: Callable[[], Awaitable[tuple[float, int]]],
) -> dict[str, Any]:
    """Time the turns (ms; the first 5 warm the caches) and the serving process's CPU per turn.

    `cpu` reads the serving process's CPU seconds: the turns' total CPU, divided by their
    number, is the CPU a turn costs (what Workers bills), whatever the machine's load.
    `side` reads (CPU seconds, events) of the compaction the turns set off: Pyodide's
    alarms (inside Node's figure; it waits for a running one first, so that both reads
    cover the same work) or the local host's summarizer child (outside this process's).
    """
    latencies = []
    cpu_start, side_start = 0.0, (0.0, 0)
    for i, m in enumerate(messages):
        if i == WARM_TURNS:
            side_start = await side()
            cpu_start = cpu()
        elapsed = await turn_ms(http, chat, m)
        if i >= WARM_TURNS:
            latencies.append(elapsed)
        if i % 25 == 0:
            progress(f"{label}: turn {i}/{len(messages)}")
    side_end = await side()
    turns = max(1, len(latencies))
    cpu_ms = (cpu() - cpu_start) * 1000 / turns
    side_ms = (side_end[0] - side_start[0]) * 1000 / turns
    print(file=sys.stderr)
    return {
        "turns": latencies,
        "cpu_ms": cpu_ms,
        "side_ms": side_ms,
        "side_events": side_end[1] - side_start[1],
    }


async def interleaved(
    sessions: dict[str, Any], chats: dict[str, str], messages: list[dict[str, Any]]
) -> dict[str, list[float]]:
    """The same turns on both hosts, one after the other, the order alternating: both see the
    machine's load of the same moments, so the ratio of their latencies holds under load."""
    out: dict[str, list[float]] = {key: [] for key in sessions}
    keys = list(sessions)
    for i, m in enumerate(messages):
        for key in keys if i % 2 == 0 else keys[::-1]:
            elapsed = await turn_ms(sessions[key], chats[key], m)
            if i >= WARM_TURNS:
                out[key].append(elapsed)
        if i % 25 == 0:
            progress(f"interleaved: turn {i}/{len(messages)}")
    print(file=sys.stderr)
    return out


async def both(corpus: Corpus, n: int, turns: int, tmp: Path) -> dict[str, dict[str, Any]]:
    """Both hosts prefilled alike; each one's CPU per turn alone; then the turns interleaved."""
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost
    from memory_worker.local.offline import OfflineSummarizer

    host = PyodideHost(tmp / "pyodide", TOKEN, env={"RETENTION_MESSAGES": str(10 * n)}, control=True)
    await asyncio.to_thread(host.start)
    try:
        assert host.proc is not None
        pid = host.proc.pid
        cpu = {"local": time.process_time, "pyodide": lambda: process_cpu_s(pid)}

        reads: list[dict[str, Any]] = []  # the host's stats at each read: its SQL time in them

        async def alarms() -> tuple[float, int]:
            stats = await asyncio.to_thread(host_stats, host)
            reads.append(stats)
            return stats["alarm_cpu_ms"] / 1000, stats["alarms"]

        children: list[set[int]] = []
        # The local host's own summarizer (as it makes one), its child process started before
        # the turns: an import makes no compaction due, so the first one would come in the
        # measured turns, and its child's start-up would be billed to them.
        offline = OfflineSummarizer()

        async def summarizer() -> tuple[float, int]:
            # Once no compaction runs, as Pyodide's `stats` answers: both reads bracket whole ones.
            deadline = time.monotonic() + 60
            while local.host is not None and local.host.scheduler.running:
                if time.monotonic() > deadline:
                    raise TimeoutError("the local host's compactions still run after 60 s")
                await asyncio.sleep(0.005)
            # A process started between the two reads would bill its start-up (an interpreter
            # and the engine's imports, some 0.3 s of CPU) to the measured turns.
            live = set(descendant_pids(exclude=pid))
            if children and (new := live - children[0]):
                raise RuntimeError(f"processes {sorted(new)} started during the measured turns")
            children.append(live)
            return descendants_cpu_s(exclude=pid), 0

        side = {"local": summarizer, "pyodide": alarms}
        async with EmbeddedMemoryHost(
            tmp / "local", token=TOKEN, retention=10 * n, summarizer=offline
        ) as local:
            warm = [{"role": "user", "author": "warm-up", "text": "w " * offline.inline_max_chars}]
            await offline("", warm)  # too long to be summarized inline: in the child
            urls = {"local": local.url, "pyodide": host.url}
            timeout = aiohttp.ClientTimeout(total=900)
            headers = {"authorization": f"Bearer {TOKEN}"}
            sessions = {
                key: aiohttp.ClientSession(url, headers=headers, timeout=timeout) for key, url in urls.items()
            }
            try:
                chats = {k: f"bench:{k}-{n}" for k in urls}
                results: dict[str, dict[str, Any]] = {}
                # The same messages for both hosts, in the prefill and in the turns alone: the
                # corpus cycles, and a host given the next stretch of it would be timed on
                # other conversations (other words to rank) than the host it is compared with.
                batches = batches_of(corpus, n, f"p{n}")
                for key in urls:
                    results[key] = {"import_rate": await prefill(sessions[key], chats[key], batches, key)}
                messages = corpus.take(turns + WARM_TURNS, f"t{n}")
                for key in urls:
                    # Alone: the local host's CPU is this process's (its aiohttp client included,
                    # an upper bound for the host); Node's from /proc.
                    results[key].update(
                        await timed_turns(sessions[key], chats[key], messages, key, cpu[key], side[key])
                    )
                first, last = reads[-2], reads[-1]  # the pass's two reads: after the warm turns, at its end
                sql = last["sql_ms"] - first["sql_ms"] - (last["alarm_sql_ms"] - first["alarm_sql_ms"])
                results["pyodide"]["sql_ms"] = sql / turns
                paired = await interleaved(sessions, chats, corpus.take(turns + WARM_TURNS, f"i{n}"))
                for key, latencies in paired.items():
                    results[key]["interleaved"] = latencies
            finally:
                for session in sessions.values():
                    await session.close()
    finally:
        host.stop()
    results["local"].update(engine_alone(tmp / "local" / chat_file(f"bench:local-{n}"), messages))
    return results


class TimedSqlite(SqliteStorage):
    """The local host's storage, summing the wall time of its statements (BEGIN and COMMIT included)."""

    sql_s = 0.0

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """As SqliteStorage.exec, timed."""
        started = time.perf_counter()
        try:
            return super().exec(query, *params)
        finally:
            self.sql_s += time.perf_counter() - started

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """As SqliteStorage.rows, timed."""
        started = time.perf_counter()
        try:
            return super().rows(query, *params)
        finally:
            self.sql_s += time.perf_counter() - started

    def transaction(self, fn: Callable[[], Any]) -> Any:
        """As SqliteStorage.transaction; its BEGIN and COMMIT timed (what `fn` runs is timed above)."""
        inside = 0.0

        def timed() -> Any:
            nonlocal inside
            started = time.perf_counter()
            try:
                return fn()
            finally:
                inside += time.perf_counter() - started

        started = time.perf_counter()
        try:
            return super().transaction(timed)
        finally:
            self.sql_s += time.perf_counter() - started - inside


def engine_alone(path: Path, messages: list[dict[str, Any]]) -> dict[str, float]:
    """The same turns again on the local chat's database, by the engine alone in this process:
    ms a turn in all and in SQLite (what Python adds to the SQL, without HTTP)."""
    from memory_engine import ChatMemory

    storage = TimedSqlite(path)
    memory = ChatMemory(storage, retention=10**9)
    total = 0.0
    for i, m in enumerate(messages):
        if i == WARM_TURNS:
            storage.sql_s, total = 0.0, 0.0
        started = time.perf_counter()
        again = f"again-{m['message_id']}"  # a new message, not a repeat of the one the host stored
        memory.turn(m["text"], author=m["author"], author_id=m["author_id"], message_id=again)
        total += time.perf_counter() - started
    storage.close()
    turns = max(1, len(messages) - WARM_TURNS)
    return {"engine_ms": total * 1000 / turns, "engine_sql_ms": storage.sql_s * 1000 / turns}


def chart(results: dict[str, dict[str, Any]], starts: list[dict[str, float]], n: int, path: Path) -> None:
    """p50/p99 bars per runtime, and the cold starts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [2, 1]})
    labels = ["local host (CPython)", "Worker on Pyodide"]
    keys = ["local", "pyodide"]
    x = range(len(keys))
    left.bar([i - 0.2 for i in x], [percentile(results[k]["turns"], 50) for k in keys], 0.4, label="p50")
    left.bar([i + 0.2 for i in x], [percentile(results[k]["turns"], 99) for k in keys], 0.4, label="p99")
    left.set_xticks(list(x), labels)
    left.set_ylabel("turn over HTTP (ms)")
    left.set_title(f"turn latency at {n:,} messages")
    left.legend()
    right.bar(range(len(starts)), [s["wall"] for s in starts], color="tab:gray")
    right.set_xlabel("start #")
    right.set_ylabel("seconds to ready")
    right.set_title("Pyodide cold start")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(corpus: Corpus, n: int, turns: int, png: Path, starts_wanted: int = COLD_STARTS) -> int:
    """Run both measurements; print the figures; write the PNG."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        starts = cold_starts(tmp, starts_wanted)
        results = asyncio.run(both(corpus, n, turns, tmp))
    walls = [s["wall"] for s in starts]
    if walls:
        print(
            f"Pyodide cold start (Node start -> ready, {len(starts)} starts): "
            f"median {statistics.median(walls):.2f} s "
            f"(min {min(walls):.2f}, max {max(walls):.2f}); of which loadPyodide "
            f"{statistics.median(s['pyodide'] for s in starts):.2f} s"
        )
    head = f"{'runtime':>22} | {'turn p50':>8} {'p99':>7} | {'CPU ms/turn':>11} | {'import msg/s':>12}"
    print(head)
    print("-" * len(head))
    for key, label in (("local", "local host (CPython)"), ("pyodide", "Worker on Pyodide")):
        r = results[key]
        print(
            f"{label:>22} | {percentile(r['turns'], 50):>8.2f} {percentile(r['turns'], 99):>7.2f} | "
            f"{r['cpu_ms']:>11.2f} | {r['import_rate']:>12,.0f}"
        )
    lp, pp = (percentile(results[k]["turns"], 50) for k in ("local", "pyodide"))
    l99, p99 = (percentile(results[k]["turns"], 99) for k in ("local", "pyodide"))
    print(
        f"Pyodide / local: p50 {pp / lp:.1f}x, p99 {p99 / l99:.1f}x ({turns} turns at N={n:,}, ms over HTTP)"
    )
    il50, ip50 = (percentile(results[k]["interleaved"], 50) for k in ("local", "pyodide"))
    il99, ip99 = (percentile(results[k]["interleaved"], 99) for k in ("local", "pyodide"))
    print(
        f"Interleaved (the same {turns} turns on both hosts, one after the other): p50 "
        f"{il50:.2f} vs {ip50:.2f} ms = {ip50 / il50:.2f}x, p99 {ip99 / il99:.2f}x"
    )
    cpu_ms = results["pyodide"]["cpu_ms"]
    print(
        f"Pyodide / local CPU per turn: {cpu_ms / results['local']['cpu_ms']:.1f}x. On Workers, a million "
        f"turns at {cpu_ms:.2f} CPU ms each = {cpu_ms:,.0f} million CPU ms = "
        f"${cpu_ms * CPU_USD_PER_MILLION_MS:.2f} at ${CPU_USD_PER_MILLION_MS} per million CPU ms "
        f"(+ ${REQUEST_USD_PER_MILLION:.2f} for the million requests; Workers Standard prices read "
        f"{PRICE_READ}; beyond the plan's monthly 30 million CPU ms included)"
    )
    local, pyodide = results["local"], results["pyodide"]
    alone, with_child = cpu_ms - pyodide["side_ms"], local["cpu_ms"] + local["side_ms"]
    print(
        f"CPU per turn like for like: Node's figure includes the {pyodide['side_events']} compaction "
        f"alarms the turns set off ({pyodide['side_ms']:.2f} ms a turn; the local host summarizes a "
        f"long batch in a child process, outside its figure, a short one inline). Turns alone: "
        f"Pyodide {alone:.2f} vs local {local['cpu_ms']:.2f} ms (its inline compaction work included) "
        f"= {alone / local['cpu_ms']:.1f}x; compaction counted on both: "
        f"Pyodide {cpu_ms:.2f} vs local {with_child:.2f} ms (its process + its summarizer child "
        f"{local['side_ms']:.2f}) = {cpu_ms / with_child:.1f}x"
    )
    engine_python = local["engine_ms"] - local["engine_sql_ms"]
    print(
        f"Where a turn goes (the turns alone): on Pyodide {alone:.2f} CPU ms, of which SQL "
        f"(node:sqlite and the emulator's checks) {pyodide['sql_ms']:.2f} ms and the rest "
        f"{alone - pyodide['sql_ms']:.2f} ms "
        f"(Python in WebAssembly, its JS glue, the Worker-to-object hop, HTTP); the same turns by "
        f"the engine alone in CPython (in process, no HTTP): {local['engine_ms']:.2f} ms, of which "
        f"SQLite {local['engine_sql_ms']:.2f} ms and Python {engine_python:.2f} ms"
    )
    print(
        f"machine load (1-min average) at start / end: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    chart(results, starts, n, png)
    print(f"plot: {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: --data, --n, --turns, --png, --cold-starts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared/locomo/locomo-dev.json"))
    parser.add_argument("--n", type=int, default=10_000, help="messages in the chat")
    parser.add_argument("--turns", type=int, default=200, help="turns measured per runtime")
    parser.add_argument("--png", default=str(Path(__file__).with_name("pyodide_latency.png")))
    parser.add_argument("--cold-starts", type=int, default=COLD_STARTS, help="cold starts timed (0: none)")
    args = parser.parse_args(argv)
    return report(Corpus(args.data), args.n, args.turns, Path(args.png), args.cold_starts)


if __name__ == "__main__":
    sys.exit(main())
