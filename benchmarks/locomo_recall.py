"""Retrieval recall on LoCoMo through the memory worker's HTTP API, beside a rank-bm25 baseline.

    .venv/bin/python benchmarks/locomo_recall.py --data ../shared/locomo/locomo-dev.json

Each conversation is imported into a fresh chat of a local host (EmbeddedMemoryHost on a
temp dir) with POST /import (message_id = dia_id, author = speaker, ts from the session
date), then every question with evidence is sent to GET /search (k=3 and k=10).
Recall@k = |top-k ∩ evidence| / |evidence|, averaged over those questions, per category
and overall. The baseline is rank-bm25's BM25Okapi over a plain lower-case word split.

`--holdout` adds the leave-conversations-out check: the retrieval knobs are tuned on some
conversations in process and measured on the others, beside the shipped defaults.

`--pad-to N` adds the recall at a chat's size: each conversation is imported (in process)
between the other conversations' turns, N messages in all, and asked its own questions. A
LoCoMo conversation has ~600 turns, where few terms reach retrieval.COUNT_CAP or exhaust
SCORE_BUDGET; at 10k they bind, and only this figure sees what they cost.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
KS = (3, 10)
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_WORD = re.compile(r"\w+")


# -- the data ----------------------------------------------------------------------------


def load(path: str | Path) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo JSON file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _session_start(raw: str | None, fallback: datetime) -> datetime:
    # "1:56 pm on 8 May, 2023"; a missing or odd date falls back to the previous session's
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime((raw or "").strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return fallback


def turns(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn of a conversation as an import message, in order (image turns get their caption)."""
    c = conv["conversation"]
    numbers = sorted(
        int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k) and isinstance(c[k], list)
    )
    out: list[dict[str, Any]] = []
    start = datetime(2020, 1, 1, tzinfo=UTC)
    for n in numbers:
        start = _session_start(c.get(f"session_{n}_date_time"), start)
        for i, t in enumerate(c[f"session_{n}"]):
            text = t.get("text") or ""
            if t.get("blip_caption"):
                text = f"{text} [shares {t['blip_caption']}]"
            ts = (start + timedelta(seconds=30 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            out.append(
                {
                    "role": "user",
                    "text": text or "(empty)",
                    "author": t["speaker"],
                    "message_id": t["dia_id"],
                    "ts": ts,
                }
            )
    return out


def normalise_id(raw: str) -> str | None:
    """`D<session>:<turn>` from a possibly malformed evidence id ("D:11:26", "D30:05")."""
    m = _EVIDENCE.fullmatch(raw.strip())
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else None


def questions(conv: dict[str, Any], valid: set[str]) -> list[dict[str, Any]]:
    """The questions that have evidence: question text, category, normalised evidence ids."""
    out = []
    for qa in conv["qa"]:
        ids = set()
        for item in qa.get("evidence") or []:
            for part in re.split(r"[;\s]+", str(item)):
                norm = normalise_id(part) if part else None
                if norm in valid:
                    ids.add(norm)
        if ids:
            out.append({"question": qa["question"], "category": int(qa["category"]), "evidence": ids})
    return out


# -- scoring -----------------------------------------------------------------------------


class Tally:
    """Recall@k sums per category and overall."""

    def __init__(self) -> None:
        self.sums: dict[Any, list[float]] = {}

    def add(self, category: int, evidence: set[str], ranked: list[str] | dict[int, list[str]]) -> None:
        """Count one question's top-k hits for every k in KS (`ranked`: one list, or one per k)."""
        for key in (category, "all"):
            row = self.sums.setdefault(key, [0.0] * len(KS) + [0])
            for n, k in enumerate(KS):
                got = ranked[k] if isinstance(ranked, dict) else ranked
                row[n] += len(set(got[:k]) & evidence) / len(evidence)
            row[-1] += 1

    def merge(self, other: Tally) -> Tally:
        """This tally plus another one (a new object)."""
        out = Tally()
        for src in (self, other):
            for key, row in src.sums.items():
                acc = out.sums.setdefault(key, [0.0] * len(KS) + [0])
                for n, v in enumerate(row):
                    acc[n] += v
        return out

    def recall(self, key: Any = "all") -> tuple[float, ...]:
        """(Recall@3, Recall@10) for a category or overall."""
        row = self.sums.get(key)
        if not row or not row[-1]:
            return tuple(0.0 for _ in KS)
        return tuple(v / row[-1] for v in row[:-1])

    def count(self, key: Any = "all") -> int:
        """How many questions were scored for a category or overall."""
        row = self.sums.get(key)
        return int(row[-1]) if row else 0


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def rank_bm25_baseline(msgs: list[dict[str, Any]], qs: list[dict[str, Any]]) -> Tally:
    """rank-bm25's BM25Okapi over a plain lower-case word split, the seed's retriever."""
    from rank_bm25 import BM25Okapi

    ids = [m["message_id"] for m in msgs]
    bm25 = BM25Okapi([_words(m["text"]) or [""] for m in msgs])
    tally = Tally()
    for q in qs:
        scores = bm25.get_scores(_words(q["question"]))
        order = sorted(range(len(ids)), key=lambda i: -scores[i])[: max(KS)]
        tally.add(q["category"], q["evidence"], [ids[i] for i in order if scores[i] > 0])
    return tally


def fts5_plain_baseline(msgs: list[dict[str, Any]], qs: list[dict[str, Any]]) -> Tally:
    """Plain FTS5 (porter unicode61, one body column, stopwords dropped from the query)."""
    import sqlite3

    from memory_engine.text import STOPWORDS, tokens

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')")
    db.executemany(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", [(n + 1, m["text"]) for n, m in enumerate(msgs)]
    )
    tally = Tally()
    for q in qs:
        terms = list(dict.fromkeys(t for t in tokens(q["question"]) if t not in STOPWORDS))
        ranked: list[str] = []
        if terms:
            match = " OR ".join(f'"{t}"' for t in terms)
            rows = db.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (match, max(KS))
            ).fetchall()
            ranked = [msgs[r[0] - 1]["message_id"] for r in rows]
        tally.add(q["category"], q["evidence"], ranked)
    db.close()
    return tally


# -- the memory worker over HTTP ---------------------------------------------------------


def _progress(text: str) -> None:
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


async def worker_over_http(convs: list[dict[str, Any]]) -> tuple[list[Tally], dict[str, Any]]:
    """Import every conversation into a local host and score its search route, per conversation."""
    import httpx

    from memory_worker.local import EmbeddedMemoryHost

    tallies: list[Tally] = []
    timing: dict[str, Any] = {"import_s": 0.0, "imported": 0, "search_ms": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedMemoryHost(Path(tmp)) as host:
            headers = {"authorization": f"Bearer {host.token}"}
            async with httpx.AsyncClient(base_url=host.url, headers=headers, timeout=60) as http:
                for c_no, conv in enumerate(convs, 1):
                    name = conv.get("sample_id", f"conv-{c_no}")
                    chat = f"locomo:{name}"
                    msgs = turns(conv)
                    started = time.perf_counter()
                    r = await http.post(f"/v1/chats/{chat}/import", json={"messages": msgs})
                    r.raise_for_status()
                    timing["import_s"] += time.perf_counter() - started
                    timing["imported"] += r.json()["imported"]
                    qs = questions(conv, {m["message_id"] for m in msgs})
                    tally = Tally()
                    for q_no, q in enumerate(qs, 1):
                        ranked: dict[int, list[str]] = {}
                        for k in KS:
                            started = time.perf_counter()
                            r = await http.get(
                                f"/v1/chats/{chat}/search", params={"q": q["question"], "k": k}
                            )
                            timing["search_ms"].append((time.perf_counter() - started) * 1000)
                            r.raise_for_status()
                            ranked[k] = [m["message_id"] for m in r.json()["results"]]
                        tally.add(q["category"], q["evidence"], ranked)
                        if q_no % 20 == 0 or q_no == len(qs):
                            _progress(
                                f"[{c_no}/{len(convs)}] {name}: {len(msgs)} turns imported, "
                                f"question {q_no}/{len(qs)}"
                            )
                    tallies.append(tally)
    print(file=sys.stderr)
    return tallies, timing


# -- ablation and leave-conversations-out check ------------------------------------------

# Index-time knobs of retrieval.py per ablation row: each row is built from the previous
# design ("baseline": one turn before as context, no dates, no word forms) plus one change.
# "all, first forms" is issue 16's first design: light verbs expanded (text_forms.build_table)
# and a word's forms summed (retrieval.FORMS_ONCE False).
INDEX_OFF = {"TURNS_BEFORE": 1, "TURNS_AFTER": 0, "DATES": False, "WORD_FORMS": False}
INDEX_OFF |= {"FORMS_ONCE": True, "LIGHT_VERBS": False, "NEIGHBOUR_CHARS": 2000}
NEIGHBOURS = {"TURNS_BEFORE": 2, "TURNS_AFTER": 1, "NEIGHBOUR_CHARS": 500}
ALL = {**INDEX_OFF, **NEIGHBOURS, "DATES": True, "WORD_FORMS": True}
ABLATIONS: dict[str, dict[str, Any]] = {
    "baseline": INDEX_OFF,
    "+neighbours": {**INDEX_OFF, **NEIGHBOURS},
    "+dates": {**INDEX_OFF, "DATES": True},
    "+word forms": {**INDEX_OFF, "WORD_FORMS": True},
    "all, first forms": {**ALL, "FORMS_ONCE": False, "LIGHT_VERBS": True},
    "all": ALL,
}
# The query-time knobs tuned per row: bm25 weights of context_before, context_after and
# date (index 2, 3, 4 of retrieval.BM25_WEIGHTS) and the author boost. A row tunes only
# the knobs its index has; the others stay at the shipped value.
GRID = {"before": (0.35, 0.5, 0.75), "after": (0.1, 0.2, 0.35), "date": (0.5, 1.0, 1.5)}
GRID["boost"] = (0.2, 0.35, 0.5)
WEIGHT_INDEX = {"before": 2, "after": 3, "date": 4}

Setting = tuple[tuple[str, float], ...]


def _tuned(knobs: dict[str, Any]) -> list[str]:
    """The query-time knobs an ablation row tunes."""
    names = ["before", "boost"]
    if knobs["TURNS_AFTER"]:
        names.append("after")
    if knobs["DATES"]:
        names.append("date")
    return names


def _grid_for(knobs: dict[str, Any]) -> list[Setting]:
    names = _tuned(knobs)
    return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(GRID[n] for n in names))]


