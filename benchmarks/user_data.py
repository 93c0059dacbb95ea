"""What the user-data additions (issues 14/15) cost at 100k messages, in process.

    .venv/bin/python benchmarks/user_data.py [--messages 100000]

One chat of N messages from 100 authors spread over 100 days (about N/100 of them today),
50 notes and a topic start. Measured in the same run:
- `turn` with everything (notes, topic start, persona, usage_today_author) against the same
  turns with those additions switched off (the baseline), p50/p99 and the ratio;
- `usage_today_author` alone (the caps query);
- a whole-chat export followed page by page (1000 per page): messages/s, and the peak Python
  memory of one page against the size of the whole export's JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "memory_worker" / "src")]

from memory_engine import chat_state, engine, notes, user_data  # noqa: E402
from memory_engine.engine import ChatMemory  # noqa: E402
from memory_worker.local import SqliteStorage  # noqa: E402

WORDS = [
    "kayak",
    "fjord",
    "standup",
    "coffee",
    "chess",
    "garden",
    "violin",
    "tram",
    "rain",
    "paper",
    "lamp",
    "river",
]


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def build(path: Path, n: int) -> ChatMemory:
    """A chat of n messages over 100 days, 50 notes, a persona and a topic start."""
    memory = ChatMemory(SqliteStorage(path))
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    batch = []
    for i in range(n):
        day = today - timedelta(days=99 - i * 100 // n)
        batch.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "text": f"message {i} about {WORDS[i % len(WORDS)]} and {WORDS[(i * 7) % len(WORDS)]}",
                "author": f"user{i % 100}",
                "author_id": f"u{i % 100}",
                "message_id": f"m{i}",
                "ts": engine.utc_iso(day + timedelta(seconds=i % 80_000)),
            }
        )
        if len(batch) == 5000:
            memory.import_messages(batch)
            batch = []
            print(f"\rbuilding: {i + 1}/{n}", end="", file=sys.stderr, flush=True)
    if batch:
        memory.import_messages(batch)
    print(file=sys.stderr)
    for k in range(50):
        notes.add_note(memory.sql, f"note {k}: remember the {WORDS[k % len(WORDS)]}", "u", "u1", memory.now())
    memory.update_settings(persona="Be brief.")
    chat_state.start_topic(memory.sql, memory.now())
    return memory


def time_turns(memory: ChatMemory, count: int, tag: str) -> list[float]:
    """Milliseconds per turn for `count` turns."""
    out = []
    for i in range(count):
        started = time.perf_counter()
        memory.turn(f"what about the {WORDS[i % len(WORDS)]} {tag}{i}?", f"user{i % 100}", f"u{i % 100}")
        out.append((time.perf_counter() - started) * 1000)
    return out


def without_additions(memory: ChatMemory, count: int) -> list[float]:
    """The same turns with notes, topic start and the extras switched off."""
    saved = engine.chat_state.turn_extras, engine.chat_state.topic_start, engine.current_notes
    # Stubs in place of the additions, restored below: the baseline of the same run.
    engine.chat_state.turn_extras = lambda *a, **k: {}  # type: ignore[assignment]  # a stub
    engine.chat_state.topic_start = lambda sql: (0, None)  # type: ignore[assignment]  # a stub
    engine.current_notes = lambda sql: []  # type: ignore[assignment]  # a stub
    try:
        return time_turns(memory, count, "base")
    finally:
        engine.chat_state.turn_extras, engine.chat_state.topic_start, engine.current_notes = saved


def export_run(memory: ChatMemory, trace: bool) -> tuple[float, int, int, int]:
    """(seconds, messages, peak bytes of one page or 0, bytes of the whole export as JSON)."""
    total_bytes = peak = count = 0
    after: int | None = None
    upto: int | None = None
    started = time.perf_counter()
    while True:
        if trace:
            tracemalloc.start()
        page = user_data.export_page(
            memory.sql,
            "bench",
            None,
            memory.now(),
            after,
            upto,
            1000,
            memory.settings,
            memory.summary,
            memory.usage,
        )
        body = json.dumps(page, ensure_ascii=False).encode("utf-8")
        if trace:
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        total_bytes += len(body)
        count += len(page["messages"])
        upto = page["export"]["upto"]
        after = page["next_after"]
        if after is None:
            return time.perf_counter() - started, count, peak, total_bytes


def main() -> None:
    """Build the chat, measure, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        memory = build(Path(tmp) / "chat.sqlite3", args.messages)
        time_turns(memory, 20, "warm")
        base: list[float] = []
        full: list[float] = []
        for _ in range(4):  # interleaved, so drift of a shared machine hits both alike
            base += without_additions(memory, args.turns // 4)
            full += time_turns(memory, args.turns // 4, "full")
        day = memory.now()[:10]
        caps = []
        for i in range(200):
            started = time.perf_counter()
            chat_state.usage_today_author(memory.sql, f"u{i % 100}", day)
            caps.append((time.perf_counter() - started) * 1000)
        seconds, exported, _, size = export_run(memory, trace=False)
        _, _, peak, _ = export_run(memory, trace=True)  # tracemalloc slows it: timed apart
    b50, f50 = percentile(base, 50), percentile(full, 50)
    print(f"chat: {args.messages:,} messages, 100 authors, 50 notes, a topic start")
    print(f"{'turn':<34}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'  baseline (additions off)':<34}{b50:>10.2f}{percentile(base, 99):>10.2f}")
    print(f"{'  with notes/topic/persona/usage':<34}{f50:>10.2f}{percentile(full, 99):>10.2f}")
    print(f"  ratio p50: {f50 / b50:.2f}x")
    print(f"usage_today_author alone: p50 {percentile(caps, 50):.3f} ms, p99 {percentile(caps, 99):.3f} ms")
    print(
        f"export: {exported:,} messages in {seconds:.2f} s = {exported / seconds:,.0f} messages/s; "
        f"peak memory of one page {peak / 1e6:.1f} MB vs whole export {size / 1e6:.1f} MB "
        f"({size / max(peak, 1):.0f}x)"
    )


if __name__ == "__main__":
    main()
