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
# 20 at 10k: over 8, the seed's p50 moved between 330 and 520 CPU ms from run to run, and the
# seed/HTTP ratio with it.
SEED_TURNS = {1_000: 30, 10_000: 20, 100_000: 3}
# CPU ms per turn of this process, per (design, size): on a shared machine the wall time
# swings with the load, the CPU a turn takes much less. Over HTTP the host runs in this
# process, so its CPU includes the client's share of the round trip.
CPU: dict[tuple[str, Any], list[float]] = {}


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


# The previous design's index (migration 1's messages_fts), for its size beside ours.
_OLD_INDEX = (
    "CREATE VIRTUAL TABLE old.messages_fts USING fts5(body, author, context, "
    "tokenize = 'porter unicode61 remove_diacritics 2')",
    "INSERT INTO old.messages_fts(rowid, body, author, context) SELECT id, text, author, "
    "substr(COALESCE(lag(text, 1) OVER (ORDER BY id), ''), 1, 2000) FROM main.messages",
)


def index_bytes(path: Path) -> tuple[int, int, int]:
    """(messages, bytes of our FTS index, bytes of the previous design's index) of a chat file."""
    db = sqlite3.connect(path)
    try:
        old = path.with_suffix(".old-index")
        db.execute("ATTACH DATABASE ? AS old", (str(old),))
        for statement in _OLD_INDEX:
            db.execute(statement)
        db.commit()
        n = db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        ours, previous = (
            db.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat(?) WHERE name LIKE 'messages_fts%'", (schema,)
            ).fetchone()[0]
            for schema in ("main", "old")
        )
    finally:
        db.close()
    return n, ours, previous


