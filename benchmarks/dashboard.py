"""The dashboard's speed: the overview of 1,000 chats, the page of a 100,000-message chat, a search;
and what the directory of chats costs each message (CPU and rows written).

Everything runs in one process on the local host (the same engine and pages as the Worker):
pages are timed over real HTTP with a logged-in session (median of the repeats, with the
quickest and slowest); the search is the dashboard's own (the bot's search route, then the
messages around each hit). The directory's cost is `after_write` (the chat's report and
the directory's upsert) timed alone after turns and replies, beside the turn itself, at
the small chat and at the 100,000-message chat.

    .venv/bin/python benchmarks/dashboard.py [--chats 1000] [--messages 100000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_engine.api.http import Operation
from memory_engine.dashboard.app import Dashboard, DashRequest
from memory_worker.local.dashboard import HostBackend, after_write
from memory_worker.local.embedded import EmbeddedMemoryHost

TOKEN = "bench-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
BIG = "telegram:-100999"
WORDS = ["chess", "garden", "lisbon", "coffee", "train", "river", "piano", "budget", "summit", "concert"]


def _figures(samples: list[float]) -> str:
    return f"p50 {statistics.median(samples):7.1f} ms   min {min(samples):7.1f}   max {max(samples):7.1f}"


async def _seed_directory(c: httpx.AsyncClient, chats: int) -> None:
    for i in range(chats):
        usage = [
            {
                "day": f"2026-11-{d:02d}",
                "tier": t,
                "calls": (i + d) % 7,
                "errors": 0,
                "cost_usd": 0.01 * ((i + d) % 5),
            }
            for d in range(1, 29, 3)
            for t in ("light", "fast")
        ]
        report = {
            "chat_key": f"telegram:-{1_000_000 + i}",
            "title": f"Group number {i}",
            "messages": 100 + i,
            "last_ts": f"2026-11-{1 + i % 28:02d}T10:00:00.000Z",
            "authors": [f"u{j}" for j in range(i % 9 + 1)],
            "usage": usage,
        }
        r = await c.post("/v1/directory/report", headers=AUTH, json=report)
        assert r.status_code == 200, r.text


async def _seed_big_chat(c: httpx.AsyncClient, messages: int) -> None:
    batch = 5000
    for start in range(0, messages, batch):
        rows = []
        for n in range(start, min(start + batch, messages)):
            who = n % 23
            text = f"message {n}: {WORDS[n % len(WORDS)]} and {WORDS[(n * 7) % len(WORDS)]} with friends"
            if n % 997 == 0:
                text = f"my name is Person{who} and I live in City{n % 50}"
            rows.append(
                {
                    "role": "user",
                    "text": text,
                    "author": f"Person {who}",
                    "author_id": f"p{who}",
                    "message_id": f"b{n}",
                    "ts": f"2026-{1 + n * 11 // messages:02d}-15T10:00:00Z",
                }
            )
        body = {"messages": rows, "more": start + batch < messages, "title": "The big group"}
        r = await c.post(f"/v1/chats/{BIG}/import", headers=AUTH, json=body, timeout=600)
        assert r.status_code == 200, r.text


async def _time_page(c: httpx.AsyncClient, path: str, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = await c.get(path)
        out.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200, (path, r.status_code)
    return out


async def _directory_cost(
    host: EmbeddedMemoryHost, c: httpx.AsyncClient, chat: str, n: int
) -> tuple[float, float, float]:
    """Medians of: a turn over HTTP (its own report included), a report after a turn, after a reply."""
    assert host.host is not None
    turn_ms, report_turn, report_reply = [], [], []
    for i in range(n):
        body = {
            "text": f"bench turn {i} about chess",
            "author": "Bench",
            "author_id": f"bench{i % 3}",
            "message_id": f"bench-{chat}-{i}-{time.time_ns()}",
        }
        t = time.perf_counter()
        r = await c.post(f"/v1/chats/{chat}/turn", headers=AUTH, json=body)
        turn_ms.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200
        op = Operation("turn", chat, {"author_id": body["author_id"]})
        t = time.perf_counter()
        await after_write(host.host, op)
        report_turn.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        await after_write(host.host, Operation("reply", chat, {}))
        report_reply.append((time.perf_counter() - t) * 1000)
    return statistics.median(turn_ms), statistics.median(report_turn), statistics.median(report_reply)


def _directory_rows_changed(host: EmbeddedMemoryHost) -> int:
    assert host.host is not None
    memory = host.host.store.open("@directory")
    return int(memory.sql.exec("SELECT total_changes() AS n")[0]["n"])


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chats", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument(
        "--runtime",
        choices=("cpython", "pyodide"),
        default="cpython",
        help="pyodide: the pages of the Worker's own code on Pyodide (needs make pyodide); no directory cost",
    )
    args = ap.parse_args()
    if args.runtime == "pyodide":
        return await pyodide_pages(args)
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedMemoryHost(Path(tmp), token=TOKEN) as host:
            assert host.host is not None
            async with httpx.AsyncClient(base_url=host.url, trust_env=False, timeout=120) as c:
                t = time.perf_counter()
                await _seed_directory(c, args.chats)
                await _seed_big_chat(c, args.messages)
                print(
                    f"seeded {args.chats} chats and a {args.messages:,}-message chat in "
                    f"{time.perf_counter() - t:.0f} s",
                    file=sys.stderr,
                )
                await c.get(f"/v1/chats/{BIG}/search", params={"q": "warm"}, headers=AUTH)  # index settled
                r = await c.post("/dashboard/login", data={"token": TOKEN})
                assert r.status_code == 303
                overview = await _time_page(c, "/dashboard", args.repeats)
                chat = await _time_page(c, f"/dashboard/chat/{BIG}", args.repeats)
                person = await _time_page(c, f"/dashboard/chat/{BIG}/person/p3", args.repeats)
                searched = await _time_page(c, f"/dashboard/chat/{BIG}?q=lisbon+chess", args.repeats)
                dash = Dashboard(DashRequest("GET", "/dashboard"), HostBackend(host.host))
                search = []
                for q in ("chess with friends", "City7", "piano museum", "budget", "where does Person3 live"):
                    for _ in range(max(1, args.repeats // 5)):
                        t = time.perf_counter()
                        await dash.search(BIG, q)
                        search.append((time.perf_counter() - t) * 1000)
                print(f"\nrendered over HTTP on the local host, {args.repeats} repeats each:")
                print(f"  overview, {len(overview) and args.chats} chats           {_figures(overview)}")
                print(f"  chat page, {args.messages:,} messages     {_figures(chat)}")
                print(f"  person page, same chat          {_figures(person)}")
                print(f"  chat page with a search         {_figures(searched)}")
                print(f"  search alone (route + context)  {_figures(search)}")
                before = _directory_rows_changed(host)
                small = "telegram:-5"
                await c.post(
                    f"/v1/chats/{small}/turn", headers=AUTH, json={"text": "hello", "author_id": "a"}
                )
                n = 60
                start = _directory_rows_changed(host)
                costs_small = await _directory_cost(host, c, small, n)
                rows = _directory_rows_changed(host) - start
                costs_big = await _directory_cost(host, c, BIG, n)
                print(
                    "\nthe directory's cost per message (a report: the chat's counts, the directory's upsert)"
                )
                for label, (turn, rep_t, rep_r) in (
                    ("a 1-message chat", costs_small),
                    (f"the {args.messages:,}-message chat", costs_big),
                ):
                    print(
                        f"  {label:28} turn {turn:6.2f} ms; report after a turn {rep_t:5.2f} ms "
                        f"({rep_t / turn:4.0%} of the turn), after a reply {rep_r:5.2f} ms"
                    )
                print(
                    f"  directory rows written per turn + its reply: {rows / n:.1f} "
                    f"(changes counted by SQLite; {before} while seeding)"
                )
    return 0


async def pyodide_pages(args: argparse.Namespace) -> int:
    """The same pages answered by the Worker's code on Pyodide (its directory object, its chats' objects)."""
    from memory_worker.pyodide_runtime import PyodideHost

    with tempfile.TemporaryDirectory() as tmp:
        host = PyodideHost(Path(tmp), TOKEN).start()
        try:
            async with httpx.AsyncClient(base_url=host.url, trust_env=False, timeout=600) as c:
                t = time.perf_counter()
                await _seed_directory(c, args.chats)
                await _seed_big_chat(c, args.messages)
                print(f"seeded in {time.perf_counter() - t:.0f} s", file=sys.stderr)
                await c.get(f"/v1/chats/{BIG}/search", params={"q": "warm"}, headers=AUTH)
                assert (await c.post("/dashboard/login", data={"token": TOKEN})).status_code == 303
                pages = [
                    (f"overview, {args.chats} chats", "/dashboard"),
                    (f"chat page, {args.messages:,} messages", f"/dashboard/chat/{BIG}"),
                    ("person page, same chat", f"/dashboard/chat/{BIG}/person/p3"),
                    ("chat page with a search", f"/dashboard/chat/{BIG}?q=lisbon+chess"),
                ]
                print(f"\nrendered over HTTP by the Worker on Pyodide, {args.repeats} repeats each:")
                for label, path in pages:
                    print(f"  {label:32} {_figures(await _time_page(c, path, args.repeats))}")
        finally:
            host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
