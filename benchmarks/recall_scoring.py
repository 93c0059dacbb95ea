"""Recall@k tallies, and the baselines scored beside the memory worker: rank-bm25 and plain FTS5."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

KS = (3, 10)
_WORD = re.compile(r"\w+")


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


def words(text: str) -> list[str]:
    """A plain lower-case word split (the seed's tokenizer)."""
    return _WORD.findall(text.lower())


def rank_bm25_baseline(msgs: list[dict[str, Any]], qs: list[dict[str, Any]]) -> Tally:
    """rank-bm25's BM25Okapi over a plain lower-case word split, the seed's retriever."""
    from rank_bm25 import BM25Okapi

    ids = [m["message_id"] for m in msgs]
    bm25 = BM25Okapi([words(m["text"]) or [""] for m in msgs])
    tally = Tally()
    for q in qs:
        scores = bm25.get_scores(words(q["question"]))
        order = sorted(range(len(ids)), key=lambda i: -scores[i])[: max(KS)]
        tally.add(q["category"], q["evidence"], [ids[i] for i in order if scores[i] > 0])
    return tally


def fts5_plain_baseline(msgs: list[dict[str, Any]], qs: list[dict[str, Any]]) -> Tally:
    """Plain FTS5 (porter unicode61, one body column, stopwords dropped from the query)."""
    import sqlite3

    from memory_engine.index.text import STOPWORDS, tokens

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


def sum_tallies(tallies: Iterable[Tally]) -> Tally:
    """One tally of several (conversations, splits)."""
    acc = Tally()
    for t in tallies:
        acc = acc.merge(t)
    return acc
