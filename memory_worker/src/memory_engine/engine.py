"""ChatMemory: one chat's memory over its own SQLite database.

Every method is synchronous and touches only `SqlStorage`, so it runs unchanged in the
Durable Object (Pyodide) and in the local host (CPython + sqlite3). Inputs are assumed
validated by `api.http`; the engine only enforces the memory semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

from memory_engine import chat_state, forgetting, turns
from memory_engine.api import wire
from memory_engine.compaction.compact import COMPACT_THRESHOLD
from memory_engine.facts.extract import (
    canonical_key,
    is_list_key,
    merge_list,
)
from memory_engine.imports import bulk as imports
from memory_engine.index.budget import PROMPT_MOST, fit_budget
from memory_engine.index.pending import (
    ensure_indexed,
    ensure_searchable,
    index_after_reply,
    index_behind,
    index_tail,
)
from memory_engine.index.retrieval import SHIPPED, RetrievalSettings, ranked_messages
from memory_engine.learning import apply_facts, last_said
from memory_engine.notes import asks_about_the_past, facts_view
from memory_engine.prompt import render_prompt
from memory_engine.storage import SqlStorage, migrate
from memory_engine.usage import ModelCall, record_usage, usage_report

RING_SIZE = 12
RECENT_BY_MODE = {"auto": 4, "full": 12}
RECENT_OTHERWISE = RECENT_BY_MODE["auto"]  # for a mode this version does not know
RETRIEVE_K = 3
PROMPT_FACTS_LIMIT = 40
RETENTION_MESSAGES = 50_000  # archived messages kept searchable per chat

MSG_COLUMNS = turns.MSG_COLUMNS


def utc_iso(dt: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z, as stored (isoformat: a third of strftime's cost)."""
    return dt.astimezone(UTC).isoformat(timespec="milliseconds")[:23] + "Z"


def _now() -> datetime:
    return datetime.now(UTC)


