"""The reminder routes of the API v1: parsing and running them (see `reminders.py`).

On a chat (`/v1/chats/{chat}/...`):

- `POST .../reminders` `{"text", "due_at" (ms UTC), "author"?, "author_id"?, "tz"?, "every"?}`:
  `{"reminder"}`
- `GET .../reminders[?author_id=]`: `{"reminders": [...]}`, pending, soonest first
- `GET .../reminders/{id}`: `{"reminder"}` (404: gone)
- `DELETE .../reminders/{id}[?author_id=]` (403 when not theirs): `{"cancelled"}`
- `PUT .../timezone` `{"timezone", "author_id", "author"?}`: kept as the person's fact `timezone`
- `POST .../delivered` `{"reminder_id", "due_at", "sent_at", "late"?, "next_due_at"?}`:
  `{"recorded", "duplicate"}`

On the dispatch object (`/v1/dispatch/...`, all POST): `offer {"items"}`, `lease {"owner",
"prefixes", "limit"?, "lease_ms"?}`, `ack {"keys"}`, `release {"key", "owner", "retry_at"}`,
`state {}`.
"""

from __future__ import annotations

import re
from typing import Any

from . import reminders
from .engine import ChatMemory
from .http_api import ApiError, Operation, Request, Response, _int, _json_body, _plain, _query

CHAT_OPS = ("add_reminder", "reminders", "reminder", "cancel_reminder", "reminder_delivered", "set_timezone")
DISPATCH_OPS = ("dispatch_offer", "dispatch_lease", "dispatch_ack", "dispatch_release", "dispatch_state")
OPS = frozenset(CHAT_OPS + DISPATCH_OPS)
SUFFIXES = ("reminders", "delivered", "timezone")  # what after /v1/chats/{chat}/ is ours
MAX_MS = 2**53  # a JSON number both hosts read exactly
MAX_EVERY_CHARS = 512
MAX_LEASE_MS = 3_600_000
TZ_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}\Z")  # checked for real by the bot


def _ms(value: Any, name: str) -> int:
    return _int(value, name, 0, MAX_MS)


def _author_query(query: dict[str, str]) -> str | None:
    author_id = query.get("author_id")
    if author_id is not None and not _plain(author_id, "author_id"):
        raise ApiError(400, "author_id must not be empty")
    return author_id


def parse_chat(method: str, chat_key: str, rest: list[str], req: Request) -> Operation:
    """A reminder route on a chat (rest: the path after the chat key); raises ApiError."""
    allowed = {"reminders": ("GET", "POST"), "delivered": ("POST",), "timezone": ("PUT",)}[rest[0]]
    if len(rest) == 2 and rest[0] == "reminders":
        allowed = ("GET", "DELETE")
    elif len(rest) != 1:
        raise ApiError(404, "unknown route")
    if method not in allowed:
        raise ApiError(405, f"method not allowed: use {', '.join(allowed)}")
    query = _query(req.query)
    if len(rest) == 2:
        args: dict[str, Any] = {"reminder_id": _int(rest[1], "reminder id", 1, 2**63 - 1)}
        if method == "DELETE":
            args["author_id"] = _author_query(query)
        return Operation("reminder" if method == "GET" else "cancel_reminder", chat_key, args)
    if rest[0] == "timezone":
        body = _json_body(req)
        name = _plain(body.get("timezone"), "timezone", 64).strip()
        if not TZ_NAME.match(name):
            raise ApiError(400, "timezone must be an IANA name such as Europe/Lisbon")
        author_id = _plain(body.get("author_id"), "author_id")
        if not author_id:
            raise ApiError(400, "author_id must not be empty")
        author = _plain(body.get("author") or "", "author")
        args = {"timezone": name, "author": author, "author_id": author_id}
        return Operation("set_timezone", chat_key, args)
    if rest[0] == "delivered":
        body = _json_body(req)
        late = body.get("late", False)
        if not isinstance(late, bool):
            raise ApiError(400, "late must be true or false")
        nxt = body.get("next_due_at")
        return Operation(
            "reminder_delivered",
            chat_key,
            {
                "reminder_id": _int(body.get("reminder_id"), "reminder_id", 1, 2**63 - 1),
                "due_at": _ms(body.get("due_at"), "due_at"),
                "sent_at": _ms(body.get("sent_at"), "sent_at"),
                "late": late,
                "next_due_at": None if nxt is None else _ms(nxt, "next_due_at"),
            },
        )
    if method == "GET":
        return Operation("reminders", chat_key, {"author_id": _author_query(query)})
    return Operation("add_reminder", chat_key, _add_args(_json_body(req)))


def _add_args(body: dict[str, Any]) -> dict[str, Any]:
    text = _plain(body.get("text"), "text", 4 * reminders.MAX_TEXT).strip()
    if not text or len(text) > reminders.MAX_TEXT:
        raise ApiError(400, f"text must be 1 to {reminders.MAX_TEXT} characters")
    every = body.get("every")
    if every is not None and (not isinstance(every, dict) or len(repr(every)) > MAX_EVERY_CHARS):
        raise ApiError(400, f"every must be an object (at most {MAX_EVERY_CHARS} characters)")
    return {
        "text": text,
        "due_at": _ms(body.get("due_at"), "due_at"),
        "author": _plain(body.get("author") or "", "author"),
        "author_id": _plain(body.get("author_id") or "", "author_id"),
        "tz": _plain(body.get("tz") or "UTC", "tz", 64),
        "every": every,
    }


