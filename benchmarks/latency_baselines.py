"""The designs memory_latency.py compares ours with: the seed's, a bare FTS5, the previous index."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from latency_corpus import CPU, IMPORT_BATCH, Corpus, percentile, progress, progress_done
from recall_scoring import words

# -- the previous design's index ---------------------------------------------------------


# The previous design's index (migration 1's messages_fts), for its size beside ours.
_OLD_INDEX = (
    "CREATE VIRTUAL TABLE old.messages_fts USING fts5(body, author, context, "
    "tokenize = 'porter unicode61 remove_diacritics 2')",
    "INSERT INTO old.messages_fts(rowid, body, author, context) SELECT id, text, author, "
    "substr(COALESCE(lag(text, 1) OVER (ORDER BY id), ''), 1, 2000) FROM main.messages",
)


def index_bytes(path: Path) -> tuple[int, int, int]:
    """(messages, bytes of our FTS index, bytes of the previous design's index) of a chat file."""
    db = sqlite3.connect(path)
    try:
        old = path.with_suffix(".old-index")
        db.execute("ATTACH DATABASE ? AS old", (str(old),))
        for statement in _OLD_INDEX:
            db.execute(statement)
        db.commit()
        n = db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        ours, previous = (
            db.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat(?) WHERE name LIKE 'messages_fts%'", (schema,)
            ).fetchone()[0]
            for schema in ("main", "old")
        )
    finally:
        db.close()
    return n, ours, previous


# The previous design's index-time knobs (RetrievalSettings): one turn before, none after, no dates.
PREVIOUS_INDEX = {"turns_before": 1, "turns_after": 0, "dates": False, "neighbour_chars": 2000}
IMPORT_COMPARED = 20_000


COMPARED_TURNS = 150


