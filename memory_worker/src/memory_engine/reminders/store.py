"""Reminders kept in the chat's own memory, and the one dispatch queue that hands them to the bot.

A chat keeps its reminders (table `reminders`, migration 7). Its alarm, shared with
compaction, wakes at the earliest due one; the host then `hand_over`s the due occurrences
to the dispatch object (the same Durable Object class under the name `DISPATCH_KEY`, its
table `reminder_dispatch`) and marks them handed. The bot leases from that one queue (never
polling the chats), reads the reminder from its chat (`get`: gone when forgotten or cancelled),
sends it, records the send in the chat (`delivered`, idempotent per occurrence) and acks the
lease. Every step is idempotent on the key `chat:id:due`, so a crash anywhere repeats a step
and never doubles a send that the chat has recorded. Times are integer milliseconds UTC; a
recurring reminder's next occurrence is computed by the bot (it has the time-zone database)
and handed back with `delivered`.
"""

from __future__ import annotations

import json
from typing import Any

from memory_engine.errors import NotTheirReminder, ReminderNotFound, TooManyReminders
from memory_engine.reminders.wire import (
    AckAnswer,
    CancelAnswer,
    DeliveredAnswer,
    DispatchItem,
    Every,
    LeaseAnswer,
    OfferAnswer,
    OfferRequest,
    QueueState,
    ReleaseAnswer,
    Reminder,
    ReminderAnswer,
    RemindersAnswer,
)
from memory_engine.storage import SqlStorage

DISPATCH_KEY = "@dispatch"  # not a valid chat key: no chat route can reach the dispatch object
MAX_PENDING = 200  # pending reminders per chat
MAX_PENDING_PER_PERSON = 25  # of them one person's: one member cannot take every slot
MAX_TEXT = 1000
DONE_KEPT_MS = 24 * 3600 * 1000  # acked dispatch rows are kept a day: a late re-offer stays a no-op
MAX_LEASE = 50

TABLES = ("reminders",)  # what forgetting the whole chat empties

COLUMNS = (
    "id, author, author_id, text, due_at, tz, every, created_at, state, sent_count, last_sent_at, last_late"
)


def occurrence_key(chat_key: str, reminder_id: int, due_at: int) -> str:
    """The idempotency key of one occurrence: the same through every retry of every step."""
    return f"{chat_key}#{reminder_id}#{due_at}"


def _row(row: dict[str, Any]) -> Reminder:
    every = row.get("every")
    return {
        "id": int(row["id"]),
        "author": row["author"],
        "author_id": row["author_id"],
        "text": row["text"],
        "due_at": int(row["due_at"]),
        "tz": row["tz"],
        "every": json.loads(every) if every else None,
        "created_at": row["created_at"],
        "state": row["state"],
        "sent_count": int(row["sent_count"]),
        "last_sent_at": row["last_sent_at"],
        "last_late": int(row["last_late"]),
    }


# -- the chat's side -------------------------------------------------------------------------


def add(
    sql: SqlStorage,
    now: str,
    text: str,
    due_at: int,
    author: str = "",
    author_id: str = "",
    tz: str = "UTC",
    every: Every | None = None,
) -> ReminderAnswer:
    """Keep a reminder; `{"reminder"}`. Raises TooManyReminders past MAX_PENDING in the chat or
    MAX_PENDING_PER_PERSON of `author_id`'s."""

    def run() -> ReminderAnswer:
        count = sql.exec("SELECT COUNT(*) AS n FROM reminders WHERE state = 'pending'")[0]["n"]
        if int(count) >= MAX_PENDING:
            raise TooManyReminders(f"this chat has {MAX_PENDING} pending reminders already")
        if author_id:
            theirs = sql.exec(
                "SELECT COUNT(*) AS n FROM reminders WHERE state = 'pending' AND author_id = ?", author_id
            )[0]["n"]
            if int(theirs) >= MAX_PENDING_PER_PERSON:
                raise TooManyReminders(
                    f"you have {MAX_PENDING_PER_PERSON} pending reminders in this chat already: "
                    "cancel one first (/reminders, /unremind N)"
                )
        rows = sql.exec(
            "INSERT INTO reminders(author, author_id, text, due_at, tz, every, created_at) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
            author,
            author_id,
            text,
            due_at,
            tz,
            json.dumps(every, sort_keys=True) if every else None,
            now,
        )
        return {"reminder": _row(rows[0])}

    return sql.transaction(run)


def pending(sql: SqlStorage, author_id: str | None = None) -> RemindersAnswer:
    """The chat's pending reminders, soonest first (only `author_id`'s when given)."""
    where, params = ("AND author_id = ?", [author_id]) if author_id else ("", [])
    rows = sql.exec(
        f"SELECT {COLUMNS} FROM reminders WHERE state = 'pending' {where} ORDER BY due_at, id", *params
    )
    return {"reminders": [_row(r) for r in rows]}


