"""Notes (`/remember`) and the removal of one fact (`/forgetfact`).

A note is a fact of kind `note`: the chat asked the bot to keep it, so every prompt shows
it. Removing a fact or a note supersedes it (the value stays in the history) rather than
deleting it; forgetting its author deletes it for good, like every fact of theirs.
"""

from __future__ import annotations

import re
from typing import Any, cast

from memory_engine.api import wire
from memory_engine.compaction.scrub import remember_forgotten
from memory_engine.errors import FactNotFound, NoteLimitError, NotTheirFact
from memory_engine.storage import SqlStorage

MAX_NOTE_CHARS = 500
MAX_NOTES = 50  # all of them go into every prompt: bounded
MAX_NOTES_PER_AUTHOR = 10  # one person cannot take every slot (non-admins remove only theirs)
NOTE_KEY = "note"
FACT_FIELDS = "id, author, author_id, key, value, kind, updated_at"
FACT_HISTORY_LIMIT = 40  # superseded facts a turn returns (the offline model answers "before X")
# A message that asks about the past: only then does a turn return the fact history (the
# bot's offline model reads it for these messages alone, with this same test).
_PAST_WORDS = ("before", "previously", "used to", "earlier", "formerly", "prior to")
_PAST = re.compile(r"\b(?:" + "|".join(map(re.escape, _PAST_WORDS)) + r")\b", re.I)


def asks_about_the_past(text: str) -> bool:
    """True when `text` asks what was so before ("where did I live before Lisbon?")."""
    if text.isascii():  # lower() is then what re.I folds: without one of the words, no match
        low = text.lower()
        if not any(word in low for word in _PAST_WORDS):
            return False  # most messages, every turn: ~8x faster than the search
    return _PAST.search(text) is not None


def as_facts(rows: list[dict[str, Any]]) -> list[wire.Fact]:
    """`facts` rows selected as FACT_FIELDS (and maybe superseded_at), typed as the wire's Fact."""
    # The one cast for facts: sqlite3 (and the Durable Object's SQL) give plain dicts, and the
    # SELECT of FACT_FIELDS over the `facts` table fixes their keys and types to Fact's.
    return cast(list[wire.Fact], rows)


def current_notes(sql: SqlStorage) -> list[wire.Fact]:
    """The chat's notes, oldest first."""
    return as_facts(
        sql.exec(f"SELECT {FACT_FIELDS} FROM facts WHERE kind = 'note' AND superseded_at IS NULL ORDER BY id")
    )


def add_note(sql: SqlStorage, text: str, author: str, author_id: str, now: str) -> wire.NoteAnswer:
    """Keep one note; the same text twice is one note (a retried request adds nothing)."""
    text = text.strip()

    def run() -> wire.NoteAnswer:
        notes = current_notes(sql)
        for note in notes:
            if note["value"].casefold() == text.casefold():
                return {"note": note, "duplicate": True}
        if len(notes) >= MAX_NOTES:
            raise NoteLimitError(f"this chat already keeps {MAX_NOTES} notes: remove one first")
        if sum(n["author_id"] == author_id for n in notes) >= MAX_NOTES_PER_AUTHOR:
            raise NoteLimitError(
                f"you already keep {MAX_NOTES_PER_AUTHOR} notes in this chat: remove one of yours first"
            )
        rows = sql.exec(
            "INSERT INTO facts(author, author_id, key, value, updated_at, kind) "
            f"VALUES (?, ?, ?, ?, ?, 'note') RETURNING {FACT_FIELDS}",
            author,
            author_id,
            NOTE_KEY,
            text,
            now,
        )
        return {"note": as_facts(rows)[0], "duplicate": False}

    return sql.transaction(run)


def forget_fact(
    sql: SqlStorage, fact_id: int, now: str, author_id: str | None = None
) -> wire.ForgetFactAnswer:
    """Supersede one current fact or note by id; with `author_id`, only if it is theirs."""

    def run() -> wire.ForgetFactAnswer:
        rows = sql.exec(f"SELECT {FACT_FIELDS} FROM facts WHERE id = ? AND superseded_at IS NULL", fact_id)
        if not rows:
            raise FactNotFound(f"no current fact or note with id {fact_id}")
        fact = as_facts(rows)[0]
        if author_id is not None and fact["author_id"] != author_id:
            raise NotTheirFact(f"fact {fact_id} is about someone else")
        sql.exec("UPDATE facts SET superseded_at = ? WHERE id = ?", now, fact_id)
        # The summary loses it now and every later one too (compaction/scrub.py).
        remember_forgotten(sql, str(fact["author_id"] or ""), str(fact["value"] or ""))
        fact["superseded_at"] = now
        return {"removed": fact}

    return sql.transaction(run)


def current_facts(sql: SqlStorage, limit: int | None = None, kind: str | None = "fact") -> list[wire.Fact]:
    """Current facts of `kind` ("fact", "note", None: both), the newest `limit`, oldest first."""
    query = f"SELECT {FACT_FIELDS} FROM facts WHERE superseded_at IS NULL AND kind LIKE ? ORDER BY id DESC"
    like = kind or "%"
    rows = sql.exec(query + " LIMIT ?", like, limit) if limit else sql.exec(query, like)
    rows.reverse()
    return as_facts(rows)


def facts_view(sql: SqlStorage, history: bool = False, kind: str | None = None) -> list[wire.Fact]:
    """What `GET /facts` lists: current facts (or, with `history`, every value ever held)."""
    if not history:
        return current_facts(sql, None, kind)
    return as_facts(
        sql.exec(f"SELECT {FACT_FIELDS}, superseded_at FROM facts WHERE kind LIKE ? ORDER BY id", kind or "%")
    )
