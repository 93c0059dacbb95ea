"""Speed of the rule-based fact extractor beside a baseline, and proof that the output is the same.

    .venv/bin/python benchmarks/fact_speed.py [--passes 5] [--baseline-ref REF ...] [--data PATH]
        [--import-messages 20000] [--random 20000]

Loads the `facts*.py` modules as they are at REF (default: the last commit before the
speed work, 99c3e8c; `--baseline-ref main` for the last change) into a temporary package beside
the current engine and times both, several passes interleaved, on two corpora:

- every LoCoMo dev turn (`conversation.session_N[*].text`): chat that mostly passes the gates;
- the messages of the import benchmark's synthetic Telegram export
  (`import_throughput.write_export`, rendered as the importer does): most state nothing.

It prints the best CPU time per message of each (`time.process_time`: the shared machine's load
moves wall time far more), their ratios, and how many outputs differ from the last REF (must be
0) on: the LoCoMo turns, the import messages, the labelled sentences, every string constant of
the fact tests and every message of tests/data/facts_informal.jsonl, and seeded random strings
(tests/engine/test_facts_speed_equivalence.py's generator); each text alone and with the text before
it as the speaker's previous message, and `looks_like_correction` of each.
LoCoMo is not shipped: it is read from /work/shared/locomo.
`--baseline-ref` may be given more than once (e.g. before a rule change and just before a speed
change): each is timed in the same passes; the output is compared with the last one.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import inspect
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
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


def import_messages(n: int) -> list[str]:
    """The words of the first `n` messages of the import benchmark's export, as the importer renders them."""
    from import_throughput import write_export

    from bot.importers.telegram import render

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.json"
        write_export(path, n)
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
    return [text for m in messages if m.get("type") == "message" and (text := render(m))]


def test_strings() -> list[str]:
    """Every string constant of the fact tests and every message of the informal corpus."""
    out: list[str] = []
    for path in sorted((ROOT / "tests").glob("test_fact*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                out.append(node.value)
    informal = (ROOT / "tests" / "data" / "facts_informal.jsonl").read_text(encoding="utf-8")
    for line in informal.splitlines():
        if line.strip():
            out.extend(json.loads(line)["messages"])
    return out


def random_texts(n: int) -> list[str]:
    """Seeded random messages from the equivalence test's generator, and its edge cases."""
    equivalence = importlib.import_module("tests.engine.test_facts_speed_equivalence")
    return [*equivalence.random_strings(n, seed=99), *equivalence.EDGES]


Change = tuple[Any, ...]


def outputs(
    extract: Callable[..., list[Any]], texts: list[str], previous: bool = False
) -> list[list[Change]]:
    """Each text's facts as plain tuples, comparable across the two modules (with `previous`:
    the text before it passed as the speaker's previous message)."""
    if not previous:
        return [[(c.key, c.value, c.remove_from, c.add) for c in extract(t)] for t in texts]
    before = [None, *texts[:-1]]
    return [
        [(c.key, c.value, c.remove_from, c.add) for c in extract(t, p)]
        for t, p in zip(texts, before, strict=True)
    ]


def differing(old: Any, new: Any, texts: list[str]) -> int:
    """How many outputs differ between two extractor packages: each text alone, with the text
    before it as its previous message, and looks_like_correction of it."""
    n = sum(
        a != b
        for a, b in zip(outputs(old.extract_facts, texts), outputs(new.extract_facts, texts), strict=True)
    )
    if "previous" not in inspect.signature(old.extract_facts).parameters:
        return n  # a baseline from before corrections (99c3e8c): the text alone only
    pairs = zip(outputs(old.extract_facts, texts, True), outputs(new.extract_facts, texts, True), strict=True)
    n += sum(a != b for a, b in pairs)
    return n + sum(old.looks_like_correction(t) != new.looks_like_correction(t) for t in texts)


def time_per_message(extract: Callable[[str], Any], texts: list[str]) -> float:
    """CPU seconds per message of one pass over `texts` (no garbage collection in between: the
    corpora and outputs held here would make its passes cost more than the extractor's own)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        for t in texts:
            extract(t)
        return (time.process_time() - start) / len(texts)
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when any output differs from the baseline."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--baseline-ref", action="append", default=None)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--import-messages", type=int, default=20_000)
    parser.add_argument("--random", type=int, default=20_000, help="random strings compared")
    args = parser.parse_args(argv)
    refs: list[str] = args.baseline_ref or ["99c3e8c"]

    from memory_engine.facts import extract as facts

    olds = [baseline_module(ref, f"facts_reference_{i}") for i, ref in enumerate(refs)]
    old = olds[-1]
    lines = LABELLED.read_text(encoding="utf-8").splitlines()
    corpora = {
        "LoCoMo turns": locomo_turns(args.data),
        "import messages": import_messages(args.import_messages),
        "labelled sentences": [json.loads(line)["text"] for line in lines if line.strip()],
        "fact test strings": test_strings(),
        "random strings": random_texts(args.random),
    }
    diffs = {name: differing(old, facts, texts) for name, texts in corpora.items()}
    timed = ["LoCoMo turns", "import messages"]
    best = {(name, j): float("inf") for name in timed for j in range(len(olds) + 1)}
    for i in range(args.passes):
        for name in timed:
            for j, module in enumerate([*olds, facts]):
                best[name, j] = min(best[name, j], time_per_message(module.extract_facts, corpora[name]))
        so_far = "; ".join(
            name + " " + " vs ".join(f"{best[name, j] * 1e6:.1f}" for j in range(len(olds) + 1))
            for name in timed
        )
        print(f"pass {i + 1}/{args.passes}: best so far (us) {so_far}", file=sys.stderr)
    for name in timed:
        found = sum(len(o) for o in outputs(facts.extract_facts, corpora[name]))
        print(f"\n{len(corpora[name])} {name}, {found} facts found;", end=" ")
        print(f"best CPU time of {args.passes} passes, per message:")
        print("| extractor | us / message | messages / s | speedup vs first |")
        print("| --- | ---: | ---: | ---: |")
        first = best[name, 0]
        for j, ref in enumerate([*refs, "this branch"]):
            label = ref if j == len(refs) else f"{ref} (baseline)"
            b = best[name, j]
            print(f"| {label} | {b * 1e6:.1f} | {1 / b:,.0f} | {first / b:.2f}x |")
    per = 3 if "previous" in inspect.signature(old.extract_facts).parameters else 1
    checks = sum(per * len(texts) for texts in corpora.values())
    print(f"\ndiffering outputs vs {refs[-1]}", end=" ")
    print("(each text alone, after the text before it, looks_like_correction):")
    for name, texts in corpora.items():
        print(f"- {name}: {diffs[name]} of {per * len(texts)}")
    print(f"- total: {sum(diffs.values())} of {checks}")
    return 1 if any(diffs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