def get(sql: SqlStorage, reminder_id: int) -> ReminderAnswer:
    """One reminder whatever its state; raises ReminderNotFound."""
    rows = sql.exec(f"SELECT {COLUMNS} FROM reminders WHERE id = ?", reminder_id)
    if not rows:
        raise ReminderNotFound(f"no reminder {reminder_id} in this chat")
    return {"reminder": _row(rows[0])}


def cancel(sql: SqlStorage, reminder_id: int, author_id: str | None = None) -> CancelAnswer:
    """Delete a pending reminder (only `author_id`'s when given); `{"cancelled": Reminder}`."""

    def run() -> CancelAnswer:
        rows = sql.exec(f"SELECT {COLUMNS} FROM reminders WHERE id = ? AND state = 'pending'", reminder_id)
        if not rows:
            raise ReminderNotFound(f"no pending reminder {reminder_id} in this chat")
        if author_id is not None and rows[0]["author_id"] != author_id:
            raise NotTheirReminder(f"reminder {reminder_id} is someone else's")
        # Deleted, not marked: its words go. A dispatch entry left for it finds nothing and is acked.
        sql.exec("DELETE FROM reminders WHERE id = ?", reminder_id)
        return {"cancelled": _row(rows[0])}

    return sql.transaction(run)


def delivered(
    sql: SqlStorage, reminder_id: int, due_at: int, sent_at: int, late: bool, next_due_at: int | None
) -> DeliveredAnswer:
    """Record the send of one occurrence (once: a repeat answers `duplicate`); a recurring one moves on."""

    def run() -> DeliveredAnswer:
        rows = sql.exec("SELECT state, due_at FROM reminders WHERE id = ?", reminder_id)
        if not rows or rows[0]["state"] != "pending" or int(rows[0]["due_at"]) != due_at:
            return {"recorded": False, "duplicate": True}
        if next_due_at is not None and next_due_at > due_at:
            sql.exec(
                "UPDATE reminders SET due_at = ?, handed_due = NULL, sent_count = sent_count + 1, "
                "last_sent_at = ?, last_late = ? WHERE id = ?",
                next_due_at,
                sent_at,
                int(late),
                reminder_id,
            )
        else:
            sql.exec(
                "UPDATE reminders SET state = 'sent', sent_count = sent_count + 1, last_sent_at = ?, "
                "last_late = ? WHERE id = ?",
                sent_at,
                int(late),
                reminder_id,
            )
        return {"recorded": True, "duplicate": False}

    return sql.transaction(run)


def due_items(sql: SqlStorage, chat_key: str, now_ms: int) -> list[DispatchItem]:
    """The due occurrences not yet handed to the dispatch object."""
    rows = sql.exec(
        "SELECT id, due_at FROM reminders WHERE state = 'pending' AND due_at <= ? "
        "AND (handed_due IS NULL OR handed_due != due_at) ORDER BY due_at LIMIT ?",
        now_ms,
        MAX_LEASE,
    )
    return [
        {
            "key": occurrence_key(chat_key, int(r["id"]), int(r["due_at"])),
            "chat_key": chat_key,
            "reminder_id": int(r["id"]),
            "due_at": int(r["due_at"]),
            "attempts": 0,
        }
        for r in rows
    ]


def mark_handed(sql: SqlStorage, items: list[DispatchItem]) -> None:
    """Remember that these occurrences are in the dispatch queue (after it acknowledged them)."""
    for item in items:
        sql.exec(
            "UPDATE reminders SET handed_due = ? WHERE id = ? AND due_at = ?",
            item["due_at"],
            item["reminder_id"],
            item["due_at"],
        )


def next_alarm_ms(sql: SqlStorage) -> int | None:
    """When the chat's alarm must wake for its reminders (the earliest occurrence not handed yet)."""
    rows = sql.exec(
        "SELECT MIN(due_at) AS t FROM reminders WHERE state = 'pending' "
        "AND (handed_due IS NULL OR handed_due != due_at)"
    )
    value = rows[0]["t"] if rows else None
    return None if value is None else int(value)


def moves_alarm(current: int | None, at: int, backing_off: bool = False) -> bool:
    """Whether the chat's one alarm (set for `current`; None: unset) must be set to `at`: it rings
    later, and does not wait out a failed compaction's backoff (`backing_off`)."""
    return current is None or (current > at and not backing_off)


def offer_body(items: list[DispatchItem]) -> bytes:
    """The body of `POST /v1/dispatch/offer`: a chat's due occurrences, handed to the dispatch object."""
    request: OfferRequest = {"items": items}
    return json.dumps(request).encode("utf-8")


def earliest(*times: int | None) -> int | None:
    """The earliest of the given alarm times (None: no alarm): one alarm serves them all."""
    given = [t for t in times if t is not None]
    return min(given) if given else None


