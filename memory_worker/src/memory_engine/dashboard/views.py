"""The chat-side reads of the dashboard: its people (with their other names) and a message in context.

Handlers of the route table (`api/routes.py`), run on the chat's own memory like every route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from memory_engine.api.route_args import Call, author_filter
from memory_engine.api.validation import integer
from memory_engine.dashboard.wire import AroundAnswer, ContextMessage, PeopleAnswer, Person
from memory_engine.storage import rows_of

if TYPE_CHECKING:
    from memory_engine.api.routes import Ctx

MAX_ID = 2**62
MAX_AROUND = 20
AROUND_DEFAULT = 3
NAMES_WINDOW = 200  # a person's newest messages read for their names (0.4 ms each at 100k messages)
_COLUMNS = "id, role, author, author_id, text, ts, message_id"


class PeopleArgs(TypedDict):
    """Everyone, or one person (`author_id`)."""

    author_id: str | None


class AroundArgs(TypedDict):
    """A message (the memory's id) and how many messages each side of it."""

    message: int
    n: int


def people_args(call: Call) -> PeopleArgs:
    """`GET .../people[?author_id=]`."""
    return {"author_id": author_filter(call)}


def around_args(call: Call) -> AroundArgs:
    """`GET .../messages/{message}/around[?n=]`."""
    return {
        "message": integer(call.params.get("message"), "message", 1, MAX_ID),
        "n": integer(call.query.get("n", AROUND_DEFAULT), "n", 0, MAX_AROUND),
    }


def people(ctx: Ctx, a: PeopleArgs) -> PeopleAnswer:
    """Everyone who wrote in the chat or has a fact in it: names, message count, last seen.

    The counts come from the index of messages by author (no row is read); each person's
    newest name, other names and last message from their newest `NAMES_WINDOW` messages and
    the names their facts were learnt under: a 100,000-message chat is not read whole.
    """
    sql = ctx.memory.sql
    only = a.get("author_id")
    where, params = ("author_id = ?", [only]) if only else ("author_id != ''", [])
    counts = rows_of(
        sql, f"SELECT author_id, COUNT(*) FROM messages WHERE {where} GROUP BY author_id", *params
    )
    with_facts = rows_of(sql, f"SELECT DISTINCT author_id, author FROM facts WHERE {where}", *params)
    found: dict[str, tuple[int, str, list[str]]] = {}
    for author_id, n in counts:
        recent = rows_of(
            sql,
            "SELECT author, ts FROM messages WHERE author_id = ? AND role = 'user' ORDER BY id DESC LIMIT ?",
            author_id,
            NAMES_WINDOW,
        )
        if recent:  # (an imported bot's own messages carry its id: not a person of the chat)
            names = list(dict.fromkeys(name for name, _ in recent if name))
            found[author_id] = (n, recent[0][1], names)
    for author_id, author in with_facts:
        n, last, names = found.setdefault(author_id, (0, "", []))
        if author and author not in names:
            names.append(author)
    out: list[Person] = []
    for author_id, (n, last, names) in found.items():
        names = names or [author_id]
        out.append(
            {
                "author_id": author_id,
                "author": names[0],
                "aliases": names[1:],
                "messages": n,
                "last_seen": last,
            }
        )
    out.sort(key=lambda p: (-p["messages"], p["author"].lower()))
    sources = rows_of(
        sql, f"SELECT id, source_message FROM facts WHERE source_message IS NOT NULL AND {where}", *params
    )
    return {"people": out, "sources": {str(fid): int(mid) for fid, mid in sources}}


def _message(row: tuple[Any, ...]) -> ContextMessage:
    mid, role, author, author_id, text, ts, message_id = row
    return {
        "id": mid,
        "role": role,
        "author": author,
        "author_id": author_id,
        "text": text,
        "ts": ts,
        "message_id": message_id,
    }


def around(ctx: Ctx, a: AroundArgs) -> AroundAnswer:
    """The message `message` (the engine's id) with up to `n` messages before and after it."""
    sql, mid, n = ctx.memory.sql, a["message"], a["n"]
    before = rows_of(
        sql, f"SELECT {_COLUMNS} FROM messages WHERE id <= ? ORDER BY id DESC LIMIT ?", mid, n + 1
    )
    after = rows_of(sql, f"SELECT {_COLUMNS} FROM messages WHERE id > ? ORDER BY id LIMIT ?", mid, n)
    messages = [_message(r) for r in reversed(before)] + [_message(r) for r in after]
    target = mid if before and before[0][0] == mid else 0
    return {"target": target, "messages": messages}
