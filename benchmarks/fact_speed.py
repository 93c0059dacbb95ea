"""Speed of the rule-based fact extractor beside baselines, and proof that the output is the same.

    .venv/bin/python benchmarks/fact_speed.py [--passes 5] [--baseline-ref REF ...] [--data PATH]
        [--import-messages 20000] [--random 20000]

Each REF's whole `memory_engine` tree (default: `main`) is extracted with `git archive` into a
temporary directory and imported in its own subprocess with that tree first on `sys.path` (the
engine's modules import each other as `memory_engine.*`, so two versions cannot share one
process); this branch's working tree runs in one more. The parent sends each the same corpora
and asks for timed passes, interleaved, and for the outputs. Timed corpora:

- every LoCoMo dev turn (`conversation.session_N[*].text`): chat that mostly passes the gates;
- every message of tests/data/facts_informal.jsonl: informal chat, most of it stating a fact;
- the messages of the import benchmark's synthetic Telegram export
  (`import_throughput.write_export`, rendered as the importer does): most state nothing.

It prints the best CPU time per message of each (`time.process_time`: the shared machine's load
moves wall time far more), their ratios, and how many outputs differ from the last REF (must be
0) on: those corpora, the labelled sentences, every string constant of the fact tests, and
seeded random strings (tests/engine/test_facts_speed_equivalence.py's generator); each text alone
and with the text before it as the speaker's previous message, and `looks_like_correction` of each.
LoCoMo is not shipped: it is read from /work/shared/locomo.
`--baseline-ref` may be given more than once (e.g. before a rule change and just before a speed
change): each is timed in the same passes; the output is compared with the last one.
"""

from __future__ import annotations

import argparse
import ast
import gc
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
ENGINE = "memory_worker/src/memory_engine"
LOCOMO = Path("/work/shared/locomo/locomo-dev.json")
LABELLED = ROOT / "tests" / "data" / "facts_labelled.jsonl"
INFORMAL = ROOT / "tests" / "data" / "facts_informal.jsonl"
TIMED = ("LoCoMo turns", "informal messages", "import messages")


def locomo_turns(path: Path = LOCOMO) -> list[str]:
    """The text of every turn of every LoCoMo dev conversation, in order."""
    turns: list[str] = []
    for conv in json.loads(path.read_text(encoding="utf-8")):
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                turns.extend(t["text"] for t in value if t.get("text"))
    return turns


def informal_messages(path: Path = INFORMAL) -> list[str]:
    """Every message of the informal chat corpus, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [m for line in lines if line.strip() for m in json.loads(line)["messages"]]


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
    """Every string constant of the fact tests."""
    out: list[str] = []
    for path in sorted((ROOT / "tests" / "engine").glob("test_*fact*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                out.append(node.value)
    return out


def random_texts(n: int) -> list[str]:
    """Seeded random messages from the equivalence test's generator, and its edge cases."""
    equivalence = importlib.import_module("tests.engine.test_facts_speed_equivalence")
    return [*equivalence.random_strings(n, seed=99), *equivalence.EDGES]


