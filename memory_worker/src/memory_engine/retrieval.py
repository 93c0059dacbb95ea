"""BM25 retrieval over a chat's FTS5 index: what gets indexed, and how a query is ranked.

Each message is one FTS5 row (rowid = messages.id) with three columns: `body` (its own
text), `author` (who wrote it) and `context` (the text of the message just before it).
Chat turns are short and lean on the turn before ("yes, last week, at the lake!" answers
"did you go camping?"), so the previous turn's words are indexed with each turn, at a
lower bm25 weight than its own words.

Cost stays bounded in long chats and for long messages: FTS5 computes bm25() for every
row that matches any query term, at a cost that grows with the number of terms, so a
query first keeps its most selective terms within a budget (see `_select`). The terms it
drops are the common ones, whose bm25 idf is small anyway.
"""

from __future__ import annotations

from typing import Any

from .storage import SqlStorage
from .text import fts_query, query_terms, tokens

# bm25 column weights: body, author, context (the previous turn counts half as much).
BM25_WEIGHTS = (1.0, 0.5, 0.5)
# A message whose author the query names scores this much more (x 1.35): "what did Ann
# say about ..." is most often answered by Ann's own words. A factor, not a filter,
# because a question can name one person and be answered by another. (bm25 cannot do
# this itself: in a small group every name is in so many rows that its idf is ~0.)
AUTHOR_BOOST = 0.35
# How many bm25 candidates are re-scored with the author boost (beyond the excluded).
CANDIDATES = 50
# The previous turn's text is indexed up to this many characters: its gist, bounded cost.
CONTEXT_CHARS = 2000
# What one search may spend on bm25(), in units of (matching row x (query terms + 2)):
# FTS5 scores every row that matches any term, at about 0.4 us per row per term plus
# about 1 us per row (more when pages are not cached), so this bounds the scoring to a
# few ms at any chat size. A short question in a chat of a few thousand messages stays
# inside it and keeps its informative terms.
SCORE_BUDGET = 3000
# At most this many terms are scored, the most selective first.
MAX_SCORED_TERMS = 8
# A term in this many rows or more is "common" (see `_select`).
COUNT_CAP = 300


def _previous(sql: SqlStorage, message_id: int) -> dict[str, Any] | None:
    rows = sql.exec("SELECT id, text FROM messages WHERE id < ? ORDER BY id DESC LIMIT 1", message_id)
    return rows[0] if rows else None


def index_message(sql: SqlStorage, message_id: int, text: str, author: str) -> None:
    """Add one stored message to the full-text index, with the previous message's words as context."""
    prev = _previous(sql, message_id)
    sql.exec(
        "INSERT INTO messages_fts(rowid, body, author, context) VALUES (?, ?, ?, ?)",
        message_id,
        text,
        author,
        (prev["text"] if prev else "")[:CONTEXT_CHARS],
    )


def index_messages(sql: SqlStorage, first_id: int, last_id: int) -> None:
    """Index every stored message with first_id <= id <= last_id in one statement (bulk import)."""
    # One statement instead of one per message: FTS5 flushes its pending terms to a new
    # segment whenever another statement opens a savepoint (every INSERT INTO messages
    # does), so indexing after the whole batch roughly doubles import throughput.
    sql.exec(
        "INSERT INTO messages_fts(rowid, body, author, context) "
        "SELECT m.id, m.text, m.author, substr(COALESCE((SELECT p.text FROM messages p "
        "WHERE p.id < m.id ORDER BY p.id DESC LIMIT 1), ''), 1, ?) "
        "FROM messages m WHERE m.id >= ? AND m.id <= ? ORDER BY m.id",
        CONTEXT_CHARS,
        first_id,
        last_id,
    )