def previous_design(corpus: Corpus, tmp: Path) -> dict[str, Any]:
    """In process, ours beside the previous design's index: import messages/s and turn p50 (ms)."""
    from memory_engine import ChatMemory
    from memory_engine.index.retrieval import SHIPPED, RetrievalSettings
    from memory_worker.local import SqliteStorage

    batches = [corpus.take(IMPORT_BATCH, "imp") for _ in range(IMPORT_COMPARED // IMPORT_BATCH)]
    live = corpus.take(COMPARED_TURNS, "live")
    previous = RetrievalSettings(**PREVIOUS_INDEX)
    out: dict[str, float] = {}
    turns: dict[str, list[float]] = {}
    # Alternated twice, so that a change in the machine's load hits both alike.
    for run, (name, knobs) in enumerate([("previous", previous), ("ours", SHIPPED)] * 2):
        storage = SqliteStorage(tmp / f"import-{run}.sqlite3")
        memory = ChatMemory(storage, retention=10 * IMPORT_COMPARED, retrieval=knobs)
        progress(f"import in process, {name} index, run {run // 2 + 1}/2")
        started = time.perf_counter()
        for batch in batches:
            memory.import_messages(batch)
        out[name] = out.get(name, 0.0) + (time.perf_counter() - started)
        for m in live:
            started = time.perf_counter()
            memory.turn(m["text"], author=m["author"], author_id=m["author_id"], message_id=m["message_id"])
            turns.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        storage.close()
    progress_done()
    return {
        "import": {name: 2 * IMPORT_COMPARED / seconds for name, seconds in out.items()},
        "turn_p50": {name: percentile(values, 50) for name, values in turns.items()},
    }


# -- the seed's design -------------------------------------------------------------------


class SeedBlobIndex:
    """The seed's memory: the whole BM25 corpus as one JSON blob, rebuilt on every message."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT)")

    def prefill(self, messages: list[dict[str, Any]]) -> None:
        """Store the blob for these messages at once (not timed)."""
        blob = {
            "ids": [m["message_id"] for m in messages],
            "texts": [m["text"] for m in messages],
            "docs": [words(m["text"]) for m in messages],
        }
        self.db.execute("INSERT OR REPLACE INTO kv VALUES ('bm25', ?)", (json.dumps(blob),))

    def turn(self, message: dict[str, Any], k: int = 3) -> list[str]:
        """Load, extend, rebuild, query and save: what the seed did per message."""
        from rank_bm25 import BM25Okapi

        blob = json.loads(self.db.execute("SELECT value FROM kv WHERE key = 'bm25'").fetchone()[0])
        query = words(message["text"])
        blob["ids"].append(message["message_id"])
        blob["texts"].append(message["text"])
        blob["docs"].append(query)
        bm25 = BM25Okapi([d or [""] for d in blob["docs"]])
        scores = bm25.get_scores(query)
        best = sorted(range(len(scores) - 1), key=lambda i: -scores[i])[:k]
        self.db.execute("UPDATE kv SET value = ? WHERE key = 'bm25'", (json.dumps(blob),))
        return [blob["texts"][i] for i in best]


def seed_design(corpus: Corpus, n: int, turns_measured: int, tmp: Path) -> list[float]:
    """Turn latencies (ms) of the seed's JSON-blob BM25 index at n messages."""
    seed = SeedBlobIndex(tmp / f"seed-{n}.sqlite3")
    progress(f"seed design, N={n:,}: building the blob")
    seed.prefill(corpus.take(n, f"s{n}"))
    out = []
    for i, m in enumerate(corpus.take(turns_measured, f"st{n}")):
        progress(f"seed design, N={n:,}: turn {i + 1}/{turns_measured}")
        started, cpu = time.perf_counter(), time.process_time()
        seed.turn(m)
        out.append((time.perf_counter() - started) * 1000)
        CPU.setdefault(("seed", n), []).append((time.process_time() - cpu) * 1000)
    seed.db.close()
    progress_done()
    return out


# -- a bare FTS5 reference ---------------------------------------------------------------


def bare_fts5(corpus: Corpus, n: int, turns_measured: int, tmp: Path, stopwords: bool = False) -> list[float]:
    """Turn latencies (ms) of a bare FTS5 design at n messages, in process (no HTTP).

    Per turn, in one transaction: insert the message into a table and a one-column FTS5
    index over it, then fetch the top 3 older rows for an OR of its distinct non-stopword
    tokens, ranked by bm25 (the plain FTS5 baseline of locomo_recall.py as a turn). No
    facts, ring, summary, prompt or state: the floor a turn with retrieval could cost.
    With `stopwords`, the OR holds every distinct token, stopwords too: the literal
    "insert + OR top-3 lookup" (the issue's reference was not recorded; this is the
    looser reading of it, the default the stricter one).
    """
    design = "bare-all" if stopwords else "bare"
    from memory_engine.index.text import STOPWORDS, tokens

    db = sqlite3.connect(tmp / f"{design}-{n}.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, author TEXT, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, content='m', content_rowid='id')")

    def insert(m: dict[str, Any]) -> int:
        cur = db.execute("INSERT INTO m(author, text) VALUES (?, ?)", (m["author"], m["text"]))
        db.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (cur.lastrowid, m["text"]))
        return int(cur.lastrowid or 0)

    progress(f"{design} FTS5, N={n:,}: prefill")
    db.execute("BEGIN")
    for m in corpus.take(n, f"b{n}"):
        insert(m)
    db.execute("COMMIT")
    out = []
    for i, m in enumerate(corpus.take(turns_measured + 5, f"bt{n}")):
        started, cpu = time.perf_counter(), time.process_time()
        db.execute("BEGIN")
        new_id = insert(m)
        terms = list(dict.fromkeys(t for t in tokens(m["text"]) if stopwords or t not in STOPWORDS))
        if terms:
            db.execute(
                "SELECT m.id, m.author, m.text FROM t JOIN m ON m.id = t.rowid "
                "WHERE t MATCH ? AND t.rowid != ? ORDER BY bm25(t) LIMIT 3",
                (" OR ".join(f'"{term}"' for term in terms), new_id),
            ).fetchall()
        db.execute("COMMIT")
        if i >= 5:
            out.append((time.perf_counter() - started) * 1000)
            CPU.setdefault((design, n), []).append((time.process_time() - cpu) * 1000)
    db.close()
    progress_done()
    return out