def parse_dispatch(method: str, parts: list[str], req: Request) -> Operation:
    """A route of the dispatch object (`/v1/dispatch/{action}`); raises ApiError."""
    if len(parts) != 4 or f"dispatch_{parts[3]}" not in DISPATCH_OPS:
        raise ApiError(404, "unknown route")
    if method != "POST":
        raise ApiError(405, "method not allowed: use POST")
    name = f"dispatch_{parts[3]}"
    body = _json_body(req)
    args: dict[str, Any] = {}
    if name == "dispatch_offer":
        items = body.get("items")
        if not isinstance(items, list) or len(items) > reminders.MAX_LEASE:
            raise ApiError(400, f"items must be a list of at most {reminders.MAX_LEASE}")
        args["items"] = [_item(i, n) for n, i in enumerate(items)]
    elif name == "dispatch_lease":
        prefixes = body.get("prefixes") or []
        if not isinstance(prefixes, list) or len(prefixes) > 8:
            raise ApiError(400, "prefixes must be a list of at most 8 strings")
        args = {
            "owner": _owner(body.get("owner")),
            "prefixes": [_plain(p, "prefixes") for p in prefixes],
            "limit": _int(body.get("limit", 10), "limit", 1, reminders.MAX_LEASE),
            "lease_ms": _int(body.get("lease_ms", 60_000), "lease_ms", 1, MAX_LEASE_MS),
        }
    elif name == "dispatch_ack":
        keys = body.get("keys")
        if not isinstance(keys, list) or len(keys) > reminders.MAX_LEASE:
            raise ApiError(400, f"keys must be a list of at most {reminders.MAX_LEASE}")
        args["keys"] = [_plain(k, "keys") for k in keys]
    elif name == "dispatch_release":
        args = {
            "key": _plain(body.get("key"), "key"),
            "owner": _owner(body.get("owner")),
            "retry_at": _ms(body.get("retry_at"), "retry_at"),
        }
    return Operation(name, reminders.DISPATCH_KEY, args)


def _owner(value: Any) -> str:
    owner = _plain(value, "owner")
    if not owner:
        raise ApiError(400, "owner must not be empty")
    return owner


def _item(value: Any, n: int) -> reminders.DispatchItem:
    if not isinstance(value, dict):
        raise ApiError(400, f"items[{n}] must be an object")
    item: reminders.DispatchItem = {
        "key": _plain(value.get("key"), "key"),
        "chat_key": _plain(value.get("chat_key"), "chat_key"),
        "reminder_id": _int(value.get("reminder_id"), "reminder_id", 1, 2**63 - 1),
        "due_at": _ms(value.get("due_at"), "due_at"),
        "attempts": 0,
    }
    if item["key"] != reminders.occurrence_key(item["chat_key"], item["reminder_id"], item["due_at"]):
        raise ApiError(400, f"items[{n}].key does not match its chat_key, reminder_id and due_at")
    return item


def now_ms(memory: ChatMemory) -> int:
    """The engine's clock in milliseconds (an injected clock in tests)."""
    return int(memory.clock().timestamp() * 1000)


def execute(op: Operation, m: ChatMemory) -> Response:
    """Run a reminder or dispatch operation."""
    a, sql = op.args, m.sql
    try:
        if op.name == "add_reminder":
            return Response(200, reminders.add(sql, m.now(), **a))
        if op.name == "reminders":
            return Response(200, reminders.pending(sql, a["author_id"]))
        if op.name == "reminder":
            return Response(200, reminders.get(sql, a["reminder_id"]))
        if op.name == "cancel_reminder":
            return Response(200, reminders.cancel(sql, a["reminder_id"], a["author_id"]))
        if op.name == "set_timezone":
            m.learn_fact(a["author"], a["author_id"], "timezone", a["timezone"], source=0)
            return Response(200, {"timezone": a["timezone"]})
        if op.name == "reminder_delivered":
            return Response(200, reminders.delivered(sql, **a))
        if op.name == "dispatch_offer":
            return Response(200, reminders.offer(sql, a["items"], now_ms(m)))
        if op.name == "dispatch_lease":
            return Response(200, reminders.lease(sql, now_ms=now_ms(m), **a))
        if op.name == "dispatch_ack":
            return Response(200, reminders.ack(sql, a["keys"], now_ms(m)))
        if op.name == "dispatch_release":
            return Response(200, reminders.release(sql, **a))
        return Response(200, reminders.queue_state(sql))
    except reminders.ReminderNotFound as err:
        return Response(404, {"error": str(err)})
    except reminders.NotTheirReminder as err:
        return Response(403, {"error": str(err)})
    except reminders.TooManyReminders as err:
        return Response(400, {"error": str(err)})