class ChatMemory:
    """The memory of one chat: archive + index, ring, facts, summary state, usage."""

    def __init__(
        self,
        sql: SqlStorage,
        clock: Callable[[], datetime] | None = None,
        retention: int | None = None,
        retrieval: RetrievalSettings = SHIPPED,
    ):
        """`clock` None: the real UTC time; `retention` None: RETENTION_MESSAGES."""
        self.sql = sql
        self.clock = clock or _now
        self.retention = RETENTION_MESSAGES if retention is None else retention
        self.retrieval = retrieval
        # The messages a turn reads before its own, per mode: its recent ones, and the ones
        # the index links a new message to.
        self._before = {
            m: max(min(n, RING_SIZE), retrieval.turns_before)
            for m, n in [*RECENT_BY_MODE.items(), (None, RECENT_OTHERWISE)]
        }
        self._pruned_day = ""  # the day whose old daily counters were last pruned (see `turn`)
        migrate(sql, self.now())

    # -- small helpers -----------------------------------------------------------------

    def now(self) -> str:
        """The current time as a stored timestamp."""
        return utc_iso(self.clock())

    def state(self, key: str, default: str | None = None) -> str | None:
        """One value of the chat's key-value state (summary, marks, settings)."""
        rows = self.sql.exec("SELECT value FROM state WHERE key = ?", key)
        return rows[0]["value"] if rows else default

    def set_state(self, key: str, value: str | None) -> None:
        """Set one value of the chat's key-value state."""
        chat_state.put(self.sql, key, value)

    def mode(self) -> wire.Mode:
        """The chat's memory mode: `auto` (4 recent) or `full` (12 recent)."""
        # Only the two are ever stored (the settings route checks them): this narrows the type.
        return "full" if self.state("mode") == "full" else "auto"

    def summarized_upto(self) -> int:
        """The id of the newest message the summary covers (0: none)."""
        return int(self.state("summarized_upto", "0") or 0)

    def record_chat_key(self, chat_key: str) -> None:
        """Store which chat key this database belongs to, unless one is stored already."""
        if self.state("chat_key") is None:
            self.set_state("chat_key", chat_key)

    # -- recording ---------------------------------------------------------------------

    def _find_by_message_id(self, message_id: str | None) -> wire.Message | None:
        if message_id is None:
            return None
        rows = self.sql.exec(f"SELECT {MSG_COLUMNS} FROM messages WHERE message_id = ?", message_id)
        return cast(wire.Message, rows[0]) if rows else None  # MSG_COLUMNS: Message's keys

    def _answered_author(self, message_id: str | None, author_id: str | None) -> str | None:
        if author_id:
            return author_id
        answered = self._find_by_message_id(message_id)
        if answered is not None:
            return answered["author_id"] or None
        # Unsaid: the bot answers the newest user message. When that guess is wrong, a
        # forgetting removes a reply too many, never leaves one behind.
        rows = self.sql.exec("SELECT author_id FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1")
        return (rows[0]["author_id"] or None) if rows else None

    def insert_message(
        self,
        role: str,
        text: str,
        author: str,
        author_id: str,
        message_id: str | None,
        ts: str,
        index: bool = True,
        reply_to_author_id: str | None = None,
    ) -> int | None:
        """Store one message (and index it); None when its message_id is already stored."""
        rows = self.sql.exec(
            "INSERT INTO messages(role, author, author_id, text, ts, message_id, reply_to_author_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING RETURNING id",
            role,
            author,
            author_id,
            text,
            ts,
            message_id,
            reply_to_author_id or None,
        )
        if not rows:
            return None
        new_id = int(rows[0]["id"])
        if index:
            index_after_reply(self.sql, new_id, self.retrieval)
        return new_id

    def apply_facts(
        self,
        text: str,
        author: str,
        author_id: str,
        source: int,
        ts: str,
        said_before: str | bool | None = True,
        chat_before: tuple[str, str] | None = None,
    ) -> None:
        """Record what the rules extract from one user message about its author (learning.py)."""
        apply_facts(self, text, author, author_id, source, ts, said_before, chat_before)

    def learn_fact(
        self, author: str, author_id: str, key: str, value: str, source: int, not_after: int | None = None
    ) -> None:
        """Add a fact as the rules would (a new value supersedes, a list gains an item).

        With `not_after`, a current value stated in a message after that id is newer than
        this one and stays.
        """
        self.change_fact(author, author_id, key, source, self.now(), add=value, not_after=not_after)

    def change_fact(
        self,
        author: str,
        author_id: str,
        key: str,
        source: int,
        ts: str,
        add: str | None = None,
        remove: str | None = None,
        not_after: int | None = None,
    ) -> None:
        """Set, add to or remove from one fact of a person (a new value supersedes the current one)."""
        key = canonical_key(key)  # a model's "favourite_colour" is the rules' "favorite_color"
        rows = self.sql.exec(
            "SELECT id, value, source_message FROM facts "
            "WHERE author_id = ? AND key = ? AND superseded_at IS NULL AND kind = 'fact'",
            author_id,
            key,
        )
        current = rows[0]["value"] if rows else None
        if (
            rows
            and not_after is not None
            and not is_list_key(key)
            and (rows[0]["source_message"] or 0) > not_after
        ):
            return
        value: str | None
        if is_list_key(key):
            value = merge_list(current, add=add, remove=remove)
        elif add is None and remove is not None and current and current.casefold() == remove.casefold():
            value = None  # "not a barista anymore": the job ends, nothing takes its place yet
        else:
            value = add if add is not None else current
        if value == current or (not value and current is None):
            return
        if rows:
            self.sql.exec("UPDATE facts SET superseded_at = ? WHERE id = ?", ts, rows[0]["id"])
        if value:
            self.sql.exec(
                "INSERT INTO facts(author, author_id, key, value, updated_at, source_message) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                author,
                author_id,
                key,
                value,
                ts,
                source,
            )

    # -- the turn ----------------------------------------------------------------------

    def turn(
        self,
        text: str,
        author: str = "",
        author_id: str = "",
        message_id: str | None = None,
        mode: str | None = None,
    ) -> wire.TurnAnswer:
        """Record a user message, then build its memory prompt from everything before it."""
        ts = self.now()
        day = ts[:10]

        def build() -> wire.TurnAnswer:
            # One transaction: an answer is sent only for a turn whose every write landed
            # (a full disk fails the whole turn, never half of it).
            # The state and the messages before this one (per mode: the recent and the index's), read once.
            state, before = turns.state_and_newest(self.sql, self._before, mode)
            chosen = cast(wire.Mode, mode or state.get("mode") or "auto")  # as the API checked or stored it
            topic_after = int(state.get(chat_state.TOPIC_AFTER) or 0)  # /new: recent starts after it
            want = min(RECENT_BY_MODE.get(chosen, RECENT_OTHERWISE), RING_SIZE)
            current_id = turns.insert_user_message(self.sql, text, author, author_id, message_id, ts)
            stored = current_id is not None
            if current_id is None:  # a repeat: acknowledged, not stored twice
                existing = self._find_by_message_id(message_id)
                assert existing is not None
                current_id = int(existing["id"])
                before = self._recent_before(current_id, max(want, self.retrieval.turns_before))
            else:
                self.apply_facts(text, author, author_id, current_id, ts, chat_before=last_said(before))
                chat_state.count_message(self.sql, author_id, day, prune=self._pruned_day != day)
                self._pruned_day = day
            recent = [m for m in before if m["id"] > topic_after][-want:] if want else []
            exclude = {current_id, *(m["id"] for m in recent)}
            ids = [m["id"] for m in before]
            upto = int(state.pop(turns.INDEXED_UPTO) or 0)  # the newest messages may wait (the tail)
            if not stored or (ids and upto + 1 < ids[0]) or any(i > upto and i not in exclude for i in ids):
                # A waiting message this retrieval could find (after a topic start, a repeat):
                # indexed first, without the words of this one (or they would find it).
                upto = index_tail(self.sql, below=current_id if stored else None, knobs=self.retrieval)
            retrieved = fit_budget(self._retrieve(text, PROMPT_MOST, exclude))
            if stored:  # after the retrieval, for the same reason
                index_behind(self.sql, current_id, ids, upto, self.retrieval)
            # The history only for a message that asks about the past: no other answer reads it.
            past = asks_about_the_past(text)
            facts, notes, history = turns.facts_of_turn(self.sql, PROMPT_FACTS_LIMIT, past)
            summary = state.get("summary") or ""
            topic_at = state.get(chat_state.TOPIC_AT)
            prompt = render_prompt(retrieved, summary, facts, notes=notes, topic_started_at=topic_at)
            self.set_state("last_prompt", prompt)
            usage_today, usage_author = turns.usage_of_day(self.sql, author_id, day)
            return {
                "prompt": prompt,
                "recent": recent,
                "retrieved": retrieved,
                "facts": facts,
                "summary": summary,
                "mode": chosen,
                "message_id": message_id if message_id is not None else str(current_id),
                "id": current_id,
                "usage_today": usage_today,
                "fact_history": history,
                "notes": notes,
                "persona": state.get(chat_state.PERSONA) or "",
                "topic_started_at": topic_at,
                "usage_today_author": usage_author,
            }

        ensure_indexed(self.sql, self.retrieval)  # what an import left pending, once (nothing after that)
        return self.sql.transaction(build)

    def _recent_before(self, current_id: int, n: int, after: int = 0) -> list[wire.Message]:
        n = min(n, RING_SIZE)
        rows = self.sql.exec(
            f"SELECT {MSG_COLUMNS} FROM messages WHERE id < ? AND id > ? ORDER BY id DESC LIMIT ?",
            current_id,
            after,
            n,
        )
        rows.reverse()
        return cast(list[wire.Message], rows)  # MSG_COLUMNS: Message's keys

    # -- retrieval ---------------------------------------------------------------------

    def _retrieve(self, query: str, k: int, exclude: set[int]) -> list[wire.ScoredMessage]:
        return ranked_messages(self.sql, query, k, exclude, self.retrieval)

    def search(self, query: str, k: int = RETRIEVE_K) -> wire.SearchAnswer:
        """Rank older messages as `turn` does, excluding nothing and recording nothing."""
        ensure_searchable(self.sql, self.retrieval)
        return {"results": self._retrieve(query, k, set())}

    # -- replies and usage -------------------------------------------------------------

    def reply(
        self,
        text: str,
        tier: str,
        model: str,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        latency_ms: float | None = None,
        cost_usd: float = 0.0,
        ok: bool = True,
        message_id: str | None = None,
        error: str | None = None,
        author_id: str = "",
        reply_to_message_id: str | None = None,
        reply_to_author_id: str | None = None,
    ) -> wire.ReplyAnswer:
        """Record one model attempt: the assistant message (when it has text) and a usage row.

        The message remembers whose message it answers (`reply_to_author_id`, else the author
        of `reply_to_message_id`, else of the newest user message), so that forgetting that
        person removes it too.
        """
        ts = self.now()
        call = ModelCall(
            ts, tier, model, prompt_tokens, completion_tokens, latency_ms, cost_usd, ok, error, message_id,
            author_id,
        )  # fmt: skip

        def record() -> wire.ReplyAnswer:
            if message_id is not None:
                seen = self.sql.exec(
                    "SELECT 1 AS x FROM router_usage WHERE message_id = ? LIMIT 1", message_id
                )
                existing = self._find_by_message_id(message_id)
                if seen or existing:
                    return {
                        "message_id": message_id,
                        "id": existing["id"] if existing else None,
                        "duplicate": True,
                    }
            new_id = None
            # A failed attempt with text is a stream cut off midway: the user saw that text,
            # so memory keeps it too.
            if text:
                answered = self._answered_author(reply_to_message_id, reply_to_author_id)
                new_id = self.insert_message(
                    "assistant", text, "assistant", "", message_id, ts, reply_to_author_id=answered
                )
            record_usage(self.sql, call)
            whose = author_id or reply_to_author_id or ""  # for per-person daily caps
            chat_state.record_author_usage(self.sql, whose, call)
            mid = message_id if message_id is not None else (str(new_id) if new_id else None)
            return {"message_id": mid, "id": new_id}

        ensure_indexed(self.sql, self.retrieval)
        return self.sql.transaction(record)

    def usage(self, recent: int = 20, author_id: str | None = None) -> wire.UsageAnswer:
        """All-time totals per tier and the most recent model calls; with `author_id`, also
        that person's usage today (`today_author`, the shape of a turn's `usage_today_author`)."""
        day = self.now()[:10]
        report = usage_report(self.sql, day, recent)
        if author_id:
            report["today_author"] = chat_state.usage_today_author(self.sql, author_id, day)
        return report

    # -- views -------------------------------------------------------------------------

    def facts(self, history: bool = False, kind: str | None = None) -> wire.FactsAnswer:
        """Current facts and notes, each with its id and kind; with `history`, superseded ones too."""
        return {"facts": facts_view(self.sql, history, kind)}

    def summary(self) -> wire.SummaryAnswer:
        """The rolling summary and how far it reaches."""
        return {
            "summary": self.state("summary") or "",
            "compactions": int(self.state("compactions", "0") or 0),
            "summarized_upto": self.summarized_upto(),
            "updated_at": self.state("summary_updated_at"),
        }

    def active_count(self) -> int:
        """How many messages the summary does not cover yet."""
        return int(
            self.sql.exec("SELECT COUNT(*) AS n FROM messages WHERE id > ?", self.summarized_upto())[0]["n"]
        )

    def unsummarized_beyond(self, n: int) -> bool:
        """True when more than `n` messages are not covered by the summary."""
        # Looks for the one message past n instead of counting them all: on the turn path,
        # a long backlog must not cost O(backlog).
        return bool(
            self.sql.exec(
                "SELECT id FROM messages WHERE id > COALESCE((SELECT CAST(value AS INTEGER) FROM state "
                "WHERE key = 'summarized_upto'), 0) ORDER BY id LIMIT 1 OFFSET ?",
                n,
            )
        )

    def needs_compaction(self) -> bool:
        """True when the un-summarized history has grown past the threshold."""
        return self.unsummarized_beyond(COMPACT_THRESHOLD)

    def stats(self) -> wire.StatsAnswer:
        """Counts of kept, active and archived messages, facts, the mode, the last prompt."""
        total = int(self.sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"])
        active = self.active_count()
        facts = int(self.sql.exec("SELECT COUNT(*) AS n FROM facts WHERE superseded_at IS NULL")[0]["n"])
        out: wire.StatsAnswer = {
            "total_messages": total,
            "active_messages": active,
            "archived_messages": total - active,
            "facts": facts,
            "mode": self.mode(),
        }
        last = self.state("last_prompt")
        if last is not None:
            out["last_prompt"] = last
        return out

    def settings(self) -> wire.SettingsAnswer:
        """The chat's settings: memory mode and persona ("" for the bot's default)."""
        return {"mode": self.mode(), "persona": chat_state.persona(self.sql)}

    def update_settings(self, mode: str | None = None, persona: str | None = None) -> wire.SettingsAnswer:
        """Change the chat's settings; returns them."""
        if mode is not None:
            self.set_state("mode", mode)
        if persona is not None:
            chat_state.set_persona(self.sql, persona)
        return self.settings()

    # -- bulk import and forgetting ----------------------------------------------------

    def import_messages(
        self, messages: list[wire.ImportedMessage], more: bool = False, remaining: int | None = None
    ) -> wire.ImportAnswer:
        """Store many messages at once, idempotent by message_id; keeps their `ts`; archives old history.

        With `more`, their index is built with the last batch (`more` False) or before a read.
        `remaining` (messages of the import still to come) lets it skip rows the import would
        delete itself (`imports.hold`): the same database either way.
        """
        return imports.import_messages(self, messages, more, remaining)

    def apply_retention(self, limit: int = forgetting.RETENTION_STEP) -> int:
        """Delete the oldest summarized messages past the retention cap, at most `limit`; how many went."""
        return forgetting.apply_retention(self, limit)

    def forget_author(self, author_id: str) -> wire.ForgetAuthorAnswer:
        """Forget one person: messages, facts, usage attribution; the summary is rebuilt."""
        return forgetting.forget_author(self, author_id)

    def forget_chat(self) -> wire.ForgetChatAnswer:
        """Delete everything this chat remembers."""
        return forgetting.forget_chat(self)
