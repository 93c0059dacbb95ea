"""Usage accounting: one routerUsage row per model call (a bounded window) and daily totals per tier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from memory_engine.api import wire
from memory_engine.storage import SqlStorage

USAGE_ROWS_KEPT = 2000

_TOTALS = (
    "SUM(calls) AS calls, SUM(errors) AS errors, SUM(prompt_tokens) AS prompt_tokens, "
    "SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd"
)


@dataclass(frozen=True)
class ModelCall:
    """One model attempt as the usage tables count it (a routerUsage row)."""

    ts: str
    tier: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float | None = None
    cost_usd: float = 0.0
    ok: bool = True
    error: str | None = None
    message_id: str | None = None
    author_id: str = ""

    @property
    def day(self) -> str:
        """Its UTC day (YYYY-MM-DD), the daily totals' key."""
        return self.ts[:10]


def record_usage(sql: SqlStorage, call: ModelCall) -> None:
    """Store one model call and add it to the day's totals of its tier."""
    rows = sql.exec(
        "INSERT INTO router_usage(ts, tier, model, prompt_tokens, completion_tokens, "
        "latency_ms, cost_usd, ok, error, message_id, author_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        call.ts,
        call.tier,
        call.model,
        call.prompt_tokens,
        call.completion_tokens,
        call.latency_ms,
        call.cost_usd,
        1 if call.ok else 0,
        call.error,
        call.message_id,
        call.author_id,
    )
    sql.exec(
        "INSERT INTO usage_daily(day, tier, calls, errors, prompt_tokens, completion_tokens, cost_usd) "
        "VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT(day, tier) DO UPDATE SET "
        "calls = calls + 1, errors = errors + excluded.errors, "
        "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
        "completion_tokens = completion_tokens + excluded.completion_tokens, "
        "cost_usd = cost_usd + excluded.cost_usd",
        call.day,
        call.tier,
        0 if call.ok else 1,
        call.prompt_tokens,
        call.completion_tokens,
        call.cost_usd,
    )
    # Bounded: the per-call rows keep a window; the daily table keeps the totals.
    newest = int(rows[0]["id"])
    if newest % 100 == 0:
        sql.exec("DELETE FROM router_usage WHERE id <= ?", newest - USAGE_ROWS_KEPT)


def tier_totals(sql: SqlStorage, where: str = "", *params: Any) -> dict[str, wire.TierUsage]:
    """Calls, errors, tokens and cost per tier over the daily rows selected by `where`."""
    rows = sql.exec(f"SELECT tier, {_TOTALS} FROM usage_daily {where} GROUP BY tier ORDER BY tier", *params)
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


def usage_on(sql: SqlStorage, day: str) -> dict[str, wire.TierUsage]:
    """The totals per tier of one UTC day (YYYY-MM-DD)."""
    return tier_totals(sql, "WHERE day = ?", day)


def usage_report(sql: SqlStorage, day: str, recent: int = 20) -> wire.UsageAnswer:
    """All-time totals per tier, the totals of `day`, and the most recent model calls."""
    rows = sql.exec(
        "SELECT ts, tier, model, prompt_tokens, completion_tokens, latency_ms, cost_usd, ok, error "
        "FROM router_usage ORDER BY id DESC LIMIT ?",
        recent,
    )
    for r in rows:
        r["ok"] = bool(r["ok"])
    # The one cast for usage rows: the SELECT above fixes their keys, SQLite their types
    # (`ok`, stored as 0/1, is made a bool just before).
    recent_rows = cast(list[wire.UsageRow], rows)
    return {"tiers": tier_totals(sql), "today": usage_on(sql, day), "recent": recent_rows}
