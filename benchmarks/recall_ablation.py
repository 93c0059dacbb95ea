"""The ablation rows and the leave-conversations-out check: knobs tuned on some conversations."""

from __future__ import annotations

import itertools
from typing import Any

from recall_data import progress, questions, turns
from recall_scoring import KS, Tally, sum_tallies

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
    from memory_engine import ChatMemory
    from memory_engine.index import retrieval
    from memory_engine.index import word_forms as text_forms
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
            progress(f"{name}: setting {n}/{len(settings)} {dict(setting)}")
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


def holdout(
    grid: dict[Setting, list[Tally]], default: Setting, names: list[str], train_size: int = 3
) -> tuple[list[dict[str, Any]], Tally]:
    """Tune on `train_size` conversations, measure on the rest, every split; and the pooled test tally."""
    splits = []
    pooled = Tally()
    n = len(names)
    for train in itertools.combinations(range(n), train_size):
        test = [i for i in range(n) if i not in train]
        best = max(grid, key=lambda s: sum(sum_tallies(grid[s][i] for i in train).recall()))
        tested = sum_tallies(grid[best][i] for i in test)
        pooled = pooled.merge(tested)
        splits.append(
            {
                "train": [names[i] for i in train],
                "test": [names[i] for i in test],
                "tuned": best,
                "tuned_train": sum_tallies(grid[best][i] for i in train).recall(),
                "tuned_test": tested.recall(),
                "default_test": sum_tallies(grid[default][i] for i in test).recall(),
            }
        )
    return splits, pooled


def unseen_recall(convs: list[dict[str, Any]], row: str = "all") -> tuple[float, float]:
    """The mean over the leave-conversations-out splits of one ablation row's tested-on-2 R@3/R@10."""
    names = [c.get("sample_id", str(n)) for n, c in enumerate(convs)]
    default, grid = ablation_tallies(convs, row)
    splits, _ = holdout(grid, default, names)
    return (
        sum(s["tuned_test"][0] for s in splits) / len(splits),
        sum(s["tuned_test"][1] for s in splits) / len(splits),
    )
