"""The LoCoMo turns cycled as a corpus, the CPU record and the progress line of memory_latency.py."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from typing import Any

from recall_data import load, turns

IMPORT_BATCH = 5_000
# CPU ms per turn of this process, per (design, size): on a shared machine the wall time
# swings with the load, the CPU a turn takes much less. Over HTTP the host runs in this
# process, so its CPU includes the client's share of the round trip.
CPU: dict[tuple[str, Any], list[float]] = {}


def progress(text: str) -> None:
    """Overwrite the progress line on stderr with `text`."""
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def progress_done() -> None:
    """End the progress line on stderr."""
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
