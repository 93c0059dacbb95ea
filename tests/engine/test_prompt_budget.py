"""The memory prompt carries the best three retrieved messages, and more that score well and fit."""

from __future__ import annotations

from memory_engine.index.budget import fit_budget


def _ranked(*pairs: tuple[float, int]) -> list[dict]:
    return [{"id": i, "text": "w" * size, "score": score} for i, (score, size) in enumerate(pairs)]


def test_three_always_then_more_while_they_score_well_and_fit():
    ranked = _ranked((10, 900), (9, 900), (8, 900), (7, 100), (6, 100), (2, 10))
    assert [m["id"] for m in fit_budget(ranked, budget=1500)] == [0, 1, 2]  # the floor, over budget
    short = _ranked((10, 100), (9, 100), (8, 100), (7, 100), (6, 100), (4, 100), (3, 10))
    assert [m["id"] for m in fit_budget(short, relative=0.5, budget=1500)] == [0, 1, 2, 3, 4]
    assert [m["id"] for m in fit_budget(short, relative=0.5, budget=450)] == [0, 1, 2, 3]
    assert len(fit_budget(short, relative=0.1, budget=10_000, most=6)) == 6
    assert fit_budget([], budget=10) == []
