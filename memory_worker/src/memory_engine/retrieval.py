"""BM25 retrieval over a chat's FTS5 index: what gets indexed, and how a query is ranked."""
from __future__ import annotations

from .storage import SqlStorage
from .text import fts_query, query_terms

# bm25 column weights: body, author, context (a neighbour's words count for less)
BM25_WEIGHTS = (1.0, 0.5, 0.35)


def index_message(sql: SqlStorage, message_id: int, text: str, author: str) -> None:
    """Add one stored message to the full-text index (rowid = messages.id)."""
    sql.exec(
        "INSERT INTO messages_fts(rowid, body, author, context) VALUES (?, ?, ?, ?)",
        message_id, text, author, "")


def unindex_messages(sql: SqlStorage, where: str, *params: object) -> None:
    """Remove from the index the messages selected by `where` on the messages table."""
    sql.exec(f"DELETE FROM messages_fts WHERE rowid IN (SELECT id FROM messages WHERE {where})", *params)


def rank(sql: SqlStorage, query: str, k: int, exclude: set[int]) -> list[tuple[int, float]]:
    """The ids of the k best matches for `query` with positive scores, best first."""
    match = fts_query(query_terms(query))
    if match is None or k <= 0:
        return []
    w = BM25_WEIGHTS
    rows = sql.exec(
        f"SELECT rowid AS id, bm25(messages_fts, {w[0]}, {w[1]}, {w[2]}) AS rank "
        "FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
        match, k + len(exclude))
    ranked = [(int(r["id"]), -float(r["rank"])) for r in rows if int(r["id"]) not in exclude]
    return ranked[:k]