def _shipped(retrieval: Any) -> dict[str, float]:
    w = retrieval.BM25_WEIGHTS
    return {"before": w[2], "after": w[3], "date": w[4], "boost": retrieval.AUTHOR_BOOST}


def _apply(retrieval: Any, values: dict[str, float]) -> None:
    weights = list(retrieval.BM25_WEIGHTS)
    for name, idx in WEIGHT_INDEX.items():
        weights[idx] = values[name]
    retrieval.BM25_WEIGHTS = tuple(weights)
    retrieval.AUTHOR_BOOST = values["boost"]


def ablation_tallies(convs: list[dict[str, Any]], name: str) -> tuple[Setting, dict[Setting, list[Tally]]]:
    """For one ablation row: per knob setting, one tally per conversation (in process)."""
    from memory_engine import ChatMemory, retrieval, text_forms

    from memory_worker.local import SqliteStorage

    knobs = [k for k in INDEX_OFF if k != "LIGHT_VERBS"]
    saved = {k: getattr(retrieval, k) for k in (*knobs, "BM25_WEIGHTS", "AUTHOR_BOOST")}
    table = text_forms.WORD_FORMS
    shipped = _shipped(retrieval)
    out: dict[Setting, list[Tally]] = {}
    try:
        for knob, value in ABLATIONS[name].items():
            if knob == "LIGHT_VERBS":
                text_forms.WORD_FORMS = text_forms.build_table(light_verbs=value)
            else:
                setattr(retrieval, knob, value)
        settings = _grid_for(ABLATIONS[name])
        default: Setting = tuple((n, shipped[n]) for n in _tuned(ABLATIONS[name]))
        if default not in settings:
            settings.append(default)
        built = []
        for conv in convs:
            memory = ChatMemory(SqliteStorage(":memory:"))
            msgs = turns(conv)
            memory.import_messages(msgs)
            built.append((memory, questions(conv, {m["message_id"] for m in msgs})))
        for n, setting in enumerate(settings, 1):
            _progress(f"{name}: setting {n}/{len(settings)} {dict(setting)}")
            _apply(retrieval, {**shipped, **dict(setting)})
            per_conv = []
            for memory, qs in built:
                tally = Tally()
                for q in qs:
                    res = memory.search(q["question"], max(KS))["results"]
                    tally.add(q["category"], q["evidence"], [m["message_id"] for m in res])
                per_conv.append(tally)
            out[setting] = per_conv
    finally:
        for knob, value in saved.items():
            setattr(retrieval, knob, value)
        text_forms.WORD_FORMS = table
    return default, out


