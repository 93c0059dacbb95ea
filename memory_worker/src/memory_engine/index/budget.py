"""How much of the ranking the memory prompt carries: the seed's three are the floor, not the ceiling.

"What are X's hobbies", "which cities have both been to": the answer is spread over messages
that three rarely hold. More of the ranked messages come in while they score close to the best
and the retrieved text stays within a character budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_engine.api import wire

# What the memory prompt carries of the ranking: the best PROMPT_FLOOR always, then more of the
# best PROMPT_MOST while each scores at least PROMPT_RELATIVE of the best and the retrieved
# text stays within PROMPT_BUDGET characters ("what are X's hobbies" is rarely in three
# messages). Tuned on LoCoMo's development split (benchmarks/prompt_recall.py).
PROMPT_FLOOR = 3
PROMPT_MOST = 10
PROMPT_RELATIVE = 0.5
PROMPT_BUDGET = 1500


def fit_budget(
    ranked: Sequence[wire.ScoredMessage],
    floor: int = PROMPT_FLOOR,
    most: int = PROMPT_MOST,
    relative: float = PROMPT_RELATIVE,
    budget: int = PROMPT_BUDGET,
) -> list[wire.ScoredMessage]:
    """The ranked messages the prompt carries: the best `floor`, then more that score well and fit."""
    kept = list(ranked[:floor])
    if len(ranked) <= floor:
        return kept
    size = sum(len(m["text"]) for m in kept)
    bar = float(ranked[0]["score"]) * relative
    for m in ranked[floor:most]:
        if float(m["score"]) < bar or size + len(m["text"]) > budget:
            break
        kept.append(m)
        size += len(m["text"])
    return kept
