"""The directory of chats: one row a chat, its people and its model usage per day and tier.

The overview lists every chat; no chat can see another's database, so each chat reports to
one directory after a write (`chat_report`, computed in the chat; `report`, run in the
directory). On Cloudflare the directory is a Durable Object of its own (the chats' class
under the name `DIRECTORY_KEY`, as the reminders' dispatch object is): the overview of a
thousand chats is one call, not a thousand. The local host runs the same routes on its
`directory.db`, beside its chats. Reports carry absolute values, so a repeat or a lost one is
repaired by the chat's next write.

The directory object also keeps the dashboard's login state (`auth_step`): used one-time
links, live sessions, login attempts per client. Every isolate of the Worker sees it alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from memory_engine.api import http_types  # its CHAT_KEY (a pattern checked where it is defined)
from memory_engine.api.route_args import Call
from memory_engine.api.validation import ApiError, integer, plain
from memory_engine.dashboard.wire import (
    AuthAnswer,
    ChatReport,
    DirectoryAnswer,
    DirectoryEntry,
    ReportAnswer,
    UsageDay,
)
from memory_engine.storage import rows_of

if TYPE_CHECKING:
    from memory_engine.api.routes import Ctx
    from memory_engine.engine import ChatMemory

DIRECTORY_KEY = "@directory"  # not a valid chat key: no chat route can reach the directory object
TITLE = "title"  # the chat's state key of its title
MAX_TITLE_CHARS = 200
USAGE_DAYS = 31  # the days of usage a full report carries (the chart's window, this month)
MAX_REPORT_ROWS = 1000
USAGE_FIELDS = frozenset(UsageDay.__required_keys__ | UsageDay.__optional_keys__)
AUTH_ACTIONS = ("attempt", "redeem", "start", "check", "end")
MAX_MS = 2**53


def set_title(memory: ChatMemory, title: str | None) -> None:
    """Keep the chat's title (from the platform or an import) when it is new."""
    if title is None:
        return
    title = " ".join(title.split())[:MAX_TITLE_CHARS]
    if title and memory.state(TITLE) != title:
        memory.set_state(TITLE, title)