def _total(tallies: Iterable[Tally]) -> Tally:
    acc = Tally()
    for t in tallies:
        acc = acc.merge(t)
    return acc


def holdout(
    grid: dict[Setting, list[Tally]], default: Setting, names: list[str], train_size: int = 3
) -> tuple[list[dict[str, Any]], Tally]:
    """Tune on `train_size` conversations, measure on the rest, every split; and the pooled test tally."""
    splits = []
    pooled = Tally()
    n = len(names)
    for train in itertools.combinations(range(n), train_size):
        test = [i for i in range(n) if i not in train]
        best = max(grid, key=lambda s: sum(_total(grid[s][i] for i in train).recall()))
        tested = _total(grid[best][i] for i in test)
        pooled = pooled.merge(tested)
        splits.append(
            {
                "train": [names[i] for i in train],
                "test": [names[i] for i in test],
                "tuned": best,
                "tuned_train": _total(grid[best][i] for i in train).recall(),
                "tuned_test": tested.recall(),
                "default_test": _total(grid[default][i] for i in test).recall(),
            }
        )
    return splits, pooled


# -- output --------------------------------------------------------------------------------


def table(systems: dict[str, Tally]) -> str:
    """The recall table: one row per category and overall, R@3 / R@10 per system."""
    head = f"{'category':<14}{'n':>5}" + "".join(f"{name + ' R@3':>22}{'R@10':>7}" for name in systems)
    lines = [head, "-" * len(head)]
    first = next(iter(systems.values()))
    for key in [*sorted(k for k in first.sums if k != "all"), "all"]:
        label = "overall" if key == "all" else f"{key} {CATEGORIES.get(key, '')}"
        cells = "".join(f"{t.recall(key)[0]:>22.3f}{t.recall(key)[1]:>7.3f}" for t in systems.values())
        lines.append(f"{label:<14}{first.count(key):>5}{cells}")
    return "\n".join(lines)