def in_process(
    corpus: Corpus, n: int, turns_measured: int, tmp: Path
) -> tuple[list[float], tuple[int, int, int]]:
    """Turn latencies (ms) of ChatMemory over SqliteStorage after prefilling n messages; index sizes."""
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
    storage.close()
    sizes = index_bytes(tmp / f"inproc-{n}.sqlite3")
    storage = SqliteStorage(tmp / f"inproc-{n}.sqlite3")
    memory = ChatMemory(storage, retention=10 * n)
    out = []
    for i, m in enumerate(corpus.take(turns_measured + 5, f"pt{n}")):
        started, cpu = time.perf_counter(), time.process_time()
        memory.turn(m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"])
        if i >= 5:  # the first few warm the caches
            out.append((time.perf_counter() - started) * 1000)
            CPU.setdefault(("inproc", n), []).append((time.process_time() - cpu) * 1000)
        if i % 25 == 0:
            _progress(f"in process, N={n:,}: turn {i}/{turns_measured + 5}")
    storage.close()
    _done()
    return out, sizes


# The previous design's index-time knobs (retrieval.py): one turn before, none after, no dates.
PREVIOUS_INDEX = {"TURNS_BEFORE": 1, "TURNS_AFTER": 0, "DATES": False, "NEIGHBOUR_CHARS": 2000}
IMPORT_COMPARED = 20_000


COMPARED_TURNS = 150


def previous_design(corpus: Corpus, tmp: Path) -> dict[str, Any]:
    """In process, ours beside the previous design's index: import messages/s and turn p50 (ms)."""
    from memory_engine import ChatMemory, retrieval

    from memory_worker.local import SqliteStorage

    batches = [corpus.take(IMPORT_BATCH, "imp") for _ in range(IMPORT_COMPARED // IMPORT_BATCH)]
    live = corpus.take(COMPARED_TURNS, "live")
    saved = {k: getattr(retrieval, k) for k in PREVIOUS_INDEX}
    out: dict[str, float] = {}
    turns: dict[str, list[float]] = {}
    try:
        # Alternated twice, so that a change in the machine's load hits both alike.
        for run, (name, knobs) in enumerate([("previous", PREVIOUS_INDEX), ("ours", saved)] * 2):
            for k, v in knobs.items():
                setattr(retrieval, k, v)
            storage = SqliteStorage(tmp / f"import-{run}.sqlite3")
            memory = ChatMemory(storage, retention=10 * IMPORT_COMPARED)
            _progress(f"import in process, {name} index, run {run // 2 + 1}/2")
            started = time.perf_counter()
            for batch in batches:
                memory.import_messages(batch)
            out[name] = out.get(name, 0.0) + (time.perf_counter() - started)
            for m in live:
                started = time.perf_counter()
                memory.turn(
                    m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"]
                )
                turns.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            storage.close()
    finally:
        for k, v in saved.items():
            setattr(retrieval, k, v)
    _done()
    return {
        "import": {name: 2 * IMPORT_COMPARED / seconds for name, seconds in out.items()},
        "turn_p50": {name: percentile(values, 50) for name, values in turns.items()},
    }


# -- over HTTP ---------------------------------------------------------------------------


AFTER_IMPORT = "after import"


async def over_http(
    corpus: Corpus, sizes: tuple[int, ...], turns_measured: int, tmp: Path, after_import: int | None = None
) -> tuple[dict[Any, list[float]], dict[str, Any]]:
    """Turn latencies (ms) over HTTP per size (and right after an import of `after_import`); import rate."""
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost

    results: dict[Any, list[float]] = {}
    rates: dict[Any, float] = {}
    imported, import_s = 0, 0.0
    # Retention above the largest size: the point is N messages searchable in one chat.
    async with EmbeddedMemoryHost(tmp / "host", retention=10 * max((*sizes, after_import or 0))) as host:
        headers = {"authorization": f"Bearer {host.token}"}
        # aiohttp's client: about 0.4 ms a round trip here, httpx's about 1.2 ms; the client
        # shares the event loop with the host, so its cost would count against the worker.
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(host.url, headers=headers, timeout=timeout) as http:
            scenarios: list[tuple[Any, int]] = [(n, n) for n in sizes]
            if after_import:
                scenarios.append((AFTER_IMPORT, after_import))
            for key, n in scenarios:
                chat = f"bench:latency-{key}".replace(" ", "-")
                done, size_s = 0, 0.0
                while done < n:
                    batch = corpus.take(min(IMPORT_BATCH, n - done), f"h{n}")
                    started = time.perf_counter()
                    # `more` on all but the last batch, as `chatbot import` sends it: the
                    # index is built once, with the last one.
                    body = {"messages": batch, "more": done + len(batch) < n}
                    async with http.post(f"/v1/chats/{chat}/import", json=body) as r:
                        r.raise_for_status()
                        answer = await r.json()
                    import_s += time.perf_counter() - started
                    size_s += time.perf_counter() - started
                    imported += answer["imported"]
                    done += len(batch)
                    _progress(
                        f"over HTTP, {key}: imported {done:,} ({imported / import_s:,.0f} messages/s so far)"
                    )
                rates[key] = n / size_s
                if key != AFTER_IMPORT:  # the other scenario measures turns at once
                    await _settle(http, chat, n)
                out = []
                for i, m in enumerate(corpus.take(turns_measured + 5, f"ht{n}")):
                    body = {
                        "text": m["text"],
                        "author": m["author"],
                        "author_id": m["author_id"],
                        "message_id": m["message_id"],
                    }
                    started, cpu = time.perf_counter(), time.process_time()
                    async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
                        await r.read()
                    elapsed = (time.perf_counter() - started) * 1000
                    cpu_ms = (time.process_time() - cpu) * 1000
                    r.raise_for_status()
                    if i >= 5:
                        out.append(elapsed)
                        CPU.setdefault(("http", key), []).append(cpu_ms)
                    if i % 25 == 0:
                        _progress(f"over HTTP, {key}: turn {i}/{turns_measured + 5}")
                results[key] = out
                _done()
    return results, {"imported": imported, "seconds": import_s, "rates": rates}


async def _import_chat(http: Any, chat: str, corpus: Corpus, n: int, prefix: str, what: str) -> None:
    """Prefill `chat` with n messages by POST /import, `more` on all but the last batch."""
    for done in range(0, n, IMPORT_BATCH):
        batch = corpus.take(min(IMPORT_BATCH, n - done), prefix)
        body = {"messages": batch, "more": done + len(batch) < n}
        async with http.post(f"/v1/chats/{chat}/import", json=body) as r:
            r.raise_for_status()
        _progress(f"{what}: imported {done + len(batch):,}")


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


def _process_cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time (Linux's clock_getcpuclockid: all its threads)."""
    return ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


async def host_alone(corpus: Corpus, sizes: tuple[int, ...], turns_measured: int, tmp: Path) -> None:
    """CPU ms per turn of `chatbot memory serve` (this checkout) in its own process, into CPU["host"].

    The client's CPU, in this process, goes to CPU["client"]. The host's is read from its
    process CPU clock before and after each turn: whatever it ran meanwhile counts too.
    """
    import aiohttp
    import host_start

    os.environ["RETENTION_MESSAGES"] = str(10 * max(sizes))  # the child inherits it
    proc, port = host_start.serve_checkout(Path(__file__).resolve().parents[1], tmp / "host-alone")
    clock = _process_cpu_clock(proc.pid)
    headers = {"authorization": f"Bearer {host_start.TOKEN}"}
    timeout = aiohttp.ClientTimeout(total=600)
    try:
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession(url, headers=headers, timeout=timeout) as http:
            deadline = time.monotonic() + 60
            while True:  # the host answers /health as soon as it listens
                try:
                    async with http.get("/health") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                await asyncio.sleep(0.05)
            for n in sizes:
                chat = f"bench:alone-{n}"
                await _import_chat(http, chat, corpus, n, f"a{n}", f"host alone, {n:,}")
                await _settle(http, chat, n)
                for i, m in enumerate(corpus.take(turns_measured + 5, f"at{n}")):
                    body = {k: m[k] for k in ("text", "author", "author_id", "message_id")}
                    host, cpu = time.clock_gettime(clock), time.process_time()
                    async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
                        await r.read()
                    host_ms = (time.clock_gettime(clock) - host) * 1000
                    client_ms = (time.process_time() - cpu) * 1000
                    r.raise_for_status()
                    if i >= 5:
                        CPU.setdefault(("host", n), []).append(host_ms)
                        CPU.setdefault(("client", n), []).append(client_ms)
                    if i % 25 == 0:
                        _progress(f"host alone, {n:,}: turn {i}/{turns_measured + 5}")
                _done()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
        started, cpu = time.perf_counter(), time.process_time()
        seed.turn(m)
        out.append((time.perf_counter() - started) * 1000)
        CPU.setdefault(("seed", n), []).append((time.process_time() - cpu) * 1000)
    seed.db.close()
    _done()
    return out


# In the lock-step part: our turns over HTTP after each seed turn (20 seed turns, 300 of ours).
LOCKSTEP_OURS_PER_SEED = 15


async def lockstep(corpus: Corpus, n: int, seed_turns: int, tmp: Path) -> None:
    """The seed's turns and ours over HTTP interleaved, into CPU["lockstep-seed"/"lockstep-http"].

    Run one after the other, the two designs meet different loads on a shared machine (the
    seed's p50 moved 300-520 ms between runs, and the ratio with it). Here each seed turn is
    followed by LOCKSTEP_OURS_PER_SEED of ours (host and client in one process, as `over_http`),
    so both see the same load, turn for turn.
    """
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost

    seed = SeedBlobIndex(tmp / f"lockstep-seed-{n}.sqlite3")
    _progress(f"lock-step, N={n:,}: building the seed's blob")
    seed.prefill(corpus.take(n, f"ls{n}"))
    async with EmbeddedMemoryHost(tmp / "lockstep-host", retention=10 * n) as host:
        headers = {"authorization": f"Bearer {host.token}"}
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(host.url, headers=headers, timeout=timeout) as http:
            chat = f"bench:lockstep-{n}"
            await _import_chat(http, chat, corpus, n, f"lh{n}", f"lock-step, {n:,}")
            await _settle(http, chat, n)
            ours = corpus.take(5 + seed_turns * LOCKSTEP_OURS_PER_SEED, f"lt{n}")
            for i, m in enumerate(corpus.take(seed_turns, f"lst{n}")):
                _progress(f"lock-step, N={n:,}: seed turn {i + 1}/{seed_turns}")
                cpu = time.process_time()
                seed.turn(m)
                CPU.setdefault(("lockstep-seed", n), []).append((time.process_time() - cpu) * 1000)
                start = 0 if i else 5  # the first 5 of ours warm the caches: not counted
                for j, t in enumerate(ours[: start + LOCKSTEP_OURS_PER_SEED]):
                    body = {k: t[k] for k in ("text", "author", "author_id", "message_id")}
                    cpu = time.process_time()
                    async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
                        await r.read()
                    if j >= start:
                        CPU.setdefault(("lockstep-http", n), []).append((time.process_time() - cpu) * 1000)
                    r.raise_for_status()
                ours = ours[start + LOCKSTEP_OURS_PER_SEED :]
    seed.db.close()
    _done()


# -- a bare FTS5 reference ---------------------------------------------------------------


def bare_fts5(corpus: Corpus, n: int, turns_measured: int, tmp: Path, stopwords: bool = False) -> list[float]:
    """Turn latencies (ms) of a bare FTS5 design at n messages, in process (no HTTP).

    Per turn, in one transaction: insert the message into a table and a one-column FTS5
    index over it, then fetch the top 3 older rows for an OR of its distinct non-stopword
    tokens, ranked by bm25 (the plain FTS5 baseline of locomo_recall.py as a turn). No
    facts, ring, summary, prompt or state: the floor a turn with retrieval could cost.
    With `stopwords`, the OR holds every distinct token, stopwords too: the literal
    "insert + OR top-3 lookup" (the issue's reference was not recorded; this is the
    looser reading of it, the default the stricter one).
    """
    design = "bare-all" if stopwords else "bare"
    from memory_engine.text import STOPWORDS, tokens

    db = sqlite3.connect(tmp / f"{design}-{n}.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, author TEXT, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, content='m', content_rowid='id')")

    def insert(m: dict[str, Any]) -> int:
        cur = db.execute("INSERT INTO m(author, text) VALUES (?, ?)", (m["author"], m["text"]))
        db.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (cur.lastrowid, m["text"]))
        return int(cur.lastrowid or 0)

    _progress(f"{design} FTS5, N={n:,}: prefill")
    db.execute("BEGIN")
    for m in corpus.take(n, f"b{n}"):
        insert(m)
    db.execute("COMMIT")
    out = []
    for i, m in enumerate(corpus.take(turns_measured + 5, f"bt{n}")):
        started, cpu = time.perf_counter(), time.process_time()
        db.execute("BEGIN")
        new_id = insert(m)
        terms = list(dict.fromkeys(t for t in tokens(m["text"]) if stopwords or t not in STOPWORDS))
        if terms:
            db.execute(
                "SELECT m.id, m.author, m.text FROM t JOIN m ON m.id = t.rowid "
                "WHERE t MATCH ? AND t.rowid != ? ORDER BY bm25(t) LIMIT 3",
                (" OR ".join(f'"{term}"' for term in terms), new_id),
            ).fetchall()
        db.execute("COMMIT")
        if i >= 5:
            out.append((time.perf_counter() - started) * 1000)
            CPU.setdefault((design, n), []).append((time.process_time() - cpu) * 1000)
    db.close()
    _done()
    return out


# -- output ------------------------------------------------------------------------------


def chart(rows: list[dict[str, Any]], path: Path, after_import: list[float]) -> None:
    """Latency vs N on log axes: p50 (solid) and p99 (dashed) per design; the after-import point."""
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
    ax.plot(
        [ns[-1]], [percentile(after_import, 50)], "s", color="tab:purple", label="HTTP p50 right after import"
    )
    ax.plot([ns[-1]], [percentile(after_import, 99)], "^", color="tab:purple", alpha=0.6, label="its p99")
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


PARTS = ("http", "host", "lockstep", "after-import", "previous", "inproc", "seed", "bare")


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
    if all(r.get(k) for r in rows for k in ("http", "inproc", "seed")) and AFTER_IMPORT in http:
        chart(rows, Path(args.png), http[AFTER_IMPORT])
        print(f"plot: {args.png}")
    return 0


def _p50(values: list[float] | None) -> float:
    return percentile(values, 50) if values else float("nan")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a == a and b == b and b else "-"


def report(
    rows: list[dict[str, Any]],
    http: dict[Any, list[float]],
    imports: dict[str, Any],
    compared: dict[str, Any],
    turns_measured: int,
) -> None:
    """Print the table of what was measured (a part not run shows as nan or -)."""
    print()
    head = (
        f"{'N':>8} | {'in process p50':>14} {'p99':>6} | {'HTTP p50':>8} {'p99':>6} | "
        f"{'seed p50':>9} {'p99':>8} {'turns':>5} | {'seed/HTTP':>9} {'seed/in-proc':>12} | "
        f"{'bare p50':>8} {'HTTP/bare':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ip, hp, sp, bp = (_p50(r.get(k)) for k in ("inproc", "http", "seed", "bare"))
        print(
            f"{r['n']:>8,} | {ip:>14.2f} {percentile(r.get('inproc') or [], 99):>6.2f} | "
            f"{hp:>8.2f} {percentile(r.get('http') or [], 99):>6.2f} | "
            f"{sp:>9.1f} {percentile(r.get('seed') or [], 99):>8.1f} {len(r.get('seed') or []):>5} | "
            f"{_ratio(sp, hp):>9} {_ratio(sp, ip):>12} | {bp:>8.2f} {_ratio(hp, bp):>9}"
        )
    largest = rows[-1]
    seed_wall, seed_cpu = _p50(largest.get("seed")), _p50(CPU.get(("seed", largest["n"])))
    if AFTER_IMPORT in http:
        after = http[AFTER_IMPORT]
        print(
            f"{largest['n']:>8,} right after its import, compaction not waited for: HTTP p50 "
            f"{percentile(after, 50):.2f} ms, p99 {percentile(after, 99):.2f} ms; "
            f"seed/HTTP {_ratio(seed_wall, percentile(after, 50))}"
        )
    print("CPU ms per turn (this process's CPU time; steadier than wall time when the machine is shared):")
    for r in rows:
        n = r["n"]
        ip, hp, sp, bp, ap = (_p50(CPU.get((k, n))) for k in ("inproc", "http", "seed", "bare", "bare-all"))
        means = {k: sum(v) / len(v) for k in ("inproc", "http") if (v := CPU.get((k, n)))}
        print(
            f"{n:>8,} | in process {ip:6.2f} | HTTP {hp:6.2f} | seed {sp:9.1f} | bare {bp:6.2f} | "
            f"bare, stopwords too {ap:6.2f} | seed/HTTP {_ratio(sp, hp)} | HTTP/bare {_ratio(hp, bp)} | "
            f"HTTP/bare with stopwords {_ratio(hp, ap)} | in-proc/bare {_ratio(ip, bp)} | means: "
            + ", ".join(f"{k} {v:.2f}" for k, v in means.items())
        )
    for r in rows:
        host, client = CPU.get(("host", r["n"])), CPU.get(("client", r["n"]))
        if not host or not client:
            continue
        sp = _p50(CPU.get(("seed", r["n"])))
        host_mean, client_mean = sum(host) / len(host), sum(client) / len(client)
        print(
            f"{r['n']:>8,} | HTTP, the host in its own process: host CPU p50 {_p50(host):.2f} / mean "
            f"{host_mean:.2f} ms, its client's {_p50(client):.2f} / {client_mean:.2f}"
            f" | seed/host {_ratio(sp, _p50(host))}"
        )
    for r in rows:
        seed, ours = CPU.get(("lockstep-seed", r["n"])), CPU.get(("lockstep-http", r["n"]))
        if seed and ours:
            print(
                f"{r['n']:>8,} | lock-step, {len(seed)} seed turns each followed by {LOCKSTEP_OURS_PER_SEED} "
                f"of ours over HTTP: seed CPU p50 {_p50(seed):.1f} ms, ours {_p50(ours):.2f} / mean "
                f"{sum(ours) / len(ours):.2f} ms | seed/HTTP {_ratio(_p50(seed), _p50(ours))}"
            )
    if AFTER_IMPORT in http:
        after_cpu = _p50(CPU.get(("http", AFTER_IMPORT)))
        print(
            f"{largest['n']:>8,} right after its import: HTTP {after_cpu:.2f} CPU ms; seed/HTTP "
            f"{_ratio(seed_cpu, after_cpu)}"
        )
    print(
        f"(latencies in ms; ours over {turns_measured} turns per size, the seed's over the few "
        "turns shown, each rebuilding its whole index; bare: a one-column FTS5 insert + OR "
        "top-3 lookup in process of the message's non-stopword tokens, 'stopwords too' of all "
        "its tokens, see bare_fts5)"
    )
    if any("index" in r for r in rows):
        print("full-text index, bytes per message (dbstat over messages_fts*, after the prefill):")
    for r in rows:
        if "index" not in r:
            continue
        count, ours, previous = r["index"]
        print(
            f"{r['n']:>8,}: {ours / count:,.0f} B/message now, {previous / count:,.0f} B/message "
            f"with the previous design (one turn before as context, no after-context, no dates): "
            f"x{ours / previous:.2f}"
        )
    if imports:
        rate = imports["imported"] / imports["seconds"]
        print(
            f"import over HTTP: {imports['imported']:,} messages in {imports['seconds']:.1f} s = "
            f"{rate:,.0f} messages/s into one chat (batches of {IMPORT_BATCH:,}); per chat: "
            + ", ".join(
                f"{n:,}: {r:,.0f}/s" if isinstance(n, int) else f"{n}: {r:,.0f}/s"
                for n, r in imports["rates"].items()
            )
        )
    if compared:
        rates, p50 = compared["import"], compared["turn_p50"]
        print(
            f"in process, {IMPORT_COMPARED:,} messages imported twice per design, then {COMPARED_TURNS} "
            f"turns: import {rates['ours']:,.0f} messages/s with our index, {rates['previous']:,.0f}/s "
            f"with the previous design's (x{rates['ours'] / rates['previous']:.2f}); turn p50 "
            f"{p50['ours']:.2f} ms vs {p50['previous']:.2f} ms (x{p50['ours'] / p50['previous']:.2f})"
        )


if __name__ == "__main__":
    sys.exit(main())