def unindex_messages(sql: SqlStorage, where: str, *params: object) -> None:
    """Remove from the index the messages selected by `where`, and their words from the next message's context."""
    gone = [int(r["id"]) for r in sql.exec(f"SELECT id FROM messages WHERE {where} ORDER BY id", *params)]
    if not gone:
        return
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE {where})", *params)
    # A forgotten message must not live on as its successor's context: each survivor that
    # followed a removed message takes the words of the nearest surviving one before it.
    removed = set(gone)
    ids = [
        int(r["id"])
        for r in sql.exec(
            "SELECT id FROM messages WHERE id >= ? AND id <= "
            "(SELECT COALESCE(MIN(id), ?) FROM messages WHERE id > ?) ORDER BY id",
            _previous_id(sql, gone[0]),
            gone[-1],
            gone[-1],
        )
    ]
    last_kept: int | None = None
    for n, i in enumerate(ids):
        if i in removed:
            continue
        if n > 0 and ids[n - 1] in removed:
            rows = sql.exec("SELECT text FROM messages WHERE id = ?", last_kept) if last_kept else []
            sql.exec(
                "UPDATE messages_fts SET context = ? WHERE rowid = ?",
                (rows[0]["text"] if rows else "")[:CONTEXT_CHARS],
                i,
            )
        last_kept = i


def _previous_id(sql: SqlStorage, message_id: int) -> int:
    prev = _previous(sql, message_id)
    return int(prev["id"]) if prev else message_id


def _cost(rows: int, terms: int) -> int:
    return rows * (terms + 2)


def _select(sql: SqlStorage, terms: list[str]) -> tuple[list[str], int]:
    """The query's most selective terms within SCORE_BUDGET, and the rowid above which to score."""
    # Each term's document frequency, counted up to COUNT_CAP: a count stops there, so this
    # costs little even for a word in every message. A term that reaches the cap is too
    # common to be worth its cost beside rarer ones; it is scored only when nothing rarer
    # is in the query.
    counts = sql.exec(
        "SELECT "
        + ", ".join(
            f"(SELECT COUNT(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
            f"LIMIT {COUNT_CAP})) AS c{n}"
            for n in range(len(terms))
        ),
        *[fts_query([t]) for t in terms],
    )[0]
    by_rarity = sorted((int(counts[f"c{n}"]), n, t) for n, t in enumerate(terms))
    kept: list[str] = []
    rows = 0
    for df, _, t in by_rarity:
        if kept and (
            df >= COUNT_CAP or len(kept) == MAX_SCORED_TERMS or _cost(rows + df, len(kept) + 1) > SCORE_BUDGET
        ):
            break
        kept.append(t)
        rows += df
    # Only common words (say "great!" in a long chat): score the newest matches only,
    # from the rowid of the budget's worth-th newest one.
    floor = 0
    if by_rarity[0][0] >= COUNT_CAP:
        newest = sql.exec(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            fts_query(kept),
            SCORE_BUDGET // _cost(1, len(kept)),
        )
        floor = int(newest[0]["rowid"]) if newest else 0
    return kept, floor


def rank(sql: SqlStorage, query: str, k: int, exclude: set[int]) -> list[tuple[int, float]]:
    """The ids of the k best matches for `query` with positive scores, best first."""
    terms = query_terms(query)
    if not terms or k <= 0:
        return []
    kept, floor = _select(sql, terms)
    match = fts_query(kept)
    if match is None:
        return []
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    # Only rowid and bm25 here: any other column would be read for every matching row.
    rows = sql.exec(
        f"SELECT rowid AS id, bm25(messages_fts, {weights}) AS rank "
        "FROM messages_fts WHERE messages_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?",
        match,
        floor,
        max(CANDIDATES, k) + len(exclude),
    )
    candidates = [(int(r["id"]), -float(r["rank"])) for r in rows if int(r["id"]) not in exclude]
    named = set(terms)
    authors: dict[int, str] = {}
    if AUTHOR_BOOST and candidates:
        marks = ",".join("?" * len(candidates))
        authors = {
            int(r["id"]): r["author"] or ""
            for r in sql.exec(
                f"SELECT id, author FROM messages WHERE id IN ({marks})", *(i for i, _ in candidates)
            )
        }
    ranked = []
    # bm25() is negative, lower is better: the scores above are flipped, higher is better.
    for i, score in candidates:
        if named.intersection(tokens(authors.get(i, ""))):
            score *= 1.0 + AUTHOR_BOOST
        if score > 0:
            ranked.append((i, score))
    ranked.sort(key=lambda x: -x[1])
    return ranked[:k]