def chart(systems: dict[str, Tally], path: Path, title: str = "LoCoMo retrieval recall (dev split)") -> None:
    """A grouped bar chart of Recall@3 and Recall@10 per category, one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(systems.values()))
    keys = [*sorted(k for k in first.sums if k != "all"), "all"]
    labels = ["overall" if k == "all" else CATEGORIES.get(k, str(k)) for k in keys]
    fig, axes = plt.subplots(1, len(KS), figsize=(12, 4.5), sharey=True)
    width = 0.8 / len(systems)
    for ax, (n, k) in zip(axes, enumerate(KS), strict=True):
        for s, (name, tally) in enumerate(systems.items()):
            xs = [i + (s - (len(systems) - 1) / 2) * width for i in range(len(keys))]
            values = [tally.recall(key)[n] for key in keys]
            bars = ax.bar(xs, values, width, label=name)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.set_xticks(range(len(keys)), labels, rotation=20)
        ax.set_title(f"Recall@{k}")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def unseen_recall(convs: list[dict[str, Any]], row: str = "all") -> tuple[float, float]:
    """The mean over the leave-conversations-out splits of one ablation row's tested-on-2 R@3/R@10."""
    names = [c.get("sample_id", str(n)) for n, c in enumerate(convs)]
    default, grid = ablation_tallies(convs, row)
    splits, _ = holdout(grid, default, names)
    return (
        sum(s["tuned_test"][0] for s in splits) / len(splits),
        sum(s["tuned_test"][1] for s in splits) / len(splits),
    )


