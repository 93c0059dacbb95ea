"""ChatMemory: one chat's memory over its own SQLite database.

Every method is synchronous and touches only `SqlStorage`, so it runs unchanged in the
Durable Object (Pyodide) and in the local host (CPython + sqlite3). Inputs are assumed
validated by `http_api`; the engine only enforces the memory semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from . import chat_state
from .facts import extract_facts, is_list_key, merge_list
from .notes import current_facts, current_notes, facts_view
from .prompt import render_prompt
from .retrieval import index_message, index_messages, rank, unindex_messages
from .storage import SqlStorage, migrate

RING_SIZE = 12
RECENT_BY_MODE = {"auto": 4, "full": 12}
RETRIEVE_K = 3
COMPACT_THRESHOLD = 25  # un-summarized messages beyond this trigger compaction
KEEP_UNSUMMARIZED = 5
USAGE_ROWS_KEPT = 2000
PROMPT_FACTS_LIMIT = 40
RETENTION_MESSAGES = 50_000  # archived messages kept searchable per chat

MSG_COLUMNS = "id, role, author, author_id, text, ts, message_id"


def utc_iso(dt: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z, the format of every stored timestamp."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _now() -> datetime:
    return datetime.now(UTC)


class ChatMemory:
    """The memory of one chat: archive + index, ring, facts, summary state, usage."""

    def __init__(
        self, sql: SqlStorage, clock: Callable[[], datetime] = _now, retention: int = RETENTION_MESSAGES
    ):
        self.sql = sql
        self.clock = clock
        self.retention = retention
        migrate(sql, self.now())

    # -- small helpers -----------------------------------------------------------------

    def now(self) -> str:
        """The current time as a stored timestamp."""
        return utc_iso(self.clock())

    def _state(self, key: str, default: str | None = None) -> str | None:
        rows = self.sql.exec("SELECT value FROM state WHERE key = ?", key)
        return rows[0]["value"] if rows else default

    def _set_state(self, key: str, value: str | None) -> None:
        self.sql.exec(
            "INSERT INTO state(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            key,
            value,
        )

    def mode(self) -> str:
        """The chat's memory mode: `auto` (4 recent) or `full` (12 recent)."""
        return self._state("mode", "auto") or "auto"

    def summarized_upto(self) -> int:
        """The id of the newest message the summary covers (0: none)."""
        return int(self._state("summarized_upto", "0") or 0)

    # -- recording ---------------------------------------------------------------------

    def _find_by_message_id(self, message_id: str | None) -> dict[str, Any] | None:
        if message_id is None:
            return None
        rows = self.sql.exec(f"SELECT {MSG_COLUMNS} FROM messages WHERE message_id = ?", message_id)
        return rows[0] if rows else None

    def _insert(
        self,
        role: str,
        text: str,
        author: str,
        author_id: str,
        message_id: str | None,
        ts: str,
        index: bool = True,
    ) -> int | None:
        """Store one message and index it; None when its message_id is already stored."""
        rows = self.sql.exec(
            "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING RETURNING id",
            role,
            author,
            author_id,
            text,
            ts,
            message_id,
        )
        if not rows:
            return None
        new_id = int(rows[0]["id"])
        if index:
            index_message(self.sql, new_id, text, author)
        return new_id

    def _apply_facts(self, text: str, author: str, author_id: str, source: int, ts: str) -> None:
        for change in extract_facts(text):
            if change.remove_from:
                self._change_fact(author, author_id, change.remove_from, source, ts, remove=change.value)
            self._change_fact(author, author_id, change.key, source, ts, add=change.value)

    def _change_fact(
        self,
        author: str,
        author_id: str,
        key: str,
        source: int,
        ts: str,
        add: str | None = None,
        remove: str | None = None,
    ) -> None:
        rows = self.sql.exec(
            "SELECT id, value FROM facts "
            "WHERE author_id = ? AND key = ? AND superseded_at IS NULL AND kind = 'fact'",
            author_id,
            key,
        )
        current = rows[0]["value"] if rows else None
        if is_list_key(key):
            value = merge_list(current, add=add, remove=remove)
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
    ) -> dict[str, Any]:
        """Record a user message, then build its memory prompt from everything before it."""
        ts = self.now()

        def record() -> int:
            existing = self._find_by_message_id(message_id)
            if existing is not None:
                return int(existing["id"])  # a repeat: acknowledged, not stored twice
            new_id = self._insert("user", text, author, author_id, message_id, ts)
            assert new_id is not None
            self._apply_facts(text, author, author_id, new_id, ts)
            return new_id

        def build() -> dict[str, Any]:
            # One transaction: an answer is sent only for a turn whose every write landed
            # (a full disk fails the whole turn, never half of it).
            current_id = record()
            chosen = mode or self.mode()
            topic_after, topic_at = chat_state.topic_start(self.sql)  # /new: recent starts after it
            recent = self._recent_before(current_id, RECENT_BY_MODE.get(chosen, 4), topic_after)
            exclude = {current_id, *(m["id"] for m in recent)}
            retrieved = self._retrieve(text, RETRIEVE_K, exclude)
            facts = self._current_facts(limit=PROMPT_FACTS_LIMIT)
            notes = current_notes(self.sql)
            summary = self._state("summary") or ""
            prompt = render_prompt(recent, retrieved, summary, facts, notes=notes, topic_started_at=topic_at)
            self._set_state("last_prompt", prompt)
            return {
                "extras": chat_state.turn_extras(self.sql, author_id, ts[:10], notes, topic_at),
                "current_id": current_id,
                "mode": chosen,
                "recent": recent,
                "retrieved": retrieved,
                "facts": facts,
                "summary": summary,
                "prompt": prompt,
            }

        built = self.sql.transaction(build)
        current_id, mode = built["current_id"], built["mode"]
        prompt, recent, retrieved = built["prompt"], built["recent"], built["retrieved"]
        facts, summary = built["facts"], built["summary"]
        return {
            "prompt": prompt,
            "recent": recent,
            "retrieved": retrieved,
            "facts": facts,
            "summary": summary,
            "mode": mode,
            "message_id": message_id if message_id is not None else str(current_id),
            "id": current_id,
            "usage_today": self.usage_today(),
            **built["extras"],
        }

    def _recent_before(self, current_id: int, n: int, after: int = 0) -> list[dict[str, Any]]:
        n = min(n, RING_SIZE)
        rows = self.sql.exec(
            f"SELECT {MSG_COLUMNS} FROM messages WHERE id < ? AND id > ? ORDER BY id DESC LIMIT ?",
            current_id,
            after,
            n,
        )
        rows.reverse()
        return rows

    # -- retrieval ---------------------------------------------------------------------

    def _messages_by_id(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        ids = list(ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.sql.exec(f"SELECT {MSG_COLUMNS} FROM messages WHERE id IN ({marks})", *ids)
        return {int(r["id"]): r for r in rows}

    def _retrieve(self, query: str, k: int, exclude: set[int]) -> list[dict[str, Any]]:
        ranked = rank(self.sql, query, k, exclude)
        by_id = self._messages_by_id(i for i, _ in ranked)
        return [dict(by_id[i], score=round(s, 6)) for i, s in ranked if i in by_id]

    def search(self, query: str, k: int = RETRIEVE_K) -> dict[str, Any]:
        """Rank older messages as `turn` does, excluding nothing and recording nothing."""
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
    ) -> dict[str, Any]:
        """Record one model attempt: the assistant message (when it has text) and a usage row."""
        ts = self.now()

        def record() -> dict[str, Any]:
            if message_id is not None:
                seen = self.sql.exec(
                    "SELECT 1 AS x FROM router_usage WHERE message_id = ? LIMIT 1", message_id
                )
                existing = self._find_by_message_id(message_id)
                if seen or existing:
                    return {"message_id": message_id, "id": existing and existing["id"], "duplicate": True}
            new_id = None
            # A failed attempt with text is a stream cut off midway: the user saw that text,
            # so memory keeps it too.
            if text:
                new_id = self._insert("assistant", text, "assistant", "", message_id, ts)
            self._record_usage(
                ts,
                tier,
                model,
                prompt_tokens,
                completion_tokens,
                latency_ms,
                cost_usd,
                ok,
                error,
                message_id,
                author_id,
            )
            mid = message_id if message_id is not None else (str(new_id) if new_id else None)
            return {"message_id": mid, "id": new_id}

        return self.sql.transaction(record)

    def _record_usage(
        self,
        ts: str,
        tier: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float | None,
        cost_usd: float,
        ok: bool,
        error: str | None,
        message_id: str | None,
        author_id: str,
    ) -> None:
        rows = self.sql.exec(
            "INSERT INTO router_usage(ts, tier, model, prompt_tokens, completion_tokens, "
            "latency_ms, cost_usd, ok, error, message_id, author_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            ts,
            tier,
            model,
            prompt_tokens,
            completion_tokens,
            latency_ms,
            cost_usd,
            1 if ok else 0,
            error,
            message_id,
            author_id,
        )
        self.sql.exec(
            "INSERT INTO usage_daily(day, tier, calls, errors, prompt_tokens, completion_tokens, cost_usd) "
            "VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT(day, tier) DO UPDATE SET "
            "calls = calls + 1, errors = errors + excluded.errors, "
            "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
            "completion_tokens = completion_tokens + excluded.completion_tokens, "
            "cost_usd = cost_usd + excluded.cost_usd",
            ts[:10],
            tier,
            0 if ok else 1,
            prompt_tokens,
            completion_tokens,
            cost_usd,
        )
        chat_state.record_author_usage(
            self.sql, ts[:10], author_id, ok, prompt_tokens, completion_tokens, cost_usd
        )
        # Bounded: the per-call rows keep a window; the daily table keeps the totals.
        newest = int(rows[0]["id"])
        if newest % 100 == 0:
            self.sql.exec("DELETE FROM router_usage WHERE id <= ?", newest - USAGE_ROWS_KEPT)

    _TOTALS = (
        "SUM(calls) AS calls, SUM(errors) AS errors, SUM(prompt_tokens) AS prompt_tokens, "
        "SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd"
    )

    def _tier_totals(self, where: str = "", *params: Any) -> dict[str, dict[str, Any]]:
        rows = self.sql.exec(
            f"SELECT tier, {self._TOTALS} FROM usage_daily {where} GROUP BY tier ORDER BY tier", *params
        )
        return {
            r["tier"]: {
                "calls": int(r["calls"] or 0),
                "errors": int(r["errors"] or 0),
                "prompt_tokens": int(r["prompt_tokens"] or 0),
                "completion_tokens": int(r["completion_tokens"] or 0),
                "cost_usd": round(float(r["cost_usd"] or 0.0), 8),
            }
            for r in rows
        }

    def usage_today(self) -> dict[str, dict[str, Any]]:
        """Today's (UTC) calls, errors, tokens and cost per tier."""
        return self._tier_totals("WHERE day = ?", self.now()[:10])

    def usage(self, recent: int = 20) -> dict[str, Any]:
        """All-time totals per tier and the most recent model calls."""
        rows = self.sql.exec(
            "SELECT ts, tier, model, prompt_tokens, completion_tokens, latency_ms, cost_usd, ok, error "
            "FROM router_usage ORDER BY id DESC LIMIT ?",
            recent,
        )
        for r in rows:
            r["ok"] = bool(r["ok"])
        return {"tiers": self._tier_totals(), "today": self.usage_today(), "recent": rows}

    # -- views -------------------------------------------------------------------------

    def _current_facts(self, limit: int | None = None, kind: str | None = "fact") -> list[dict[str, Any]]:
        return current_facts(self.sql, limit, kind)

    def facts(self, history: bool = False, kind: str | None = None) -> dict[str, Any]:
        """Current facts and notes, each with its id and kind; with `history`, superseded ones too."""
        return {"facts": facts_view(self.sql, history, kind)}

    def summary(self) -> dict[str, Any]:
        """The rolling summary and how far it reaches."""
        return {
            "summary": self._state("summary") or "",
            "compactions": int(self._state("compactions", "0") or 0),
            "summarized_upto": self.summarized_upto(),
            "updated_at": self._state("summary_updated_at"),
        }

    def active_count(self) -> int:
        """How many messages the summary does not cover yet."""
        return int(
            self.sql.exec("SELECT COUNT(*) AS n FROM messages WHERE id > ?", self.summarized_upto())[0]["n"]
        )

    def needs_compaction(self) -> bool:
        """True when the un-summarized history has grown past the threshold."""
        # Looks for the one message past the threshold instead of counting them all: on
        # the turn path, a long backlog (summarizer down for days) must not cost O(backlog).
        return bool(
            self.sql.exec(
                "SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?",
                self.summarized_upto(),
                COMPACT_THRESHOLD,
            )
        )

    def stats(self) -> dict[str, Any]:
        """Counts of kept, active and archived messages, facts, the mode, the last prompt."""
        total = int(self.sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"])
        active = self.active_count()
        facts = int(self.sql.exec("SELECT COUNT(*) AS n FROM facts WHERE superseded_at IS NULL")[0]["n"])
        out: dict[str, Any] = {
            "total_messages": total,
            "active_messages": active,
            "archived_messages": total - active,
            "facts": facts,
            "mode": self.mode(),
        }
        last = self._state("last_prompt")
        if last is not None:
            out["last_prompt"] = last
        return out

    def settings(self) -> dict[str, Any]:
        """The chat's settings: memory mode and persona ("" for the bot's default)."""
        return {"mode": self.mode(), "persona": chat_state.persona(self.sql)}

    def update_settings(self, mode: str | None = None, persona: str | None = None) -> dict[str, Any]:
        """Change the chat's settings; returns them."""
        if mode is not None:
            self._set_state("mode", mode)
        if persona is not None:
            chat_state.set_persona(self.sql, persona)
        return self.settings()

    # -- bulk import and forgetting ----------------------------------------------------

    def import_messages(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Store many messages at once, idempotent by message_id; keeps their `ts`."""
        now = self.now()

        def run() -> dict[str, int]:
            imported = skipped = 0
            first_id = last_id = None
            for m in messages:
                role = m["role"]
                author = m.get("author") or ("assistant" if role == "assistant" else "")
                author_id = m.get("author_id") or ""
                ts = m.get("ts") or now
                new_id = self._insert(
                    role, m["text"], author, author_id, m.get("message_id"), ts, index=False
                )
                if new_id is None:
                    skipped += 1
                    continue
                imported += 1
                first_id = new_id if first_id is None else first_id
                last_id = new_id
                if role == "user":
                    self._apply_facts(m["text"], author, author_id, new_id, ts)
            if first_id is not None:
                # One statement for the batch: ids in [first, last] are all this import's,
                # since one chat runs one request at a time.
                index_messages(self.sql, first_id, last_id)
            return {"imported": imported, "skipped": skipped}

        return self.sql.transaction(run)

    def apply_retention(self) -> int:
        """Delete the oldest summarized messages past the retention cap; how many went."""
        total = int(self.sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"])
        excess = total - self.retention
        if excess <= 0:
            return 0
        # Only summarized messages go: the summary already keeps their gist.
        where = "id IN (SELECT id FROM messages WHERE id <= ? ORDER BY id LIMIT ?)"
        unindex_messages(self.sql, where, self.summarized_upto(), excess)
        rows = self.sql.exec(
            f"DELETE FROM messages WHERE {where} RETURNING id", self.summarized_upto(), excess
        )
        return len(rows)

    def _new_epoch(self) -> None:
        # A compaction started before a forgetting must not commit its summary.
        self._set_state(
            "summary_epoch",
            self.now() + ":" + str(self.sql.exec("SELECT COALESCE(MAX(id), 0) AS n FROM messages")[0]["n"]),
        )

    def forget_author(self, author_id: str) -> dict[str, Any]:
        """Forget one person: messages, facts, usage attribution; the summary is rebuilt."""

        def run() -> dict[str, Any]:
            unindex_messages(self.sql, "author_id = ? AND role = 'user'", author_id)
            gone = self.sql.exec(
                "DELETE FROM messages WHERE author_id = ? AND role = 'user' RETURNING id", author_id
            )
            facts = self.sql.exec("DELETE FROM facts WHERE author_id = ? RETURNING id", author_id)
            self.sql.exec("UPDATE router_usage SET author_id = '' WHERE author_id = ?", author_id)
            chat_state.forget_author_usage(self.sql, author_id)
            # The old summary may quote them: drop it and summarize again from what remains.
            for key in ("summary", "summary_updated_at", "last_prompt"):
                self.sql.exec("DELETE FROM state WHERE key = ?", key)
            self._set_state("summarized_upto", "0")
            self._new_epoch()
            return {"deleted": True, "messages": len(gone), "facts": len(facts)}

        return self.sql.transaction(run)

    def forget_chat(self) -> dict[str, Any]:
        """Delete everything this chat remembers."""

        def run() -> None:
            tables = ("messages", "messages_fts", "facts", "router_usage", "usage_daily", "state")
            for table in (*tables, *chat_state.TABLES):
                self.sql.exec(f"DELETE FROM {table}")
            self._new_epoch()

        self.sql.transaction(run)
        return {"deleted": True}
