"""BM25 retrieval over a chat's FTS5 index: what gets indexed, and how a query is ranked.

Each message is one FTS5 row (rowid = messages.id) with five columns: `body` (its own text),
`author` (who wrote it), `context_before` (the two messages before it), `context_after` (the
message after it: the newest messages wait out of the index until it is there,
`index.pending`) and `date` (its month and year in words, "march 2022", from `ts`). Chat
turns are short and lean on the turns around them: "yes, last week, at the lake!" answers
"did you go camping?", and "was that your first marathon?" is answered next. A question pins
an event by its date ("what did she do in May 2023?") while the message says "yesterday".
The neighbours' words and the date count less than a message's own words (BM25_WEIGHTS).
The tunables are one frozen `RetrievalSettings` (the shipped values by default), which a
`ChatMemory` holds and passes in; the benchmarks pass their variants the same way.

Cost stays bounded in long chats and for long messages: FTS5 computes bm25() for every
row that matches any query term, at a cost that grows with the number of terms, so a
query first keeps its most selective terms within a budget (see `_select`). The terms it
drops are the common ones, whose bm25 idf is small anyway. A term's other word forms
(met/meet, colour/color: `word_forms`) are OR-ed alternatives inside the same term, and
a message scores for a word once, by its best-matching form (see `best_form.forms_once`).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

from memory_engine.api import wire
from memory_engine.index import gather
from memory_engine.index.best_form import forms_once
from memory_engine.index.names import aliased, name_words
from memory_engine.index.text import MONTHS, fts_query, query_groups
from memory_engine.storage import SqlStorage, rows_of

COLUMNS = ("body", "author", "context_before", "context_after", "date")
# bm25 column weights, in COLUMNS order. Tuned on the LoCoMo development split only
# (benchmarks/locomo_recall.py; the leave-conversations-out check there).
BM25_WEIGHTS = (1.0, 0.5, 0.5, 0.2, 1.0)
# A message whose author the query names scores this much more (x 1.35): "what did Ann
# say about ..." is most often answered by Ann's own words. A factor, not a filter,
# because a question can name one person and be answered by another. (bm25 cannot do
# this itself: in a small group every name is in so many rows that its idf is ~0.)
AUTHOR_BOOST = 0.35
# How many bm25 candidates are re-scored with the author boost (beyond the excluded).
CANDIDATES = 50
# Each neighbour's text is indexed up to this many characters: its gist, bounded cost.
NEIGHBOUR_CHARS = 500
# How many messages before and after a message are indexed with it (the ablation knobs of
# benchmarks/recall_ablation.py).
TURNS_BEFORE = 2
TURNS_AFTER = 1
# Whether the month and year are indexed, and month names kept in queries ("in May").
DATES = True
# Whether query terms are expanded with their other word forms.
WORD_FORMS = True
# Whether a message scores once per word, by the word's best form, rather than once per
# form it holds (an ablation knob of benchmarks/recall_ablation.py).
FORMS_ONCE = True
# The smallest score `rank` reports (see there).
MIN_SCORE = 1e-6
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
# Each turn's words reach FTS5 as a new small segment, and its automerge folds them in only
# slowly: after 300 turns a 10k chat's index had 18 segments, and a query reads each one (the
# ranking and the term counts took 1.9 ms a turn, 1.5 ms with the 4 a merge left). So each
# compaction (every ~20 messages, off the turn) asks FTS5 for this many pages of merge work:
# 3.5 ms there folded those 18 into 4 (`merge_segments`).
MERGE_PAGES = 500

# A query term: a word, or a word and its other forms (OR-ed alternatives).
Term = str | tuple[str, ...]


@dataclass(frozen=True)
class RetrievalSettings:
    """Retrieval's tunables, the shipped values by default (the constants above say why each).

    The index-time ones (`turns_before`, `turns_after`, `dates`, `neighbour_chars`) shape the
    index rows: one chat's database must be built and kept with the same ones.
    """

    bm25_weights: tuple[float, ...] = BM25_WEIGHTS
    author_boost: float = AUTHOR_BOOST
    candidates: int = CANDIDATES
    neighbour_chars: int = NEIGHBOUR_CHARS
    turns_before: int = TURNS_BEFORE
    turns_after: int = TURNS_AFTER
    dates: bool = DATES
    word_forms: bool = WORD_FORMS
    forms_once: bool = FORMS_ONCE
    concepts: bool = True  # a question's category words also search their cue words (`gather`)
    cue_weight: float = gather.CUE_WEIGHT  # a cue word's share of a concept word's (`gather`)


SHIPPED = RetrievalSettings()

_INSERT = f"INSERT INTO messages_fts(rowid, {', '.join(COLUMNS)}) "
_REPLACE = f"INSERT OR REPLACE INTO messages_fts(rowid, {', '.join(COLUMNS)}) "
_MONTH_OF = {f"{n:02d}": m for n, m in enumerate(MONTHS, 1)}

# Per open database: the terms known to be in COUNT_CAP rows or more. Exact, not a guess:
# rows are only added to the index between two deletions, so a term that reached the cap
# stays there until `unindex_messages` or `drop_counts` (a forgetting) empties this. The
# turn then counts only the rarer terms (two in three LoCoMo query terms reach the cap
# in a 10k chat, and each costs COUNT_CAP rows to count).
_COMMON: weakref.WeakKeyDictionary[SqlStorage, set[str]] = weakref.WeakKeyDictionary()


def _common(sql: SqlStorage) -> set[str]:
    try:
        return _COMMON.setdefault(sql, set())
    except TypeError:  # a storage that cannot be weakly referenced: no memory, counts every time
        return set()


def drop_counts(sql: SqlStorage) -> None:
    """Forget what is known about term counts (call after rows leave the index)."""
    _COMMON.pop(sql, None)


def _date_words(ts: str) -> str:
    """SQL for the month and year of an ISO timestamp in words ('2022-03-..' -> 'march 2022'), '' if odd."""
    cases = " ".join(f"WHEN '{n:02d}' THEN '{m}'" for n, m in enumerate(MONTHS, 1))
    return f"COALESCE((CASE substr({ts}, 6, 2) {cases} END) || ' ' || substr({ts}, 1, 4), '')"


def _neighbours(values: list[str], chars: int) -> str:
    return " || ' ' || ".join(f"substr(COALESCE({v}, ''), 1, {int(chars)})" for v in values) or "''"


def _index_rows(window: str, keep: str, knobs: RetrievalSettings) -> str:
    """A SELECT of index rows (rowid + COLUMNS) for the messages `keep` picks among those `window` orders.

    The neighbours are those in the window, in id order: the window must reach two messages
    before and one after the rows kept. `window` is a FROM source with id, text, author, ts.
    """
    before = [f"lag(text, {n}) OVER w" for n in range(knobs.turns_before, 0, -1)]
    after = [f"lead(text, {n}) OVER w" for n in range(1, knobs.turns_after + 1)]
    date = _date_words("ts") if knobs.dates else "''"
    chars = knobs.neighbour_chars
    inner = (
        f"SELECT id, text, author, {_neighbours(before, chars)} AS cb, {_neighbours(after, chars)} AS ca, "
        f"{date} AS dt, hit FROM {window} WINDOW w AS (ORDER BY id)"
    )
    return f"SELECT id, text, author, cb, ca, dt FROM ({inner}) WHERE {keep}"


def date_words(ts: str) -> str:
    """The month and year of an ISO timestamp in words ('2022-03-..' -> 'march 2022'), '' if odd.

    The Python twin of `_date_words` (tests compare them).
    """
    month = _MONTH_OF.get(ts[5:7])
    return f"{month} {ts[:4]}" if month else ""


INDEXED_UPTO_SQL = "SELECT rowid AS id FROM messages_fts ORDER BY rowid DESC LIMIT 1"


def indexed_upto(sql: SqlStorage) -> int:
    """The id of the newest message in the index (0: none): every message up to it is indexed,
    none after it (`index.pending`)."""
    rows = sql.exec(INDEXED_UPTO_SQL)
    return int(rows[0]["id"]) if rows else 0


def index_messages(
    sql: SqlStorage,
    first_id: int,
    last_id: int,
    link: bool = True,
    end: int | None = None,
    newest: int | None = None,
    knobs: RetrievalSettings = SHIPPED,
) -> None:
    """Index the stored messages from first_id (or the oldest one not indexed yet) through last_id.

    Each with the words of its neighbours up to message `end` (None: all). With `link`, the
    message before them is indexed again: it may have been indexed while it was the newest,
    without an after-context. A row in the index already is written again (OR REPLACE: FTS5
    deletes it first); those after the index's newest row are only inserted (no lookup).
    `newest`: the index's newest id (`indexed_upto`), when the caller has just read it.
    """
    if newest is None:
        newest = indexed_upto(sql)
    lo = min(first_id, newest + 1)
    back = sql.exec(
        "SELECT id FROM messages WHERE id < ? ORDER BY id DESC LIMIT ?", lo, knobs.turns_before + int(link)
    )
    start = int(back[-1]["id"]) if back else lo
    # The bound is a parameter: one statement text each way, which the prepared-statement
    # caches find again (the Worker's too); written in, each batch would prepare a new text.
    bound, last = ("", []) if end is None else (" AND id <= ?", [end])
    if link and back:
        after = "(SELECT MIN(id) FROM messages WHERE id >= ?)"  # the first one indexed below
        window = f"(SELECT *, 1 AS hit FROM messages WHERE id >= ? AND id <= {after}{bound})"
        sql.exec(_REPLACE + _index_rows(window, "id = ?", knobs), start, lo, *last, int(back[0]["id"]))
        start = int(back[min(1, len(back) - 1)]["id"])
    # One statement instead of one per message: FTS5 flushes its pending terms to a new
    # segment whenever another statement opens a savepoint (every INSERT INTO messages
    # does), so indexing after the whole batch roughly doubles import throughput.
    window = f"(SELECT *, 1 AS hit FROM messages WHERE id >= ?{bound})"
    verb = _INSERT if lo > newest else _REPLACE
    sql.exec(verb + _index_rows(window, "id >= ? AND id <= ?", knobs), start, *last, lo, last_id)


def unindex_messages(
    sql: SqlStorage,
    where: str,
    *params: object,
    pending: tuple[int, int] | None = None,
    knobs: RetrievalSettings = SHIPPED,
) -> None:
    """Remove from the index the messages selected by `where`, and their words from every neighbour.

    Call it before the rows are deleted from `messages`. Each survivor that had a removed
    message among its neighbours is indexed again with its nearest surviving neighbours.
    Rows in the `pending` id range (lo, hi) are not in the index yet (an import defers
    them): none is removed or indexed again, and their neighbours' words are read when
    they are indexed (`pending.build_pending`).
    """
    span = sql.exec(f"SELECT MIN(id) AS lo, MAX(id) AS hi FROM messages WHERE {where}", *params)
    if not span or span[0]["lo"] is None:
        return
    # The survivors indexed again reach TURNS_AFTER before the first removed message, and each
    # needs its own TURNS_BEFORE before it: the window starts that many messages back (two
    # back, as for new rows, left the survivor before a forgotten tail one turn short).
    back = sql.exec(
        "SELECT id FROM messages WHERE id < ? ORDER BY id DESC LIMIT ?",
        int(span[0]["lo"]),
        knobs.turns_before + knobs.turns_after,
    )
    lo = int(back[-1]["id"]) if back else int(span[0]["lo"])
    after = sql.exec("SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 1 OFFSET 2", int(span[0]["hi"]))
    hi = int(after[0]["id"]) if after else int(span[0]["hi"]) + 3
    drop_counts(sql)
    indexed = _not_pending(pending)
    gone = f"SELECT id FROM messages WHERE ({where}){indexed}"
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN ({gone})", *params)
    # Survivors of [lo, hi] in id order, each marked when one of its old neighbours is gone.
    marked = (
        f"(SELECT id, text, author, ts, hit FROM (SELECT id, text, author, ts, g, "
        f"COALESCE(lag(g, 1) OVER o, 0) OR COALESCE(lag(g, 2) OVER o, 0) "
        f"OR COALESCE(lead(g, 1) OVER o, 0) AS hit "
        f"FROM (SELECT id, text, author, ts, COALESCE(({where}), 0) AS g "
        f"FROM messages WHERE id >= ? AND id <= ?) "
        f"WINDOW o AS (ORDER BY id)) WHERE NOT g)"
    )
    rows = _index_rows(marked, "hit" + indexed, knobs)
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM ({rows}))", *params, lo, hi)
    sql.exec(_INSERT + rows, *params, lo, hi)


def _not_pending(pending: tuple[int, int] | None) -> str:
    """A condition (" AND ...") leaving out the rows an import left pending: they have no index row.

    The bounds are our own integers, written in.
    """
    return f" AND NOT (id >= {int(pending[0])} AND id <= {int(pending[1])})" if pending else ""


def unindex_upto(
    sql: SqlStorage, cut: int, pending: tuple[int, int] | None = None, knobs: RetrievalSettings = SHIPPED
) -> None:
    """`unindex_messages(sql, "id <= ?", cut, pending=pending)` for the oldest rows (retention), cheaper.

    Only the first TURNS_BEFORE survivors had a removed message among their neighbours, so
    only they are indexed again, from a window of a few rows instead of one over every row
    that goes (38 ms an import batch past the cap).
    """
    drop_counts(sql)
    indexed = _not_pending(pending)
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE id <= ?{indexed})", cut)
    around = int(knobs.turns_before + knobs.turns_after)
    window = f"(SELECT *, 1 AS hit FROM messages WHERE id > ? ORDER BY id LIMIT {around})"
    keep = (
        f"id IN (SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT {int(knobs.turns_before)}){indexed}"
    )
    rows = _index_rows(window, keep, knobs)
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM ({rows}))", cut, cut)
    sql.exec(_INSERT + rows, cut, cut)


def _cost(rows: int, terms: int) -> int:
    return rows * (terms + 2)


@functools.cache
def _counts(n: int) -> str:
    """The statement counting `n` terms' rows up to COUNT_CAP each, one column per term.

    Its text depends on `n` alone, so the storage's prepared-statement cache finds it again
    (named by the terms' positions in the query, it would be a new text almost every turn).
    """
    return "SELECT " + ", ".join(
        f"(SELECT COUNT(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
        f"LIMIT {COUNT_CAP})) AS c{i}"  # named: a storage may key its rows by column
        for i in range(n)
    )


def merge_segments(sql: SqlStorage) -> None:
    """Fold the index's small segments together, for a bounded amount of work (MERGE_PAGES)."""
    sql.exec("INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)", MERGE_PAGES)


def _select(sql: SqlStorage, terms: Sequence[Term]) -> tuple[list[Term], int]:
    """The query's most selective terms within SCORE_BUDGET, and the rowid above which to score.

    A term is a word or a tuple of its forms; a tuple counts as one term.
    """
    # Each term's document frequency, counted up to COUNT_CAP: a count stops there, so this
    # costs little even for a word in every message. A term that reaches the cap is too
    # common to be worth its cost beside rarer ones; it is scored only when nothing rarer
    # is in the query.
    common = _common(sql)
    queries = [fts_query([t]) or "" for t in terms]
    unknown = [n for n, q in enumerate(queries) if q not in common]
    counts = [COUNT_CAP] * len(terms)
    if unknown:
        row = rows_of(sql, _counts(len(unknown)), *(queries[n] for n in unknown))[0]
        for n, count in zip(unknown, row, strict=True):
            counts[n] = int(count)
            if counts[n] >= COUNT_CAP:
                common.add(queries[n])
    by_rarity = sorted((counts[n], n, t) for n, t in enumerate(terms))
    kept: list[Term] = []
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


def _expanded(term: Term) -> bool:
    return isinstance(term, tuple) and len(term) > 1


# The messages columns a ranked row carries (the turn's `retrieved` and `search`'s results).
MESSAGE_COLUMNS = ("id", "role", "author", "author_id", "text", "ts", "message_id")
_ROWS_OF = f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM messages WHERE id IN "


def rank(
    sql: SqlStorage, query: str, k: int, exclude: set[int], knobs: RetrievalSettings = SHIPPED
) -> list[tuple[int, float]]:
    """The ids of the k best matches for `query` with positive scores, best first."""
    return [(int(row[0]), score) for row, score in ranked_rows(sql, query, k, exclude, knobs)]


def ranked_messages(
    sql: SqlStorage, query: str, k: int, exclude: set[int], knobs: RetrievalSettings = SHIPPED
) -> list[wire.ScoredMessage]:
    """The k best matches for `query` as messages (MESSAGE_COLUMNS) with their `score`, best first."""
    # The one cast for scored messages: the rows are the SELECT of MESSAGE_COLUMNS (Message's
    # keys, typed by the `messages` table) and the score is added here.
    return cast(
        list[wire.ScoredMessage],
        [
            dict(zip(MESSAGE_COLUMNS, row, strict=True), score=round(score, 6))
            for row, score in ranked_rows(sql, query, k, exclude, knobs)
        ],
    )


@functools.cache
def _ranked(weights: tuple[float, ...]) -> str:
    """The ranking statement: the best candidates (bm25, id, author) of a MATCH above a rowid, unordered.

    bm25 first: the rows sort by (score, id) as tuples, with no key function (ids are unique).
    """
    return (
        "SELECT top.rank, top.id, (SELECT author FROM messages WHERE messages.id = top.id) AS author "
        f"FROM (SELECT rowid AS id, bm25(messages_fts, {', '.join(str(w) for w in weights)}) AS rank "
        "FROM messages_fts WHERE messages_fts MATCH ? AND rowid > ? ORDER BY rank LIMIT ?) AS top"
    )


def ranked_rows(
    sql: SqlStorage, query: str, k: int, exclude: set[int], knobs: RetrievalSettings = SHIPPED
) -> list[tuple[tuple[Any, ...], float]]:
    """The k best matches for `query` with positive scores, best first: (row of MESSAGE_COLUMNS, score)."""
    terms = query_groups(query, forms=knobs.word_forms, months=knobs.dates)
    if not terms or k <= 0:
        return []
    searched, cues = gather.expand(terms) if knobs.concepts else (terms, frozenset[str]())
    kept, floor = _select(sql, searched)
    if cues and any(s != t and s not in kept for s, t in zip(searched, terms, strict=True)):
        # A category word whose cues made it common (a long chat): its own word alone, not nothing.
        searched = [s if s in kept else t for s, t in zip(searched, terms, strict=True)]
        cues = frozenset(c for term in searched for c in term if c in cues)
        kept, floor = _select(sql, searched)
    match = fts_query(kept)
    if match is None:
        return []
    # One statement ranks and returns each candidate's author (for the boost): the ranking
    # reads only rowid and bm25 (any other column would be read for every matching row);
    # the author is looked up for the few kept. The winners' whole rows are read afterwards:
    # k of them, not the 50 candidates (their texts were most of the rows' cost). Sorted
    # here, by score then id: a JOIN and an ORDER BY in SQL cost a little more. An index row
    # without its message (none should exist) is left out, as the JOIN did.
    ranked_ids = rows_of(
        sql, _ranked(knobs.bm25_weights), match, floor, max(knobs.candidates, k) + len(exclude)
    )
    rows = sorted([r for r in ranked_ids if r[2] is not None])  # (bm25, id, author): by score, then id
    candidates = [(int(r[1]), -float(r[0])) for r in rows if int(r[1]) not in exclude]
    groups = [t for t in kept if isinstance(t, tuple) and _expanded(t)]
    if knobs.forms_once and candidates and groups:
        candidates = forms_once(sql, groups, candidates, knobs.bm25_weights, cues, knobs.cue_weight)
    # The authors the query names (a handful per chat, each tokenized once): their rows score more,
    # named by a word of their display name (accents folded: "jose" is José) or by an alias or
    # a name the chat learned for them ("moose" for Marcus Bell).
    named = {form for term in terms for form in term}
    authors = {r[2] for r in rows}
    boost = knobs.author_boost
    boosted = {a for a in authors if a and not named.isdisjoint(name_words(a))} if boost else set()
    if boost and not boosted and authors:
        boosted = aliased(sql, named, authors)
    # bm25() is negative, lower is better: the scores above are flipped, higher is better.
    if boosted:
        author_of = {int(r[1]): r[2] for r in rows}
        factor = 1.0 + boost
        candidates = [(i, score * factor if author_of[i] in boosted else score) for i, score in candidates]
    ranked = [c for c in candidates if c[1] > 0]
    ranked.sort(key=itemgetter(1), reverse=True)  # stable: equal scores keep their order, as with -score
    best = ranked[:k]
    if not best:
        return []
    # One statement text per count of winners: the prepared-statement cache finds it again.
    ids = [i for i, _ in best]
    by_id = {int(r[0]): r for r in rows_of(sql, _ROWS_OF + f"({','.join('?' * len(ids))})", *ids)}
    # bm25 gives a term in more than half the rows an idf of 1e-6 (in a small chat, with
    # the neighbours' words, that is most terms): such scores keep their order but are
    # shown as at least MIN_SCORE, so that they stay positive at the API's 6 decimals.
    return [(by_id[i], max(score, MIN_SCORE)) for i, score in best]
