"""Retrieval recall on short-message chats of our own, beside LoCoMo dev, per retrieval variant.

    .venv/bin/python benchmarks/chat_recall.py [--locomo ../shared/locomo/locomo-dev.json]
        [--variant NAME ...]

The chats (tests/data/recall_chats/dev.txt: two people, many short messages over days, facts in
passing, questions answered in the next message, hobbies spread over messages) are replayed
into a fresh in-process chat each (message_id = line tag, author, ts), and every question is
ranked by `ChatMemory.search`, the search route's code. Recall@k = |top-k ∩ evidence| /
|evidence|, per question kind and overall. With --locomo, LoCoMo dev is scored the same way in
the same run (as locomo_recall.py's in-process rows), so every variant is compared on both.
A variant is RetrievalSettings overrides (VARIANTS); "shipped" is the defaults.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from recall_data import load, progress, questions, turns
from recall_scoring import KS, Tally, sum_tallies

from memory_engine.index.retrieval import SHIPPED, RetrievalSettings

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "recall_chats" / "dev.txt"
KINDS = ("single", "answer", "gather")
_LINE = re.compile(r"^([^:?=#][^:]*): (.*?)(?:\s*\{([^}]*)\})?$")
_QUESTION = re.compile(r"^\? (\w+): (.*?)\s*\{([^}]*)\}$")

# Retrieval variants by name: RetrievalSettings overrides (the ablation of this benchmark).
VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "no concepts": {"concepts": False},
    "cue weight 0.5": {"cue_weight": 0.5},
    "cue weight 1.0": {"cue_weight": 1.0},
}


def parse(path: Path = DATA) -> list[dict[str, Any]]:
    """The chats of a recall_chats file: messages (import form) and questions with evidence ids."""
    chats: list[dict[str, Any]] = []
    day = datetime(2026, 1, 1, tzinfo=UTC)
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("== chat "):
            chats.append({"name": line[8:], "messages": [], "questions": [], "tags": {}})
        elif line.startswith("== day "):
            day = datetime.fromisoformat(line[7:]).replace(hour=9, tzinfo=UTC)
            minute = 0
        elif q := _QUESTION.match(line):
            chats[-1]["questions"].append({"kind": q[1], "question": q[2], "tags": q[3].split()})
        elif m := _LINE.match(line):
            chat = chats[-1]
            mid = f"{chat['name']}:{len(chat['messages']) + 1}"
            minute += 2
            ts = (day + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            chat["messages"].append(
                {"role": "user", "text": m[2], "author": m[1], "message_id": mid, "ts": ts}
            )
            for tag in (m[3] or "").split():
                chat["tags"].setdefault(tag, set()).add(mid)
        else:
            raise ValueError(f"unreadable line: {raw!r}")
    for chat in chats:
        for q in chat["questions"]:
            q["evidence"] = set().union(*(chat["tags"][t] for t in q["tags"]))
    return chats


def _memory(msgs: list[dict[str, Any]], knobs: RetrievalSettings) -> Any:
    from memory_engine import ChatMemory
    from memory_worker.local import SqliteStorage

    memory = ChatMemory(SqliteStorage(":memory:"), retrieval=knobs)
    memory.import_messages(msgs)
    return memory


def _ranked(memory: Any, question: str) -> list[str]:
    return [m["message_id"] for m in memory.search(question, max(KS))["results"]]


def chat_tally(chats: list[dict[str, Any]], knobs: RetrievalSettings) -> Tally:
    """Recall per kind over our chats with these knobs."""
    tally = Tally()
    for chat in chats:
        memory = _memory(chat["messages"], knobs)
        for q in chat["questions"]:
            tally.add(q["kind"], q["evidence"], _ranked(memory, q["question"]))
    return tally


def locomo_tally(convs: list[dict[str, Any]], knobs: RetrievalSettings) -> Tally:
    """Recall per category over LoCoMo conversations with these knobs (in process)."""
    tallies = []
    for n, conv in enumerate(convs, 1):
        progress(f"locomo {n}/{len(convs)}")
        msgs = turns(conv)
        memory = _memory(msgs, knobs)
        tally = Tally()
        for q in questions(conv, {m["message_id"] for m in msgs}):
            tally.add(q["category"], q["evidence"], _ranked(memory, q["question"]))
        tallies.append(tally)
    print(file=sys.stderr)
    return sum_tallies(tallies)


def _fmt(r: tuple[float, ...]) -> str:
    return "/".join(f"{v:.3f}" for v in r)


def main(argv: list[str] | None = None) -> int:
    """Score each variant on our chats (and LoCoMo dev); print one row per variant."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--locomo", help="LoCoMo dev JSON, scored in the same run")
    parser.add_argument("--variant", action="append", help="a VARIANTS name (default: all)")
    parser.add_argument("--misses", action="store_true", help="print the chats' questions below full R@3")
    args = parser.parse_args(argv)
    chats = parse(Path(args.data))
    convs = load(args.locomo) if args.locomo else []
    nq = sum(len(c["questions"]) for c in chats)
    print(f"{len(chats)} chats, {sum(len(c['messages']) for c in chats)} messages, {nq} questions")
    head = f"{'variant':<22} {'chats all':>11} " + " ".join(f"{k:>11}" for k in KINDS)
    print(head + (f" {'locomo dev':>11}" if convs else "") + "   (R@3/R@10)")
    for name in args.variant or list(VARIANTS):
        knobs = dataclasses.replace(SHIPPED, **VARIANTS[name])
        tally = chat_tally(chats, knobs)
        row = f"{name:<22} {_fmt(tally.recall()):>11} " + " ".join(
            f"{_fmt(tally.recall(k)):>11}" for k in KINDS
        )
        if convs:
            row += f" {_fmt(locomo_tally(convs, knobs).recall()):>11}"
        print(row, flush=True)
        if args.misses:
            for chat in chats:
                memory = _memory(chat["messages"], knobs)
                for q in chat["questions"]:
                    got = _ranked(memory, q["question"])
                    if not q["evidence"] <= set(got[:3]):
                        print(f"  {q['kind']:<7} {q['question']}  want {sorted(q['evidence'])} got {got[:5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
