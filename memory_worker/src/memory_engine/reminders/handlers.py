"""The reminder and dispatch routes: their checked arguments and their handlers.

The entries themselves are in the route table (`routes.py`); the wire types in
`reminder_wire.py`; what they do in `reminders.py`. The dispatch routes
(`/v1/dispatch/...`) run on the one dispatch object (`reminders.DISPATCH_KEY`), the others
on a chat.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memory_engine import catchup
from memory_engine.api.route_args import Args, Call
from memory_engine.api.validation import ApiError, integer, plain, unquote_strict
from memory_engine.reminders import store as reminders
from memory_engine.reminders import wire as w

if TYPE_CHECKING:
    from memory_engine.api.routes import Ctx

MAX_MS = 2**53  # a JSON number both hosts read exactly
MAX_ID = 2**63 - 1
MAX_EVERY_CHARS = 512
MAX_LEASE_MS = 3_600_000
TZ_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}\Z")  # checked for real by the bot


def _ms(value: Any, name: str) -> int:
    return integer(value, name, 0, MAX_MS)


def _author_query(call: Call) -> str | None:
    author_id = call.query.get("author_id")
    if author_id is not None and not plain(author_id, "author_id"):
        raise ApiError(400, "author_id must not be empty")
    return author_id


def _reminder_id(call: Call) -> int:
    return integer(unquote_strict(call.params["reminder_id"], "reminder id"), "reminder id", 1, MAX_ID)


def _owner(value: Any) -> str:
    owner = plain(value, "owner")
    if not owner:
        raise ApiError(400, "owner must not be empty")
    return owner


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > reminders.MAX_LEASE:
        raise ApiError(400, f"{name} must be a list of at most {reminders.MAX_LEASE}")
    return value


# -- arguments ---------------------------------------------------------------------------------


def add_args(call: Call) -> Args:
    """`POST .../reminders`."""
    body = call.body()
    text = plain(body.get("text"), "text", 4 * reminders.MAX_TEXT).strip()
    if not text or len(text) > reminders.MAX_TEXT:
        raise ApiError(400, f"text must be 1 to {reminders.MAX_TEXT} characters")
    every = body.get("every")
    if every is not None and (not isinstance(every, dict) or len(repr(every)) > MAX_EVERY_CHARS):
        raise ApiError(400, f"every must be an object (at most {MAX_EVERY_CHARS} characters)")
    return {
        "text": text,
        "due_at": _ms(body.get("due_at"), "due_at"),
        "author": plain(body.get("author") or "", "author"),
        "author_id": plain(body.get("author_id") or "", "author_id"),
        "tz": plain(body.get("tz") or "UTC", "tz", 64),
        "every": every,
    }


def list_args(call: Call) -> Args:
    """`GET .../reminders[?author_id=]`."""
    return {"author_id": _author_query(call)}


def get_args(call: Call) -> Args:
    """`GET .../reminders/{reminder_id}`."""
    return {"reminder_id": _reminder_id(call)}


def cancel_args(call: Call) -> Args:
    """`DELETE .../reminders/{reminder_id}[?author_id=]`."""
    return {"reminder_id": _reminder_id(call), "author_id": _author_query(call)}


def delivered_args(call: Call) -> Args:
    """`POST .../delivered`."""
    body = call.body()
    late = body.get("late", False)
    if not isinstance(late, bool):
        raise ApiError(400, "late must be true or false")
    nxt = body.get("next_due_at")
    return {
        "reminder_id": integer(body.get("reminder_id"), "reminder_id", 1, MAX_ID),
        "due_at": _ms(body.get("due_at"), "due_at"),
        "sent_at": _ms(body.get("sent_at"), "sent_at"),
        "late": late,
        "next_due_at": None if nxt is None else _ms(nxt, "next_due_at"),
    }


def timezone_args(call: Call) -> Args:
    """`PUT .../timezone`."""
    body = call.body()
    name = plain(body.get("timezone"), "timezone", 64).strip()
    if not TZ_NAME.match(name):
        raise ApiError(400, "timezone must be an IANA name such as Europe/Lisbon")
    author_id = plain(body.get("author_id"), "author_id")
    if not author_id:
        raise ApiError(400, "author_id must not be empty")
    return {"timezone": name, "author": plain(body.get("author") or "", "author"), "author_id": author_id}


def followups_args(call: Call) -> Args:
    """`PUT .../followups`."""
    body = call.body()
    on = body.get("on")
    if not isinstance(on, bool):
        raise ApiError(400, "on must be true or false")
    author_id = plain(body.get("author_id"), "author_id")
    if not author_id:
        raise ApiError(400, "author_id must not be empty")
    return {"on": on, "author": plain(body.get("author") or "", "author"), "author_id": author_id}


def _item(value: Any, n: int) -> reminders.DispatchItem:
    if not isinstance(value, dict):
        raise ApiError(400, f"items[{n}] must be an object")
    item: reminders.DispatchItem = {
        "key": plain(value.get("key"), "key"),
        "chat_key": plain(value.get("chat_key"), "chat_key"),
        "reminder_id": integer(value.get("reminder_id"), "reminder_id", 1, MAX_ID),
        "due_at": _ms(value.get("due_at"), "due_at"),
        "attempts": 0,
    }
    if item["key"] != reminders.occurrence_key(item["chat_key"], item["reminder_id"], item["due_at"]):
        raise ApiError(400, f"items[{n}].key does not match its chat_key, reminder_id and due_at")
    return item


def offer_args(call: Call) -> Args:
    """`POST /v1/dispatch/offer`."""
    return {"items": [_item(i, n) for n, i in enumerate(_list(call.body().get("items"), "items"))]}


def lease_args(call: Call) -> Args:
    """`POST /v1/dispatch/lease`."""
    body = call.body()
    prefixes = body.get("prefixes") or []
    if not isinstance(prefixes, list) or len(prefixes) > 8:
        raise ApiError(400, "prefixes must be a list of at most 8 strings")
    return {
        "owner": _owner(body.get("owner")),
        "prefixes": [plain(p, "prefixes") for p in prefixes],
        "limit": integer(body.get("limit", 10), "limit", 1, reminders.MAX_LEASE),
        "lease_ms": integer(body.get("lease_ms", 60_000), "lease_ms", 1, MAX_LEASE_MS),
    }


def ack_args(call: Call) -> Args:
    """`POST /v1/dispatch/ack`."""
    return {"keys": [plain(k, "keys") for k in _list(call.body().get("keys"), "keys")]}


def release_args(call: Call) -> Args:
    """`POST /v1/dispatch/release`."""
    body = call.body()
    return {
        "key": plain(body.get("key"), "key"),
        "owner": _owner(body.get("owner")),
        "retry_at": _ms(body.get("retry_at"), "retry_at"),
    }


def catchup_args(call: Call) -> Args:
    """`GET .../catchup?author_id=&limit=`."""
    author_id = plain(call.query.get("author_id") or "", "author_id")
    if not author_id:
        raise ApiError(400, "author_id is required")
    limit = integer(call.query.get("limit", catchup.DEFAULT_LIMIT), "limit", 1, catchup.MAX_LIMIT)
    return {"author_id": author_id, "limit": limit}


# -- handlers ----------------------------------------------------------------------------------


def now_ms(ctx: Ctx) -> int:
    """The engine's clock in milliseconds (an injected clock in tests)."""
    return int(ctx.memory.clock().timestamp() * 1000)


