"""The ablation rows and the leave-conversations-out check: knobs tuned on some conversations."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from recall_data import progress, questions, turns
from recall_scoring import KS, Tally, sum_tallies

from memory_engine.index.retrieval import SHIPPED, RetrievalSettings

# Index-time knobs of retrieval (RetrievalSettings fields) per ablation row: each row is the
# "baseline" (one turn before as context, no dates, no word forms) plus one change.
# "all, first forms" expands light verbs too (word_forms.build_table) and sums a word's forms
# (forms_once False). `light_verbs` is the word-forms table's knob, not retrieval's.
INDEX_OFF = {"turns_before": 1, "turns_after": 0, "dates": False, "word_forms": False}
INDEX_OFF |= {"forms_once": True, "light_verbs": False, "neighbour_chars": 2000}
NEIGHBOURS = {"turns_before": 2, "turns_after": 1, "neighbour_chars": 500}
ALL = {**INDEX_OFF, **NEIGHBOURS, "dates": True, "word_forms": True}
ABLATIONS: dict[str, dict[str, Any]] = {
    "baseline": INDEX_OFF,
    "+neighbours": {**INDEX_OFF, **NEIGHBOURS},
    "+dates": {**INDEX_OFF, "dates": True},
    "+word forms": {**INDEX_OFF, "word_forms": True},
    "all, first forms": {**ALL, "forms_once": False, "light_verbs": True},
    "all": ALL,
}
# The query-time knobs tuned per row: bm25 weights of context_before, context_after and
# date (index 2, 3, 4 of RetrievalSettings.bm25_weights) and the author boost. A row tunes only
# the knobs its index has; the others stay at the shipped value.
GRID = {"before": (0.35, 0.5, 0.75), "after": (0.1, 0.2, 0.35), "date": (0.5, 1.0, 1.5)}
GRID["boost"] = (0.2, 0.35, 0.5)
WEIGHT_INDEX = {"before": 2, "after": 3, "date": 4}

Setting = tuple[tuple[str, float], ...]


def _tuned(knobs: dict[str, Any]) -> list[str]:
    """The query-time knobs an ablation row tunes."""
    names = ["before", "boost"]
    if knobs["turns_after"]:
        names.append("after")
    if knobs["dates"]:
        names.append("date")
    return names


def _grid_for(knobs: dict[str, Any]) -> list[Setting]:
    names = _tuned(knobs)
    return [tuple(zip(names, values, strict=True)) for values in itertools.product(*(GRID[n] for n in names))]


def _shipped(knobs: RetrievalSettings) -> dict[str, float]:
    w = knobs.bm25_weights
    return {"before": w[2], "after": w[3], "date": w[4], "boost": knobs.author_boost}


def _with(knobs: RetrievalSettings, values: dict[str, float]) -> RetrievalSettings:
    """`knobs` with the query-time values of one grid setting."""
    weights = list(knobs.bm25_weights)
    for name, idx in WEIGHT_INDEX.items():
        weights[idx] = values[name]
    return dataclasses.replace(knobs, bm25_weights=tuple(weights), author_boost=values["boost"])


def ablation_tallies(convs: list[dict[str, Any]], name: str) -> tuple[Setting, dict[Setting, list[Tally]]]:
    """For one ablation row: per knob setting, one tally per conversation (in process)."""
    from memory_engine import ChatMemory
    from memory_engine.index import word_forms
    from memory_worker.local import SqliteStorage

    row = dict(ABLATIONS[name])
    light_verbs = row.pop("light_verbs")
    index = dataclasses.replace(SHIPPED, **row)  # the row's index, built once per conversation
    shipped = _shipped(SHIPPED)
    table = word_forms.WORD_FORMS
    out: dict[Setting, list[Tally]] = {}
    try:
        word_forms.WORD_FORMS = word_forms.build_table(light_verbs=light_verbs)
        settings = _grid_for(ABLATIONS[name])
        default: Setting = tuple((n, shipped[n]) for n in _tuned(ABLATIONS[name]))
        if default not in settings:
            settings.append(default)
        built = []
        for conv in convs:
            memory = ChatMemory(SqliteStorage(":memory:"), retrieval=index)
            msgs = turns(conv)
            memory.import_messages(msgs)
            built.append((memory, questions(conv, {m["message_id"] for m in msgs})))
        for n, setting in enumerate(settings, 1):
            progress(f"{name}: setting {n}/{len(settings)} {dict(setting)}")
            knobs = _with(index, {**shipped, **dict(setting)})
            per_conv = []
            for memory, qs in built:
                view = ChatMemory(memory.sql, retrieval=knobs)  # the same chat, other query knobs
                tally = Tally()
                for q in qs:
                    res = view.search(q["question"], max(KS))["results"]
                    tally.add(q["category"], q["evidence"], [m["message_id"] for m in res])
                per_conv.append(tally)
            out[setting] = per_conv
    finally:
        word_forms.WORD_FORMS = table
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
