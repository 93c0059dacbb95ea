"""Our design measured by memory_latency.py: in process, over HTTP, the host alone, lock-step."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latency_baselines import SeedBlobIndex, index_bytes
from latency_corpus import CPU, IMPORT_BATCH, Corpus, progress, progress_done

if TYPE_CHECKING:
    from memory_worker.local import EmbeddedMemoryHost

# -- in process --------------------------------------------------------------------------


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
        progress(f"in process, N={n:,}: prefilled {done:,}")
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
            progress(f"in process, N={n:,}: turn {i}/{turns_measured + 5}")
    storage.close()
    progress_done()
    return out, sizes


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
                    progress(
                        f"over HTTP, {key}: imported {done:,} ({imported / import_s:,.0f} messages/s so far)"
                    )
                rates[key] = n / size_s
                if key != AFTER_IMPORT:  # the other scenario measures turns at once
                    await settle(http, chat, n)
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
                        progress(f"over HTTP, {key}: turn {i}/{turns_measured + 5}")
                results[key] = out
                progress_done()
    return results, {"imported": imported, "seconds": import_s, "rates": rates}


async def import_chat(http: Any, chat: str, corpus: Corpus, n: int, prefix: str, what: str) -> None:
    """Prefill `chat` with n messages by POST /import, `more` on all but the last batch."""
    for done in range(0, n, IMPORT_BATCH):
        batch = corpus.take(min(IMPORT_BATCH, n - done), prefix)
        body = {"messages": batch, "more": done + len(batch) < n}
        async with http.post(f"/v1/chats/{chat}/import", json=body) as r:
            r.raise_for_status()
        progress(f"{what}: imported {done + len(batch):,}")


async def settle(http: Any, chat: str, n: int, limit_s: float = 600) -> None:
    """Wait until the background compaction of the imported history has caught up."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        async with http.get(f"/v1/chats/{chat}/stats") as r:
            stats = await r.json()
        if stats["active_messages"] <= 30:
            return
        progress(
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
                await import_chat(http, chat, corpus, n, f"a{n}", f"host alone, {n:,}")
                await settle(http, chat, n)
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
                        progress(f"host alone, {n:,}: turn {i}/{turns_measured + 5}")
                progress_done()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.asynccontextmanager
async def settled_chat(
    corpus: Corpus, n: int, tmp: Path, what: str, prefix: str
) -> AsyncIterator[tuple[EmbeddedMemoryHost, Any, str]]:
    """An embedded host, an aiohttp client of it, and a chat imported with n messages and settled."""
    import aiohttp

    from memory_worker.local import EmbeddedMemoryHost

    async with EmbeddedMemoryHost(tmp / f"{what}-host", retention=10 * n) as host:
        headers = {"authorization": f"Bearer {host.token}"}
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(host.url, headers=headers, timeout=timeout) as http:
            chat = f"bench:{what}-{n}"
            await import_chat(http, chat, corpus, n, prefix, f"{what}, {n:,}")
            await settle(http, chat, n)
            yield host, http, chat


async def split(corpus: Corpus, n: int, turns_measured: int, tmp: Path) -> None:
    """Where an HTTP turn's CPU goes: into CPU["split-http"] and CPU["split-engine"].

    One chat, one process: turn i over HTTP (client, host and engine, as `over_http`), turn i+1
    by `ChatMemory.turn` on the chat's own open memory, alternating, so that both meet the same
    database, caches and load. The difference of the two is what the host and the HTTP stack
    (aiohttp's client and server) add to the engine's turn. Only p50s are reported: a direct
    turn never yields to the event loop, so the host's background work (compaction alarms)
    lands in the HTTP turns alone, and their mean would count it.
    """
    async with settled_chat(corpus, n, tmp, "split", f"sp{n}") as (host, http, chat):
        assert host.host is not None  # started by `async with`
        memory = host.host.store.open(chat)
        for i, m in enumerate(corpus.take(2 * (turns_measured + 5), f"spt{n}")):
            body = {k: m[k] for k in ("text", "author", "author_id", "message_id")}
            cpu = time.process_time()
            if i % 2:
                memory.turn(**body)
            else:
                async with http.post(f"/v1/chats/{chat}/turn", json=body) as r:
                    await r.read()
                r.raise_for_status()
            if i >= 10:  # the first few warm the caches
                key = "split-engine" if i % 2 else "split-http"
                CPU.setdefault((key, n), []).append((time.process_time() - cpu) * 1000)
            if i % 50 == 0:
                progress(f"split, {n:,}: turn {i}/{2 * (turns_measured + 5)}")
        progress_done()


# In the lock-step part: our turns over HTTP after each seed turn (20 seed turns, 300 of ours).
LOCKSTEP_OURS_PER_SEED = 15


async def lockstep(corpus: Corpus, n: int, seed_turns: int, tmp: Path) -> None:
    """The seed's turns and ours over HTTP interleaved, into CPU["lockstep-seed"/"lockstep-http"].

    Run one after the other, the two designs meet different loads on a shared machine (the
    seed's p50 moved 300-520 ms between runs, and the ratio with it). Here each seed turn is
    followed by LOCKSTEP_OURS_PER_SEED of ours (host and client in one process, as `over_http`),
    so both see the same load, turn for turn.
    """
    seed = SeedBlobIndex(tmp / f"lockstep-seed-{n}.sqlite3")
    progress(f"lock-step, N={n:,}: building the seed's blob")
    seed.prefill(corpus.take(n, f"ls{n}"))
    async with settled_chat(corpus, n, tmp, "lock-step", f"lh{n}") as (_, http, chat):
        ours = corpus.take(5 + seed_turns * LOCKSTEP_OURS_PER_SEED, f"lt{n}")
        for i, m in enumerate(corpus.take(seed_turns, f"lst{n}")):
            progress(f"lock-step, N={n:,}: seed turn {i + 1}/{seed_turns}")
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
    progress_done()
