"""A message scores once per query word, by the word's best form: bm25 re-scored over the candidates.

The word's forms are its other word forms (`word_forms`) and, for a category word, its cue
words (`gather`), OR-ed alternatives inside one FTS5 term.
"""

from __future__ import annotations

import functools

from memory_engine.index.text import fts_query
from memory_engine.storage import SqlStorage, rows_of


@functools.cache
def forms_statement(n: int, weights_of: tuple[float, ...]) -> str:
    """`forms_once`'s statement for n forms: each form's bm25 over a range of rowids bound once."""
    weights = ", ".join(str(w) for w in weights_of)
    return "WITH r(lo, hi) AS (SELECT ?, ?) " + " UNION ALL ".join(
        f"SELECT {k} AS form, rowid AS id, bm25(messages_fts, {weights}) AS rank FROM messages_fts "
        "WHERE messages_fts MATCH ? AND rowid >= (SELECT lo FROM r) AND rowid <= (SELECT hi FROM r)"
        for k in range(n)
    )


def forms_once(
    sql: SqlStorage,
    groups: list[tuple[str, ...]],
    candidates: list[tuple[int, float]],
    weights: tuple[float, ...],
    cues: frozenset[str] = frozenset(),
    cue_weight: float = 1.0,
) -> list[tuple[int, float]]:
    """The candidates re-scored so that each word counts once, by its best form.

    bm25 adds up the query's phrases, each form of a word being one: a message saying
    both "won" and "winning" would count the word "win" twice, and its neighbours (which
    carry it as context) twice too. A phrase's share of the score is the bm25 of a query
    of that phrase alone (same idf, same length normalisation), so one statement scores
    each form of each expanded word over the candidates, and the sum of a word's forms is
    replaced by their maximum, a category word's cue word (`cues`, see `gather`) counting
    `cue_weight` of its share. `groups`: the query's words that have several forms.
    """
    forms = [f for t in groups for f in t]
    # A range of rowids, not `rowid IN (...)`: FTS5 would run the MATCH once per listed id
    # (4x slower here). The range holds no more rows than the main query scored. Its ends are
    # bound once (a Durable Object binds at most 100 parameters), so the text depends on the
    # number of forms alone and the prepared-statement caches find it again.
    ids = {i for i, _ in candidates}
    rows = rows_of(  # tuples, not dicts: a few hundred rows
        sql,
        forms_statement(len(forms), weights),
        min(ids),
        max(ids),
        *(fts_query([f]) for f in forms),
    )
    share = {(int(form), int(i)): -float(score) for form, i, score in rows if int(i) in ids}
    out = []
    for i, score in candidates:
        n = 0
        for t in groups:
            parts = [share.get((n + j, i), 0.0) for j in range(len(t))]
            cued = [p * cue_weight if f in cues else p for p, f in zip(parts, t, strict=True)]
            score += max(cued) - sum(parts)
            n += len(t)
        out.append((i, score))
    return out