def padded_recall(convs: list[dict[str, Any]], size: int) -> tuple[float, ...]:
    """Overall R@3/R@10 with each conversation padded to `size` messages by the others' turns.

    Half the padding comes before the conversation and half after, each padding turn with a
    message id of its own (the same turn may repeat), so only the conversation's own turns
    are evidence. In process, the shipped weights.
    """
    from memory_engine import ChatMemory

    from memory_worker.local import SqliteStorage

    total = Tally()
    for c_no, conv in enumerate(convs):
        own = turns(conv)
        others = [t for o, c in enumerate(convs) if o != c_no for t in turns(c)]
        pad = [
            dict(t, message_id=f"pad{n}-{t['message_id']}")
            for n, t in zip(range(max(0, size - len(own))), itertools.cycle(others), strict=False)
        ]
        half = len(pad) // 2
        msgs = pad[:half] + own + pad[half:]
        memory = ChatMemory(SqliteStorage(":memory:"), retention=10 * size)
        for start in range(0, len(msgs), 1000):
            memory.import_messages(msgs[start : start + 1000])
        for q_no, q in enumerate(questions(conv, {t["message_id"] for t in own}), 1):
            res = memory.search(q["question"], max(KS))["results"]
            total.add(q["category"], q["evidence"], [m["message_id"] for m in res])
            if q_no % 50 == 0:
                _progress(f"padded to {size:,}: conversation {c_no + 1}/{len(convs)}, question {q_no}")
    print(file=sys.stderr)
    return total.recall()


def baseline_of(ref: str, data: str, unseen: bool, pad_to: int = 0) -> dict[str, Any]:
    """Dev (and with `unseen`, unseen-split) recall of the engine at git `ref`, this benchmark's code.

    REF's `memory_worker` is exported to a temp dir (git archive) and put first on the path
    of a child process that runs this file with --summary-json: the same questions and
    scoring, only the engine differs.
    """
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", ref, "memory_worker"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        out = Path(tmp) / "summary.json"
        cmd = [sys.executable, __file__, "--data", data, "--summary-json", str(out)]
        cmd += ["--png", str(Path(tmp) / "r.png")] + (["--unseen-only"] if unseen else [])
        cmd += ["--pad-to", str(pad_to)] if pad_to else []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([f"{tmp}/memory_worker/src", tmp])}
        subprocess.run(cmd, check=True, env=env)
        return dict(json.loads(out.read_text()))