def ref_tree(ref: str, into: Path) -> Path:
    """The `memory_engine` tree of `ref`, extracted under `into`: the directory to put on sys.path."""
    git = ["git", "-C", str(ROOT), "archive", ref, ENGINE]
    archive = subprocess.run(git, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "memory_worker" / "src"


# --- the worker: one extractor version in its own process -------------------------------------


def _outputs(module: Any, texts: list[str]) -> list[Any]:
    """Each text's facts alone, after the text before it, and looks_like_correction of it."""
    extract = module.extract_facts

    def plain(cs: list[Any]) -> list[list[Any]]:
        return [[c.key, c.value, c.remove_from, c.add] for c in cs]

    before = [None, *texts[:-1]]
    return [
        [plain(extract(t)), plain(extract(t, p)), module.looks_like_correction(t)]
        for t, p in zip(texts, before, strict=True)
    ]


def _time(extract: Any, texts: list[str]) -> float:
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


def serve(src: str, corpora_path: str) -> int:
    """Worker: import the extractor from `src`, answer one JSON request a line on stdin."""
    sys.path.insert(0, src)
    module = importlib.import_module("memory_engine.facts.extract")
    corpora: dict[str, list[str]] = json.loads(Path(corpora_path).read_text(encoding="utf-8"))
    for line in sys.stdin:
        request = json.loads(line)
        texts = corpora[request["corpus"]]
        if request["do"] == "time":
            answer: Any = _time(module.extract_facts, texts)
        elif request["do"] == "count":
            answer = sum(len(module.extract_facts(t)) for t in texts)
        else:
            answer = _outputs(module, texts)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


class Worker:
    """One extractor version's subprocess."""

    def __init__(self, src: Path, corpora: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(src), str(corpora)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=str(ROOT),
        )

    def ask(self, do: str, corpus: str) -> Any:
        """Send one request and wait for its answer."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps({"do": do, "corpus": corpus}) + "\n")
        stdin.flush()
        return json.loads(stdout.readline())

    def close(self) -> None:
        """End the subprocess (its stdin closed: it returns)."""
        stdin: IO[str] | None = self.proc.stdin
        if stdin is not None:
            stdin.close()
        self.proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when any output differs from the last baseline."""
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--serve":
        return serve(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--baseline-ref", action="append", default=None)
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--import-messages", type=int, default=20_000)
    parser.add_argument("--random", type=int, default=20_000, help="random strings compared")
    args = parser.parse_args(argv)
    refs: list[str] = args.baseline_ref or ["main"]
    sys.path[:0] = [str(ROOT), str(ROOT / "memory_worker" / "src"), str(ROOT / "benchmarks")]

    labelled = LABELLED.read_text(encoding="utf-8").splitlines()
    corpora = {
        "LoCoMo turns": locomo_turns(args.data),
        "informal messages": informal_messages(),
        "import messages": import_messages(args.import_messages),
        "labelled sentences": [json.loads(line)["text"] for line in labelled if line.strip()],
        "fact test strings": test_strings(),
        "random strings": random_texts(args.random),
    }
    with tempfile.TemporaryDirectory(prefix="fact_speed_") as tmp:
        corpora_path = Path(tmp) / "corpora.json"
        corpora_path.write_text(json.dumps(corpora), encoding="utf-8")
        trees = [ref_tree(ref, Path(tempfile.mkdtemp(dir=tmp))) for ref in refs]
        workers = [Worker(src, corpora_path) for src in [*trees, ROOT / "memory_worker" / "src"]]
        try:
            return report(args, refs, corpora, workers)
        finally:
            for w in workers:
                w.close()


def report(
    args: argparse.Namespace, refs: list[str], corpora: dict[str, list[str]], workers: list[Worker]
) -> int:
    """Time the workers, interleaved, compare their outputs and print it all."""
    diffs = {}
    for name in corpora:
        old, new = workers[-2].ask("outputs", name), workers[-1].ask("outputs", name)
        diffs[name] = sum(a[k] != b[k] for a, b in zip(old, new, strict=True) for k in range(3))
    best = {(name, j): float("inf") for name in TIMED for j in range(len(workers))}
    for i in range(args.passes):
        for name in TIMED:
            for j, w in enumerate(workers):
                best[name, j] = min(best[name, j], w.ask("time", name))
        so_far = "; ".join(
            name + " " + " vs ".join(f"{best[name, j] * 1e6:.1f}" for j in range(len(workers)))
            for name in TIMED
        )
        print(f"pass {i + 1}/{args.passes}: best so far (us) {so_far}", file=sys.stderr)
    for name in TIMED:
        found = [w.ask("count", name) for w in workers]
        print(f"\n{len(corpora[name])} {name}; best CPU time of {args.passes} passes, per message:")
        print("| extractor | facts found | us / message | messages / s | vs first |")
        print("| --- | ---: | ---: | ---: | ---: |")
        first = best[name, 0]
        for j, ref in enumerate([*refs, "this branch"]):
            label = ref if j == len(refs) else f"{ref} (baseline)"
            b = best[name, j]
            print(f"| {label} | {found[j]} | {b * 1e6:.1f} | {1 / b:,.0f} | {b / first:.3f} |")
    checks = sum(3 * len(texts) for texts in corpora.values())
    print(f"\ndiffering outputs vs {refs[-1]}", end=" ")
    print("(each text alone, after the text before it, looks_like_correction):")
    for name, texts in corpora.items():
        print(f"- {name}: {diffs[name]} of {3 * len(texts)}")
    print(f"- total: {sum(diffs.values())} of {checks}")
    return 1 if any(diffs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
