"""The reads and the write of a turn that the engine does in one statement each."""

from __future__ import annotations

import functools
from operator import itemgetter
from typing import cast

from memory_engine import chat_state
from memory_engine.api import wire
from memory_engine.facts.extract import LIST_KEYS
from memory_engine.index.retrieval import INDEXED_UPTO_SQL, MESSAGE_COLUMNS
from memory_engine.notes import FACT_FIELDS, FACT_HISTORY_LIMIT
from memory_engine.storage import SqlStorage, rows_of

MSG_COLUMNS = ", ".join(MESSAGE_COLUMNS)
# Not a key of the state table: `state_and_newest` gives the index's newest id under it.
INDEXED_UPTO = " indexed_upto"
# The state keys a turn reads.
TURN_STATE = ("mode", "summary", chat_state.TOPIC_AFTER, chat_state.TOPIC_AT, chat_state.PERSONA)
# The newest fact rows a turn's `fact_history` is looked for in: a bounded read.
FACT_HISTORY_WINDOW = 2000
_FACT_NAMES = tuple(f.strip() for f in FACT_FIELDS.split(","))
_LISTS = ", ".join(f"'{k}'" for k in LIST_KEYS)
# A turn's facts in one statement: the current facts (the newest `limit`) and the notes,
# then (with a third parameter above 0) the history: superseded values of keys that hold
# one value (a list's old copies say nothing that "before X" could use, and in a long chat
# they would push out every other key's history). Part 0/1/2, each sorted by id in Python.
_FACTS_OF_TURN = (
    f"SELECT * FROM (SELECT 0 AS part, {FACT_FIELDS}, NULL AS superseded_at FROM facts "
    "WHERE superseded_at IS NULL AND kind = 'fact' ORDER BY id DESC LIMIT ?) "
    f"UNION ALL SELECT 1, {FACT_FIELDS}, NULL FROM facts WHERE kind = 'note' AND superseded_at IS NULL "
    f"UNION ALL SELECT * FROM (SELECT 2, {FACT_FIELDS}, superseded_at FROM facts "
    "WHERE id > (SELECT COALESCE(MAX(id), 0) FROM facts) - ? AND superseded_at IS NOT NULL "
    f"AND kind = 'fact' AND key NOT IN ({_LISTS}) ORDER BY id DESC LIMIT ?)"
)
# Today's usage per tier and the author's counts (what `usage_on` and
# `chat_state.usage_today_author` answer) in one statement: a tier row per tier, then one row
# for the author (tier NULL) with their messages and the chat's beside the calls.
_DAY_USAGE = (
    # Every column named: a storage may key its rows by column name (storage.rows_of).
    "SELECT tier, SUM(calls) AS calls, SUM(errors) AS errors, SUM(prompt_tokens) AS prompt, "
    "SUM(completion_tokens) AS completion, SUM(cost_usd) AS cost, NULL AS mine, NULL AS chat "
    "FROM usage_daily WHERE day = ? GROUP BY tier "
    "UNION ALL SELECT NULL, u.calls, u.errors, NULL, NULL, u.cost_usd, "
    "(SELECT messages FROM messages_daily WHERE day = ? AND author_id = ?), "
    "(SELECT messages FROM messages_daily_chat WHERE day = ?) "
    "FROM (SELECT 1) LEFT JOIN usage_daily_author u ON u.day = ? AND u.author_id = ?"
)


@functools.cache
def _state_and_newest(counts: tuple[tuple[str | None, int], ...]) -> str:
    """The statement of `state_and_newest` for a table of message counts per mode (see there)."""
    other = dict(counts)[None]
    cases = " ".join(f"WHEN '{mode}' THEN {int(n)}" for mode, n in counts if mode is not None)
    stored = (  # the count for the stored mode (none or '': "auto"), when the request names none
        f"(SELECT CASE COALESCE(NULLIF(value, ''), 'auto') {cases} ELSE {int(other)} END "
        "FROM state WHERE key = 'mode')"
    )
    auto = dict(counts).get("auto", other)
    nulls = ", ".join(["NULL"] * len(MESSAGE_COLUMNS))
    marks = ",".join("?" * len(TURN_STATE))
    return (
        f"SELECT * FROM (SELECT 1 AS part, NULL AS key, NULL AS value, {MSG_COLUMNS} FROM messages "
        f"ORDER BY id DESC LIMIT COALESCE(?, {stored}, {int(auto)})) "
        f"UNION ALL SELECT 0, key, value, {nulls} FROM state WHERE key IN ({marks}) "
        f"UNION ALL SELECT 0, '{INDEXED_UPTO}', ({INDEXED_UPTO_SQL}), {nulls}"
    )


