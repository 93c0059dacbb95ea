"""What the memory prompt brings of a question's evidence on LoCoMo, and at what size.

    .venv/bin/python benchmarks/prompt_recall.py [--data ../shared/locomo/locomo-dev.json]
        [--grid]

Each conversation is imported into a fresh in-process memory (`ChatMemory.import_messages`,
message_id = dia_id); each question with evidence is ranked (`search`, k = PROMPT_MOST) and
`retrieval.fit_budget` keeps what the prompt carries. Figures: recall of the evidence in what
is kept (beside R@3, the seed's three), retrieved messages and characters per turn, per
category. `--grid` tries other budgets and bars (tune on the dev split only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "memory_worker" / "src"))
sys.path.insert(0, str(ROOT))

from recall_data import load, questions, turns  # noqa: E402

from memory_engine import ChatMemory  # noqa: E402
from memory_engine.index import budget as retrieval  # noqa: E402
from memory_worker.local import SqliteStorage  # noqa: E402


def ranked_questions(path: str) -> list[dict[str, Any]]:
    """Every question with evidence and its ranked messages (k = PROMPT_MOST)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="prompt_recall_") as tmp:
        for n, conv in enumerate(load(path)):
            memory = ChatMemory(SqliteStorage(str(Path(tmp) / f"{n}.sqlite")))
            msgs = turns(conv)
            for start in range(0, len(msgs), 5000):
                memory.import_messages(msgs[start : start + 5000])
            valid = {m["message_id"] for m in msgs}
            for q in questions(conv, valid):
                results = memory.search(q["question"], k=retrieval.PROMPT_MOST)["results"]
                out.append({**q, "ranked": results})
    return out


def measure(rows: list[dict[str, Any]], **knobs: Any) -> dict[str, Any]:
    """Recall of the kept messages, their count and characters, overall and per category."""
    recall, count, chars, per = [], [], [], {}
    for q in rows:
        kept = retrieval.fit_budget(q["ranked"], **knobs)
        ids = {m["message_id"] for m in kept}
        r = len(ids & q["evidence"]) / len(q["evidence"])
        recall.append(r)
        count.append(len(kept))
        chars.append(sum(len(m["text"]) for m in kept))
        per.setdefault(q["category"], []).append(r)
    return {
        "recall": statistics.fmean(recall),
        "messages": statistics.fmean(count),
        "chars": statistics.fmean(chars),
        "per": {c: statistics.fmean(v) for c, v in sorted(per.items())},
    }


def main(argv: list[str] | None = None) -> int:
    """Print the seed's three beside the budget (and a grid of other knobs with --grid)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="/work/shared/locomo/locomo-dev.json")
    parser.add_argument("--grid", action="store_true")
    args = parser.parse_args(argv)
    rows = ranked_questions(args.data)
    runs = {"top 3 (the seed)": {"floor": 3, "most": 3}, "budget (shipped)": {}}
    if args.grid:
        for budget in (800, 1200, 1500, 2000, 3000):
            for relative in (0.3, 0.5, 0.7):
                runs[f"budget {budget}, bar {relative}"] = {"budget": budget, "relative": relative}
    print(f"{len(rows)} questions with evidence\n")
    print("| what | recall | messages/turn | retrieved chars/turn | per category (1-5) |")
    print("| --- | ---: | ---: | ---: | --- |")
    for name, knobs in runs.items():
        m = measure(rows, **knobs)
        per = " / ".join(f"{v:.3f}" for v in m["per"].values())
        print(f"| {name} | {m['recall']:.3f} | {m['messages']:.1f} | {m['chars']:.0f} | {per} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