def report_holdout(convs: list[dict[str, Any]], png: Path) -> tuple[float, float]:
    """The ablation rows on the dev split and in the leave-conversations-out check; chart them.

    Returns the unseen-split recall of the shipped design ('all': mean over the splits).
    """
    names = [c.get("sample_id", str(n)) for n, c in enumerate(convs)]
    dev: dict[str, Tally] = {}
    held: dict[str, Tally] = {}
    means: dict[str, tuple[float, float]] = {}
    for name in ABLATIONS:
        default, grid = ablation_tallies(convs, name)
        splits, pooled = holdout(grid, default, names)
        dev[name], held[name] = _total(grid[default]), pooled
        means[name] = tuple(sum(s["tuned_test"][n] for s in splits) / len(splits) for n in range(2))
        if name == "all":
            all_splits = splits
    print(file=sys.stderr)
    print("\nablation, dev split (5 conversations, shipped weights), R@3 / R@10 per category")
    print(table(dev))
    print(
        "\nablation, leave-conversations-out: weights tuned on 3 conversations, tested on the other 2, "
        "every one of the 10 splits, test questions pooled"
    )
    print(table(held))
    print(
        "mean over splits of the tested-on-2 overall R@3/R@10: "
        + ", ".join(f"{n} {r3:.3f}/{r10:.3f}" for n, (r3, r10) in means.items())
    )
    print("\nsplits of 'all':")
    print(f"{'test':<18}{'train R@3/R@10':>16}{'test tuned':>14}{'test shipped':>14}  tuned setting")

    def fmt(r: tuple[float, ...]) -> str:
        return f"{r[0]:.3f}/{r[1]:.3f}"

    for s in all_splits:
        print(
            f"{'+'.join(s['test']):<18}{fmt(s['tuned_train']):>16}{fmt(s['tuned_test']):>14}"
            f"{fmt(s['default_test']):>14}  {dict(s['tuned'])}"
        )
    chart(held, png, "LoCoMo recall, tuned on 3 conversations and tested on 2 (pooled over 10 splits)")
    print(f"chart: {png}")
    return means["all"]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; write the chart."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LoCoMo JSON (e.g. ../shared/locomo/locomo-dev.json)")
    parser.add_argument("--png", default=str(Path(__file__).with_name("locomo_recall.png")))
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="also the ablation rows, tuned on 3 conversations and measured on the other 2 (every split)",
    )
    parser.add_argument("--ablation-png", default=str(Path(__file__).with_name("locomo_ablation.png")))
    parser.add_argument(
        "--baseline-ref",
        help="also measure the engine at this git ref (e.g. main) in a child process, and print "
        "before (the ref) / after (this tree): dev recall, and with --holdout the unseen-split recall",
    )
    parser.add_argument(
        "--pad-to",
        type=int,
        default=0,
        help="also the recall with each conversation padded to this many messages by the others' turns",
    )
    parser.add_argument("--summary-json", help=argparse.SUPPRESS)  # the child of --baseline-ref
    parser.add_argument("--unseen-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    convs = load(args.data)
    print(f"{len(convs)} conversations from {args.data}", file=sys.stderr)
    tallies, timing = asyncio.run(worker_over_http(convs))
    if args.summary_json:  # the child of --baseline-ref: the figures the parent compares, nothing else
        import memory_engine

        print(f"baseline engine: {memory_engine.__file__}", file=sys.stderr)
        summary: dict[str, Any] = {"dev": _total(tallies).recall()}
        if args.unseen_only:
            summary["unseen"] = unseen_recall(convs)
        if args.pad_to:
            summary["padded"] = padded_recall(convs, args.pad_to)
        Path(args.summary_json).write_text(json.dumps(summary))
        return 0
    bm25_t, plain_t = Tally(), Tally()
    for n, conv in enumerate(convs, 1):
        _progress(f"baselines {n}/{len(convs)}")
        msgs = turns(conv)
        qs = questions(conv, {m["message_id"] for m in msgs})
        bm25_t = bm25_t.merge(rank_bm25_baseline(msgs, qs))
        plain_t = plain_t.merge(fts5_plain_baseline(msgs, qs))
    print(file=sys.stderr)
    systems = {"memory worker": _total(tallies), "plain FTS5": plain_t, "rank-bm25": bm25_t}
    print()
    print(table(systems))
    lat = sorted(timing["search_ms"])
    print(
        f"\nimport: {timing['imported']} turns in {timing['import_s']:.2f} s "
        f"({timing['imported'] / max(timing['import_s'], 1e-9):,.0f} messages/s); "
        f"search over HTTP: p50 {lat[len(lat) // 2]:.2f} ms, p99 {lat[int(len(lat) * 0.99)]:.2f} ms"
    )
    chart(systems, Path(args.png))
    print(f"chart: {args.png}")

    unseen = report_holdout(convs, Path(args.ablation_png)) if args.holdout else None
    padded = padded_recall(convs, args.pad_to) if args.pad_to else None
    if padded is not None:
        r3, r10 = padded
        print(f"\neach conversation padded to {args.pad_to:,} messages: R@3/R@10 {r3:.4f}/{r10:.4f}")
    if args.baseline_ref:
        before = baseline_of(args.baseline_ref, args.data, args.holdout, args.pad_to)
        dev = _total(tallies).recall()
        print(f"\nbefore ({args.baseline_ref}) / after (this tree), R@3/R@10, same questions, same run:")
        print(f"  dev split:     {before['dev'][0]:.4f}/{before['dev'][1]:.4f} -> {dev[0]:.4f}/{dev[1]:.4f}")
        if unseen is not None:
            old = before["unseen"]
            print(f"  unseen splits: {old[0]:.4f}/{old[1]:.4f} -> {unseen[0]:.4f}/{unseen[1]:.4f}")
        if padded is not None:
            old = before["padded"]
            new = f"{padded[0]:.4f}/{padded[1]:.4f}"
            print(f"  padded to {args.pad_to:,}: {old[0]:.4f}/{old[1]:.4f} -> {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