def next_wake(
    sql: SqlStorage, now_ms: int, compaction_delay_ms: int | None, hand_over_retry_at: int | None = None
) -> int | None:
    """When the chat's one alarm must ring next, from its reminders as they are now (None: never).

    The host calls this as an alarm run ends, after the compaction's await on its summarizer:
    a write meanwhile leaves the alarm to the run, so the reminders are read here, not before
    the compaction. A reminder added meanwhile is covered; one cancelled or forgotten leaves no
    early alarm. `compaction_delay_ms` is `on_alarm`'s answer; after a failed hand-over the due
    reminders wait until `hand_over_retry_at` rather than ringing again at once.
    """
    reminder_at = next_alarm_ms(sql)
    if reminder_at is not None and hand_over_retry_at is not None:
        reminder_at = max(reminder_at, hand_over_retry_at)
    return earliest(None if compaction_delay_ms is None else now_ms + compaction_delay_ms, reminder_at)


def forget_author(sql: SqlStorage, author_id: str) -> int:
    """Delete every reminder of one person (sent ones too); how many went."""
    return len(sql.exec("DELETE FROM reminders WHERE author_id = ? RETURNING id", author_id))


def export_rows(sql: SqlStorage, author_id: str | None) -> list[Reminder]:
    """Every reminder of the chat (or of one person), for the export."""
    where, params = ("WHERE author_id = ?", [author_id]) if author_id else ("", [])
    rows = sql.exec(f"SELECT {COLUMNS} FROM reminders {where} ORDER BY id", *params)
    return [_row(r) for r in rows]


# -- the dispatch object's side ----------------------------------------------------------------


def offer(sql: SqlStorage, items: list[DispatchItem], now_ms: int) -> OfferAnswer:
    """Queue due occurrences (a key already queued, or already acked, is left alone)."""

    def run() -> int:
        added = 0
        for item in items:
            rows = sql.exec(
                "INSERT INTO reminder_dispatch(key, chat_key, reminder_id, due_at, offered_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING RETURNING key",
                item["key"],
                item["chat_key"],
                item["reminder_id"],
                item["due_at"],
                now_ms,
            )
            added += len(rows)
        sql.exec(
            "DELETE FROM reminder_dispatch WHERE done_at IS NOT NULL AND done_at < ?", now_ms - DONE_KEPT_MS
        )
        return added

    return {"queued": sql.transaction(run)}


def lease(
    sql: SqlStorage, owner: str, prefixes: list[str], now_ms: int, limit: int, lease_ms: int
) -> LeaseAnswer:
    """Lease up to `limit` ready occurrences of chats starting with one of `prefixes`.

    Ready: not done, not before its retry time, and either not leased, its lease run out, or
    leased by this same `owner` (a restarted bot takes back what it held when it died).
    """
    match = " OR ".join("substr(chat_key, 1, ?) = ?" for _ in prefixes) or "1 = 1"
    params: list[Any] = []
    for p in prefixes:
        params += [len(p), p]

    def run() -> list[DispatchItem]:
        rows = sql.exec(
            "SELECT key, chat_key, reminder_id, due_at, attempts FROM reminder_dispatch "
            "WHERE done_at IS NULL AND not_before <= ? AND (lease_until <= ? OR lease_owner = ?) "
            f"AND ({match}) ORDER BY due_at LIMIT ?",
            now_ms,
            now_ms,
            owner,
            *params,
            limit,
        )
        out: list[DispatchItem] = []
        for r in rows:
            sql.exec(
                "UPDATE reminder_dispatch SET lease_owner = ?, lease_until = ?, attempts = attempts + 1 "
                "WHERE key = ?",
                owner,
                now_ms + lease_ms,
                r["key"],
            )
            out.append(
                {
                    "key": r["key"],
                    "chat_key": r["chat_key"],
                    "reminder_id": int(r["reminder_id"]),
                    "due_at": int(r["due_at"]),
                    "attempts": int(r["attempts"]) + 1,
                }
            )
        return out

    return {"items": sql.transaction(run)}


def ack(sql: SqlStorage, keys: list[str], now_ms: int) -> AckAnswer:
    """Mark occurrences done (sent, or found gone in their chat); acking twice is harmless."""

    def run() -> int:
        done = 0
        for key in keys:
            done += len(
                sql.exec(
                    "UPDATE reminder_dispatch SET done_at = ?, lease_owner = NULL "
                    "WHERE key = ? AND done_at IS NULL RETURNING key",
                    now_ms,
                    key,
                )
            )
        return done

    return {"acked": sql.transaction(run)}


def release(sql: SqlStorage, key: str, owner: str, retry_at: int) -> ReleaseAnswer:
    """Give a lease back after a failed send: the occurrence is kept and retried from `retry_at`."""
    rows = sql.exec(
        "UPDATE reminder_dispatch SET lease_owner = NULL, lease_until = 0, not_before = ? "
        "WHERE key = ? AND lease_owner = ? AND done_at IS NULL RETURNING key",
        retry_at,
        key,
        owner,
    )
    return {"released": bool(rows)}


def queue_state(sql: SqlStorage) -> QueueState:
    """Counts of the dispatch queue: waiting (not done) and done."""
    row = sql.exec("SELECT COUNT(*) AS n, COALESCE(SUM(done_at IS NULL), 0) AS open FROM reminder_dispatch")[
        0
    ]
    return {"open": int(row["open"]), "done": int(row["n"]) - int(row["open"])}
