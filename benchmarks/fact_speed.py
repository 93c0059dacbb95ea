"""Speed of the rule-based fact extractor on LoCoMo chat turns, beside a baseline, same output.

    .venv/bin/python benchmarks/fact_speed.py [--passes 5] [--baseline-ref REF ...] [--data PATH]

Loads the `facts*.py` modules as they are at REF (default: the last commit before the
speed work, 99c3e8c) into a temporary package beside the current engine, runs both
extractors over every LoCoMo dev turn (`conversation.session_N[*].text`), several passes
interleaved, and prints the best time per message of each, their ratio, and the number of
turns whose output differs (must be 0). The labelled sentences (tests/data/facts_labelled.jsonl)
are compared as well. LoCoMo is not shipped: it is read from /work/shared/locomo.
`--baseline-ref` may be given more than once (e.g. before a rule change and just before a speed
change): each is timed in the same passes; the output is compared with the last one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "memory_worker" / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fact_accuracy import baseline_module  # noqa: E402  # one loader of a ref's extractor

LOCOMO = Path("/work/shared/locomo/locomo-dev.json")
LABELLED = ROOT / "tests" / "data" / "facts_labelled.jsonl"


def locomo_turns(path: Path = LOCOMO) -> list[str]:
    """The text of every turn of every LoCoMo dev conversation, in order."""
    turns: list[str] = []
    for conv in json.loads(path.read_text(encoding="utf-8")):
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend(t["text"] for t in value if t.get("text"))
    return turns


def outputs(extract: Callable[[str], list[Any]], texts: list[str]) -> list[list[tuple[Any, ...]]]:
    """Each text's facts as plain tuples, comparable across the two modules."""
    return [[(c.key, c.value, c.remove_from, c.add) for c in extract(t)] for t in texts]


def differing(old: Callable[[str], list[Any]], new: Callable[[str], list[Any]], texts: list[str]) -> int:
    """How many texts get a different output from the two extractors."""
    return sum(a != b for a, b in zip(outputs(old, texts), outputs(new, texts), strict=True))


def time_per_message(extract: Callable[[str], Any], texts: list[str]) -> float:
    """Seconds per message of one pass over `texts`."""
    start = time.perf_counter()
    for t in texts:
        extract(t)
    return (time.perf_counter() - start) / len(texts)


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when any output differs from the baseline."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--baseline-ref", action="append", default=None)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    args = parser.parse_args(argv)
    refs: list[str] = args.baseline_ref or ["99c3e8c"]

    from memory_engine import facts

    olds = [baseline_module(ref, f"facts_reference_{i}") for i, ref in enumerate(refs)]
    old = olds[-1]
    turns = locomo_turns(args.data)
    lines = LABELLED.read_text(encoding="utf-8").splitlines()
    labelled = [json.loads(line)["text"] for line in lines if line.strip()]
    diff_turns = differing(old.extract_facts, facts.extract_facts, turns)
    diff_labelled = differing(old.extract_facts, facts.extract_facts, labelled)
    best_olds = [float("inf")] * len(olds)
    best_new = float("inf")
    for i in range(args.passes):
        for j, module in enumerate(olds):
            best_olds[j] = min(best_olds[j], time_per_message(module.extract_facts, turns))
        best_new = min(best_new, time_per_message(facts.extract_facts, turns))
        so_far = " vs ".join(f"{b * 1e6:.1f}" for b in [*best_olds, best_new])
        print(f"pass {i + 1}/{args.passes}: best so far {so_far} us")
    found = sum(len(o) for o in outputs(facts.extract_facts, turns))
    print(f"\n{len(turns)} LoCoMo turns, {found} facts found; best of {args.passes} passes, per message:")
    print("| extractor | us / message | messages / s | speedup vs first |")
    print("| --- | ---: | ---: | ---: |")
    first = best_olds[0]
    for ref, best in zip(refs, best_olds, strict=True):
        print(f"| {ref} (baseline) | {best * 1e6:.1f} | {1 / best:,.0f} | {first / best:.2f}x |")
    print(f"| this branch | {best_new * 1e6:.1f} | {1 / best_new:,.0f} | {first / best_new:.2f}x |")
    print(f"\ndiffering outputs vs {refs[-1]}: {diff_turns} of {len(turns)} LoCoMo turns,", end=" ")
    print(f"{diff_labelled} of {len(labelled)} labelled sentences")
    return 1 if diff_turns or diff_labelled else 0


if __name__ == "__main__":
    sys.exit(main())