def state_and_newest(
    sql: SqlStorage, counts: dict[str | None, int], mode: str | None
) -> tuple[dict[str, str | None], list[wire.Message]]:
    """The TURN_STATE keys and the newest messages, oldest first, in one statement (one crossing on a Worker).

    The state has one more key, INDEXED_UPTO: the index's newest id (`retrieval.indexed_upto`).

    How many messages: `counts[mode]` (`counts[None]` for a mode not in it), for the request's
    `mode` or else the chat's stored one ("auto" when none is stored).
    """
    n = counts.get(mode, counts[None]) if mode else None
    state: dict[str, str | None] = {}
    messages: list[wire.Message] = []
    for part, key, value, *row in rows_of(sql, _state_and_newest(tuple(counts.items())), n, *TURN_STATE):
        if part:
            messages.append(cast(wire.Message, dict(zip(MESSAGE_COLUMNS, row, strict=True))))
        else:
            state[key] = value
    messages.sort(key=itemgetter("id"))
    return state, messages


def insert_user_message(
    sql: SqlStorage, text: str, author: str, author_id: str, message_id: str | None, ts: str
) -> int | None:
    """Store a user message, not indexed yet; its id, or None when its message_id is stored already."""
    rows = rows_of(
        sql,
        "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
        "VALUES ('user', ?, ?, ?, ?, ?) ON CONFLICT(message_id) DO NOTHING RETURNING id",
        author,
        author_id,
        text,
        ts,
        message_id,
    )
    return int(rows[0][0]) if rows else None


def facts_of_turn(
    sql: SqlStorage, limit: int, history: bool
) -> tuple[list[wire.Fact], list[wire.Fact], list[wire.Fact]]:
    """(the newest `limit` current facts, the notes, the fact history), each oldest first.

    With `history`, the history holds the newest FACT_HISTORY_LIMIT superseded values of
    single-valued keys among the newest FACT_HISTORY_WINDOW fact rows; else it is empty.
    """
    parts: tuple[list[wire.Fact], list[wire.Fact], list[wire.Fact]] = ([], [], [])
    for part, *values, superseded_at in rows_of(
        sql, _FACTS_OF_TURN, limit, FACT_HISTORY_WINDOW, FACT_HISTORY_LIMIT if history else 0
    ):
        fact = cast(wire.Fact, dict(zip(_FACT_NAMES, values, strict=True)))  # FACT_FIELDS: Fact's keys
        if part == 2:
            fact["superseded_at"] = superseded_at
        parts[part].append(fact)
    for rows in parts:
        rows.sort(key=lambda f: f["id"])
    return parts


def usage_of_day(
    sql: SqlStorage, author_id: str, day: str
) -> tuple[dict[str, wire.TierUsage], wire.AuthorUsage]:
    """(today's totals per tier, as `usage.usage_on`; the author's, as `chat_state.usage_today_author`)."""
    tiers: dict[str, wire.TierUsage] = {}
    author: wire.AuthorUsage | None = None
    for tier, calls, errors, prompt, completion, cost, mine, chat in rows_of(
        sql, _DAY_USAGE, day, day, author_id, day, day, author_id
    ):
        if tier is None:
            author = {
                "day": day,
                "author_id": author_id,
                "messages": int(mine or 0),
                "calls": int(calls or 0),
                "errors": int(errors or 0),
                "cost_usd": round(float(cost or 0.0), 8),
                "chat_messages": int(chat or 0),
            }
            continue
        tiers[tier] = {
            "calls": int(calls or 0),
            "errors": int(errors or 0),
            "prompt_tokens": int(prompt or 0),
            "completion_tokens": int(completion or 0),
            "cost_usd": round(float(cost or 0.0), 8),
        }
    assert author is not None  # the statement's last part is one row, always
    return dict(sorted(tiers.items())), author