def chat_report(memory: ChatMemory, chat_key: str, op: str, args: Mapping[str, Any]) -> ChatReport:
    """What the directory should know of the chat after the operation `op` (with its `args`)."""
    sql = memory.sql
    messages = int(sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"])
    last = rows_of(sql, "SELECT ts FROM messages ORDER BY id DESC LIMIT 1")
    authors: list[str] = []
    if op == "turn" and args.get("author_id"):
        authors = [args["author_id"]]
    elif op == "import":
        seen = {m.get("author_id") for m in args.get("messages", ()) if m.get("role", "user") == "user"}
        authors = sorted(a for a in seen if a)
    report: ChatReport = {
        "chat_key": chat_key,
        "title": memory.state(TITLE) or "",
        "messages": messages,
        "last_ts": last[0][0] if last else "",
        "authors": authors,
        "usage": _usage(memory, op),
    }
    if op == "forget_author":
        report["people"] = None  # recounted from the archive by the directory's caller below
        report["authors"] = [
            a
            for (a,) in rows_of(
                sql, "SELECT DISTINCT author_id FROM messages WHERE role = 'user' AND author_id != ''"
            )
        ]
    return report


def erased_report(chat_key: str) -> ChatReport:
    """The report of a forgotten chat: the directory drops it."""
    return {
        "chat_key": chat_key,
        "title": "",
        "messages": 0,
        "last_ts": "",
        "authors": [],
        "usage": [],
        "erased": True,
    }


def _usage(memory: ChatMemory, op: str) -> list[UsageDay]:
    today = memory.now()[:10]
    if op == "turn":
        return []  # a turn records no model call
    since = today if op == "reply" else (date.fromisoformat(today) - timedelta(days=USAGE_DAYS)).isoformat()
    rows = rows_of(
        memory.sql, "SELECT day, tier, calls, errors, cost_usd FROM usage_daily WHERE day >= ?", since
    )
    return [
        {"day": d, "tier": t, "calls": c, "errors": e, "cost_usd": float(cost)} for d, t, c, e, cost in rows
    ]


# -- the directory object's routes ------------------------------------------------------------


def _strings(value: Any, name: str, check: bool = False) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_REPORT_ROWS:
        raise ApiError(400, f"{name} must be a list of at most {MAX_REPORT_ROWS} strings")
    out = [plain(v, name) for v in value]
    if check and not all(http_types.CHAT_KEY.match(v) for v in out):
        raise ApiError(400, f"{name} must hold chat keys")
    return out


class ReportArgs(TypedDict):
    """A checked ChatReport (`recount`: the authors are the chat's whole set of people)."""

    chat_key: str
    title: str
    messages: int
    last_ts: str
    authors: list[str]
    recount: bool
    usage: list[UsageDay]
    erased: bool


class ListArgs(TypedDict):
    """Which chats (None: all), the chart's first day and the month of the totals (None: now)."""

    chats: list[str] | None
    since: str | None
    month: str | None


class AuthArgs(TypedDict):
    """A checked AuthRequest."""

    action: str
    key: str
    until: int
    now: int
    limit: int


def report_args(call: Call) -> ReportArgs:
    """`POST /v1/directory/report`: a ChatReport."""
    body = call.body()
    chat_key = plain(body.get("chat_key"), "chat_key")
    if not http_types.CHAT_KEY.match(chat_key):
        raise ApiError(400, "chat_key is not a chat key")
    if body.get("people") is not None:  # only its presence is read: the directory counts anew
        integer(body["people"], "people", 0, MAX_MS)
    if type(body.get("erased", False)) is not bool:
        raise ApiError(400, "erased must be true or false")
    usage = body.get("usage", [])
    if not isinstance(usage, list) or len(usage) > MAX_REPORT_ROWS:
        raise ApiError(400, f"usage must be a list of at most {MAX_REPORT_ROWS} days")
    days: list[UsageDay] = []
    for u in usage:
        if not isinstance(u, dict) or not u.keys() <= USAGE_FIELDS:
            raise ApiError(400, f"usage holds objects of {', '.join(sorted(USAGE_FIELDS))}")
        cost = u.get("cost_usd")
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            raise ApiError(400, "cost_usd must be a number")
        days.append(
            {
                "day": plain(u.get("day"), "day")[:10],
                "tier": plain(u.get("tier"), "tier"),
                "calls": integer(u.get("calls"), "calls", 0, MAX_MS),
                "errors": integer(u.get("errors"), "errors", 0, MAX_MS),
                "cost_usd": float(cost),
            }
        )
    return {
        "chat_key": chat_key,
        "title": plain(body.get("title", ""), "title")[:MAX_TITLE_CHARS],
        "messages": integer(body.get("messages", 0), "messages", 0, MAX_MS),
        "last_ts": plain(body.get("last_ts", ""), "last_ts")[:40],
        "authors": _strings(body.get("authors", []), "authors"),
        "recount": "people" in body,
        "usage": days,
        "erased": body.get("erased") is True,
    }


def report(ctx: Ctx, a: ReportArgs) -> ReportAnswer:
    """Take one chat's report (in the directory object)."""
    sql, chat = ctx.memory.sql, a["chat_key"]

    def run() -> None:
        if a["erased"]:
            for table in ("directory_chats", "directory_people", "directory_usage"):
                sql.exec(f"DELETE FROM {table} WHERE chat_key = ?", chat)
            return
        sql.exec(
            "INSERT INTO directory_chats(chat_key, title, messages, last_ts) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(chat_key) DO UPDATE SET title = CASE WHEN excluded.title != '' "
            "THEN excluded.title ELSE title END, messages = excluded.messages, last_ts = excluded.last_ts",
            chat,
            a["title"],
            a["messages"],
            a["last_ts"],
        )
        if a["recount"]:  # the whole set of people: someone was forgotten
            sql.exec("DELETE FROM directory_people WHERE chat_key = ?", chat)
        for author in a["authors"]:
            sql.exec(
                "INSERT OR IGNORE INTO directory_people(chat_key, author_id) VALUES (?, ?)", chat, author
            )
        for u in a["usage"]:
            sql.exec(
                "INSERT INTO directory_usage(chat_key, day, tier, calls, errors, cost_usd) VALUES (?, ?, ?, "
                "?, ?, ?) "
                "ON CONFLICT(chat_key, day, tier) DO UPDATE SET calls = excluded.calls, "
                "errors = excluded.errors, cost_usd = excluded.cost_usd",
                chat,
                u["day"],
                u["tier"],
                u["calls"],
                u["errors"],
                u["cost_usd"],
            )

    sql.transaction(run)
    return {"ok": True}


def list_args(call: Call) -> ListArgs:
    """`POST /v1/directory/list`: `{"chats"?: [...], "since"?: day, "month"?: "YYYY-MM"}`."""
    body = call.body() if call.raw_body else {}
    chats = body.get("chats")
    return {
        "chats": None if chats is None else _strings(chats, "chats", check=True),
        "since": (plain(body["since"], "since")[:10] or None) if body.get("since") is not None else None,
        "month": (plain(body["month"], "month")[:7] or None) if body.get("month") is not None else None,
    }


def platform_of(chat_key: str) -> str:
    """The platform a chat key names (`telegram:-100…` -> telegram)."""
    head, sep, _ = chat_key.partition(":")
    return head if sep else "other"


def listing(ctx: Ctx, a: ListArgs) -> DirectoryAnswer:
    """Every chat (or those named), newest activity first, and the usage per day and tier since `since`."""
    sql = ctx.memory.sql
    today = ctx.memory.now()[:10]
    month = a["month"] or today[:7]
    since = a["since"] or (date.fromisoformat(today) - timedelta(days=29)).isoformat()
    only: list[str] | None = a["chats"]
    where, params = "", []
    if only is not None:
        where = f"WHERE chat_key IN ({', '.join('?' * len(only))})" if only else "WHERE 0"
        params = list(only)
    also = where.replace("WHERE", "AND") if where else ""
    # One pass over each table (grouped), not one subquery per chat: 1,000 chats in a few ms.
    rows = rows_of(
        sql,
        "SELECT c.chat_key, c.title, c.messages, c.last_ts, COALESCE(p.n, 0), COALESCE(u.calls, 0), "
        "COALESCE(u.cost, 0) FROM (SELECT * FROM directory_chats " + where + ") c "
        "LEFT JOIN (SELECT chat_key, COUNT(*) AS n FROM directory_people " + where + " GROUP BY chat_key) p "
        "ON p.chat_key = c.chat_key "
        "LEFT JOIN (SELECT chat_key, SUM(calls) AS calls, SUM(cost_usd) AS cost FROM directory_usage "
        "WHERE day >= ? " + also + " GROUP BY chat_key) u ON u.chat_key = c.chat_key "
        "ORDER BY c.last_ts DESC, c.chat_key",
        *params,
        *params,
        month + "-01",
        *params,
    )
    chats: list[DirectoryEntry] = [
        {
            "chat_key": key,
            "title": title,
            "platform": platform_of(key),
            "messages": messages,
            "people": people,
            "last_ts": last,
            "calls_month": calls,
            "cost_month": float(cost),
        }
        for key, title, messages, last, people, calls, cost in rows
    ]
    uwhere = "" if only is None else f"AND chat_key IN ({', '.join('?' * len(only))})" if only else "AND 0"
    day_rows = rows_of(
        sql,
        "SELECT day, tier, SUM(calls), SUM(errors), SUM(cost_usd) FROM directory_usage "
        f"WHERE day >= ? {uwhere} GROUP BY day, tier ORDER BY day, tier",
        since,
        *(only or []),
    )
    days: list[UsageDay] = [
        {"day": d, "tier": t, "calls": c, "errors": e, "cost_usd": float(cost)}
        for d, t, c, e, cost in day_rows
    ]
    return {"chats": chats, "days": days}


def auth_args(call: Call) -> AuthArgs:
    """`POST /v1/directory/auth`: an AuthRequest."""
    body = call.body()
    action = body.get("action")
    if action not in AUTH_ACTIONS:
        raise ApiError(400, f"action must be one of: {', '.join(AUTH_ACTIONS)}")
    return {
        "action": action,
        "key": plain(body.get("key"), "key", 200),
        "until": integer(body.get("until", 0), "until", 0, MAX_MS),
        "now": integer(body.get("now"), "now", 0, MAX_MS),
        "limit": integer(body.get("limit", 10), "limit", 1, 10_000),
    }


def auth_step(ctx: Ctx, a: AuthArgs) -> AuthAnswer:
    """One step of the login state: see `AuthRequest`."""
    sql, action, key, now, until = ctx.memory.sql, a["action"], a["key"], a["now"], a["until"]

    def run() -> bool:
        sql.exec("DELETE FROM dashboard_auth WHERE until < ?", now)  # expired: nothing to keep
        kind = "session" if action in ("start", "check", "end") else action
        rows = rows_of(sql, "SELECT until, count FROM dashboard_auth WHERE kind = ? AND key = ?", kind, key)
        if action == "attempt":
            count = rows[0][1] + 1 if rows else 1
            sql.exec(
                "INSERT INTO dashboard_auth(kind, key, until, count) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(kind, key) DO UPDATE SET count = excluded.count",
                kind,
                key,
                rows[0][0] if rows else until,
                count,
            )
            return count <= a["limit"]
        if action == "redeem":
            if rows:
                return False
            sql.exec("INSERT INTO dashboard_auth(kind, key, until) VALUES (?, ?, ?)", kind, key, until)
            return True
        if action == "start":
            sql.exec(
                "INSERT INTO dashboard_auth(kind, key, until) VALUES (?, ?, ?) "
                "ON CONFLICT(kind, key) DO UPDATE SET until = excluded.until",
                kind,
                key,
                until,
            )
            return True
        if action == "check":
            return bool(rows) and rows[0][0] > now
        sql.exec("DELETE FROM dashboard_auth WHERE kind = ? AND key = ?", kind, key)
        return True

    return {"ok": sql.transaction(run)}


def reports(op: str) -> bool:
    """True when the operation `op` on a chat changes what the directory shows of it."""
    from memory_engine.api.routes import BY_NAME

    route = BY_NAME.get(op)
    if route is None or not route.on_chat:
        return False
    effects = route.effects
    return not effects.read_only and not effects.summarizes
