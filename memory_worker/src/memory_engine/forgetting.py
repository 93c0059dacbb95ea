"""Forgetting: one person, the whole chat, and the retention cap of the archive."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_engine import chat_state
from memory_engine.api import wire
from memory_engine.compaction.compact import archive_backlog
from memory_engine.compaction.scrub import forget_author_tombstones
from memory_engine.index.pending import unindexed
from memory_engine.index.retrieval import drop_counts, unindex_messages, unindex_upto
from memory_engine.reminders import store as reminders
from memory_engine.storage import SqlStorage, rows_of

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory


# At most this many messages go per compaction: a step stays small (about 40 us each) even
# when an import or a lowered cap puts the archive far over it. Imports delete as many as
# they add, so the archive cannot outgrow the cap by more than the live messages between
# compactions.
RETENTION_STEP = 500


def apply_retention(memory: ChatMemory, limit: int = RETENTION_STEP) -> int:
    """Delete the oldest summarized messages past the retention cap, at most `limit`; how many went."""
    sql = memory.sql
    total = int(sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"])
    excess = min(total - memory.retention, limit)
    if excess <= 0:
        return 0
    # Only summarized messages go: the summary already keeps their gist. They are the oldest,
    # so one bound selects them: `id <= cut` costs the index's window query nothing per row,
    # where `id IN (SELECT ... LIMIT n)` cost ~50 ms a batch of an import past the cap.
    upto = memory.summarized_upto()
    last = sql.exec("SELECT id FROM messages WHERE id <= ? ORDER BY id LIMIT 1 OFFSET ?", upto, excess - 1)
    cut = int(last[0]["id"]) if last else upto
    unindex_upto(sql, cut, unindexed(sql), memory.retrieval)
    rows = rows_of(sql, "DELETE FROM messages WHERE id <= ? RETURNING id", cut)  # tuples: no dict a row
    return len(rows)


def new_epoch(memory: ChatMemory) -> None:
    """Mark a forgetting: a compaction started before it must not commit its summary."""
    newest = memory.sql.exec("SELECT COALESCE(MAX(id), 0) AS n FROM messages")[0]["n"]
    memory.set_state("summary_epoch", memory.now() + ":" + str(newest))


def forget_author(memory: ChatMemory, author_id: str) -> wire.ForgetAuthorAnswer:
    """Forget one person: their messages and the replies to them, facts, `/why`; the summary is rebuilt.

    Replies to other people stay. The index is merged afterwards so that no segment keeps a
    deleted term; the host makes freed pages zeroed (`PRAGMA secure_delete`) where its
    SQLite allows it, and checkpoints the WAL.
    """
    sql = memory.sql
    # Theirs (whatever the role: imports may carry system lines), and the bot's answers to them.
    where = "author_id = ? OR reply_to_author_id = ?"

    def run() -> wire.ForgetAuthorAnswer:
        # Their rows not indexed yet (an import's pending rows, the tail) are deleted below: gone too.
        unindex_messages(sql, where, author_id, author_id, pending=unindexed(sql), knobs=memory.retrieval)
        gone = sql.exec(f"DELETE FROM messages WHERE {where} RETURNING role", author_id, author_id)
        facts = sql.exec("DELETE FROM facts WHERE author_id = ? RETURNING id", author_id)
        forget_author_tombstones(sql, author_id)
        reminders.forget_author(sql, author_id)
        sql.exec("UPDATE router_usage SET author_id = '' WHERE author_id = ?", author_id)
        chat_state.forget_author_usage(sql, author_id)
        # The old summary and the last prompt may quote them: drop both; the summary is
        # made again from what remains.
        for key in ("summary", "summary_updated_at", "last_prompt"):
            sql.exec("DELETE FROM state WHERE key = ?", key)
        memory.set_state("summarized_upto", "0")
        archive_backlog(memory)  # the rebuild costs a bounded number of summarizer calls
        new_epoch(memory)
        merge_index(sql)
        replies = sum(1 for r in gone if r["role"] == "assistant")
        return {"deleted": True, "messages": len(gone) - replies, "replies": replies, "facts": len(facts)}

    return sql.transaction(run)


def merge_index(sql: SqlStorage) -> None:
    """Merge the full-text index into one segment: deleted terms leave it (FTS5 keeps them until then)."""
    sql.exec("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")


def forget_chat(memory: ChatMemory) -> wire.ForgetChatAnswer:
    """Delete everything this chat remembers; `deleted` says whether there was anything."""
    sql = memory.sql
    kept = sql.exec(
        "SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM facts)"
        " + (SELECT COUNT(*) FROM router_usage) AS n"
    )

    def run() -> None:
        tables = ("messages", "messages_fts", "facts", "router_usage", "usage_daily", "state")
        for table in (*tables, *chat_state.TABLES, *reminders.TABLES):
            sql.exec(f"DELETE FROM {table}")
        drop_counts(sql)  # retrieval's memory of common terms describes the old index
        new_epoch(memory)
        merge_index(sql)

    sql.transaction(run)
    return {"deleted": bool(kept[0]["n"])}