def add(ctx: Ctx, a: Args) -> w.ReminderAnswer:
    """Keep a reminder (400 past the per-chat limit)."""
    try:
        return reminders.add(ctx.memory.sql, ctx.memory.now(), **a)
    except reminders.TooManyReminders as err:
        raise ApiError(400, str(err)) from None


def pending(ctx: Ctx, a: Args) -> w.RemindersAnswer:
    """The pending reminders."""
    return reminders.pending(ctx.memory.sql, a["author_id"])


def get(ctx: Ctx, a: Args) -> w.ReminderAnswer:
    """One reminder (404 when gone)."""
    try:
        return reminders.get(ctx.memory.sql, a["reminder_id"])
    except reminders.ReminderNotFound as err:
        raise ApiError(404, str(err)) from None


def cancel(ctx: Ctx, a: Args) -> w.CancelAnswer:
    """Cancel one (404 none pending, 403 someone else's)."""
    try:
        return reminders.cancel(ctx.memory.sql, a["reminder_id"], a["author_id"])
    except reminders.ReminderNotFound as err:
        raise ApiError(404, str(err)) from None
    except reminders.NotTheirReminder as err:
        raise ApiError(403, str(err)) from None


def delivered(ctx: Ctx, a: Args) -> w.DeliveredAnswer:
    """Record the send of one occurrence (idempotent)."""
    return reminders.delivered(ctx.memory.sql, **a)


def set_timezone(ctx: Ctx, a: Args) -> w.TimezoneAnswer:
    """Keep a person's zone as their fact `timezone`."""
    ctx.memory.learn_fact(a["author"], a["author_id"], "timezone", a["timezone"], source=0)
    return {"timezone": a["timezone"]}


def set_followups(ctx: Ctx, a: Args) -> w.FollowupsAnswer:
    """Keep a person's opt-in to follow-ups in this chat as their fact `followups` (on/off)."""
    ctx.memory.learn_fact(a["author"], a["author_id"], "followups", "on" if a["on"] else "off", source=0)
    return {"on": bool(a["on"])}


def offer(ctx: Ctx, a: Args) -> w.OfferAnswer:
    """Queue due occurrences (the dispatch object)."""
    return reminders.offer(ctx.memory.sql, a["items"], now_ms(ctx))


def lease(ctx: Ctx, a: Args) -> w.LeaseAnswer:
    """Lease ready occurrences (the dispatch object)."""
    return reminders.lease(ctx.memory.sql, now_ms=now_ms(ctx), **a)


def ack(ctx: Ctx, a: Args) -> w.AckAnswer:
    """Mark occurrences done (the dispatch object)."""
    return reminders.ack(ctx.memory.sql, a["keys"], now_ms(ctx))


def release(ctx: Ctx, a: Args) -> w.ReleaseAnswer:
    """Give a lease back (the dispatch object)."""
    return reminders.release(ctx.memory.sql, **a)


def catch_up(ctx: Ctx, a: Args) -> catchup.CatchupAnswer:
    """What was said since the asker's last message."""
    return catchup.catchup(ctx.memory, **a)


def queue_state(ctx: Ctx, a: Args) -> w.QueueState:
    """Counts of the dispatch queue."""
    return reminders.queue_state(ctx.memory.sql)
