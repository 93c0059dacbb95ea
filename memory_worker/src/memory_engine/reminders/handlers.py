"""The reminder and dispatch routes: their checked arguments and their handlers.

The entries themselves are in the route table (`api/routes.py`); the wire types in
`reminders/wire.py`; what they do in `reminders/store.py`. The dispatch routes
(`/v1/dispatch/...`) run on the one dispatch object (`store.DISPATCH_KEY`), the others
on a chat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

from memory_engine import catchup
from memory_engine.api.route_args import AuthorFilter, Call, NoArgs
from memory_engine.api.validation import ApiError, integer, optional, plain, unquote_strict
from memory_engine.reminders import store as reminders
from memory_engine.reminders import wire as w
from memory_engine.reminders.zones import known_zone

if TYPE_CHECKING:
    from memory_engine.api.routes import Ctx

MAX_MS = 2**53  # a JSON number both hosts read exactly
MAX_ID = 2**63 - 1
MAX_EVERY_CHARS = 512
MAX_LEASE_MS = 3_600_000


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


class AddArgs(TypedDict):
    """`store.add`'s arguments."""

    text: str
    due_at: int
    author: str
    author_id: str
    tz: str
    every: w.Every | None


class IdArgs(TypedDict):
    """One reminder by id."""

    reminder_id: int


class CancelArgs(TypedDict):
    """One reminder, and whose it must be (None: anyone's)."""

    reminder_id: int
    author_id: str | None


class DeliveredArgs(TypedDict):
    """`store.delivered`'s arguments."""

    reminder_id: int
    due_at: int
    sent_at: int
    late: bool
    next_due_at: int | None


class PersonFact(TypedDict):
    """A person's time zone kept as their fact."""

    timezone: str
    author: str
    author_id: str


class FollowupsArgs(TypedDict):
    """A person's follow-ups choice kept as their fact."""

    on: bool
    author: str
    author_id: str


class OfferArgs(TypedDict):
    """Occurrences a chat's alarm offers."""

    items: list[w.DispatchItem]


class LeaseArgs(TypedDict):
    """`store.lease`'s arguments (but the clock)."""

    owner: str
    prefixes: list[str]
    limit: int
    lease_ms: int


class AckArgs(TypedDict):
    """Occurrences done."""

    keys: list[str]


class ReleaseArgs(TypedDict):
    """`store.release`'s arguments."""

    key: str
    owner: str
    retry_at: int


class CatchupArgs(TypedDict):
    """`catchup.catchup`'s arguments."""

    author_id: str
    limit: int


_EVERY_FIELDS: dict[str, type] = {"at": str, "weekday": int, "weekdays": list, "followup": str}


def _every(value: object) -> w.Every | None:
    """`every` as `Every` says: the bot computes recurrences, the engine stores and returns them."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(repr(value)) > MAX_EVERY_CHARS:
        raise ApiError(400, f"every must be an object (at most {MAX_EVERY_CHARS} characters)")
    for key, item in value.items():
        kind = _EVERY_FIELDS.get(key)
        if (
            kind is None
            or type(item) is not kind
            or (isinstance(item, list) and any(type(d) is not int for d in item))
        ):
            raise ApiError(400, "every holds at and followup (text), weekday (a number), weekdays (numbers)")
    return cast(w.Every, value)


def add_args(call: Call) -> AddArgs:
    """`POST .../reminders`."""
    body = call.body()
    text = plain(body.get("text"), "text", 4 * reminders.MAX_TEXT).strip()
    if not text or len(text) > reminders.MAX_TEXT:
        raise ApiError(400, f"text must be 1 to {reminders.MAX_TEXT} characters")
    every = _every(body.get("every"))
    return {
        "text": text,
        "due_at": _ms(body.get("due_at"), "due_at"),
        "author": optional(body, "author") or "",
        "author_id": optional(body, "author_id") or "",
        "tz": "UTC" if body.get("tz") is None else plain(body["tz"], "tz", 64),
        "every": every,
    }


def list_args(call: Call) -> AuthorFilter:
    """`GET .../reminders[?author_id=]`."""
    return {"author_id": _author_query(call)}


def get_args(call: Call) -> IdArgs:
    """`GET .../reminders/{reminder_id}`."""
    return {"reminder_id": _reminder_id(call)}


def cancel_args(call: Call) -> CancelArgs:
    """`DELETE .../reminders/{reminder_id}[?author_id=]`."""
    return {"reminder_id": _reminder_id(call), "author_id": _author_query(call)}


def delivered_args(call: Call) -> DeliveredArgs:
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


def timezone_args(call: Call) -> PersonFact:
    """`PUT .../timezone`."""
    body = call.body()
    given = plain(body.get("timezone"), "timezone", 64).strip()
    name = known_zone(given)
    if name is None:  # a folder ("Europe") or a made-up name: the person's /remind would fail
        raise ApiError(400, "timezone must be an IANA zone name that exists, such as Europe/Lisbon")
    author_id = plain(body.get("author_id"), "author_id")
    if not author_id:
        raise ApiError(400, "author_id must not be empty")
    return {"timezone": name, "author": optional(body, "author") or "", "author_id": author_id}


def followups_args(call: Call) -> FollowupsArgs:
    """`PUT .../followups`."""
    body = call.body()
    on = body.get("on")
    if not isinstance(on, bool):
        raise ApiError(400, "on must be true or false")
    author_id = plain(body.get("author_id"), "author_id")
    if not author_id:
        raise ApiError(400, "author_id must not be empty")
    return {"on": on, "author": optional(body, "author") or "", "author_id": author_id}


def _item(value: Any, n: int) -> w.DispatchItem:
    if not isinstance(value, dict):
        raise ApiError(400, f"items[{n}] must be an object")
    item: w.DispatchItem = {
        "key": plain(value.get("key"), "key"),
        "chat_key": plain(value.get("chat_key"), "chat_key"),
        "reminder_id": integer(value.get("reminder_id"), "reminder_id", 1, MAX_ID),
        "due_at": _ms(value.get("due_at"), "due_at"),
        "attempts": 0,
    }
    if item["key"] != reminders.occurrence_key(item["chat_key"], item["reminder_id"], item["due_at"]):
        raise ApiError(400, f"items[{n}].key does not match its chat_key, reminder_id and due_at")
    return item


def offer_args(call: Call) -> OfferArgs:
    """`POST /v1/dispatch/offer`."""
    return {"items": [_item(i, n) for n, i in enumerate(_list(call.body().get("items"), "items"))]}


def lease_args(call: Call) -> LeaseArgs:
    """`POST /v1/dispatch/lease`."""
    body = call.body()
    prefixes = [] if body.get("prefixes") is None else body["prefixes"]
    if not isinstance(prefixes, list) or len(prefixes) > 8:
        raise ApiError(400, "prefixes must be a list of at most 8 strings")
    return {
        "owner": _owner(body.get("owner")),
        "prefixes": [plain(p, "prefixes") for p in prefixes],
        "limit": integer(body.get("limit", 10), "limit", 1, reminders.MAX_LEASE),
        "lease_ms": integer(body.get("lease_ms", 60_000), "lease_ms", 1, MAX_LEASE_MS),
    }


def ack_args(call: Call) -> AckArgs:
    """`POST /v1/dispatch/ack`."""
    return {"keys": [plain(k, "keys") for k in _list(call.body().get("keys"), "keys")]}


def release_args(call: Call) -> ReleaseArgs:
    """`POST /v1/dispatch/release`."""
    body = call.body()
    return {
        "key": plain(body.get("key"), "key"),
        "owner": _owner(body.get("owner")),
        "retry_at": _ms(body.get("retry_at"), "retry_at"),
    }


def catchup_args(call: Call) -> CatchupArgs:
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


def add(ctx: Ctx, a: AddArgs) -> w.ReminderAnswer:
    """Keep a reminder (400 past the chat's or the person's limit)."""
    try:
        return reminders.add(ctx.memory.sql, ctx.memory.now(), **a)
    except reminders.TooManyReminders as err:
        raise ApiError(400, str(err)) from None


def pending(ctx: Ctx, a: AuthorFilter) -> w.RemindersAnswer:
    """The pending reminders."""
    return reminders.pending(ctx.memory.sql, a["author_id"])


def get(ctx: Ctx, a: IdArgs) -> w.ReminderAnswer:
    """One reminder (404 when gone)."""
    try:
        return reminders.get(ctx.memory.sql, a["reminder_id"])
    except reminders.ReminderNotFound as err:
        raise ApiError(404, str(err)) from None


def cancel(ctx: Ctx, a: CancelArgs) -> w.CancelAnswer:
    """Cancel one (404 none pending, 403 someone else's)."""
    try:
        return reminders.cancel(ctx.memory.sql, a["reminder_id"], a["author_id"])
    except reminders.ReminderNotFound as err:
        raise ApiError(404, str(err)) from None
    except reminders.NotTheirReminder as err:
        raise ApiError(403, str(err)) from None


def delivered(ctx: Ctx, a: DeliveredArgs) -> w.DeliveredAnswer:
    """Record the send of one occurrence (idempotent)."""
    return reminders.delivered(ctx.memory.sql, **a)


def set_timezone(ctx: Ctx, a: PersonFact) -> w.TimezoneAnswer:
    """Keep a person's zone as their fact `timezone`."""
    ctx.memory.learn_fact(a["author"], a["author_id"], "timezone", a["timezone"], source=0)
    return {"timezone": a["timezone"]}


def set_followups(ctx: Ctx, a: FollowupsArgs) -> w.FollowupsAnswer:
    """Keep a person's opt-in to follow-ups in this chat as their fact `followups` (on/off)."""
    ctx.memory.learn_fact(a["author"], a["author_id"], "followups", "on" if a["on"] else "off", source=0)
    return {"on": bool(a["on"])}


def offer(ctx: Ctx, a: OfferArgs) -> w.OfferAnswer:
    """Queue due occurrences (the dispatch object)."""
    return reminders.offer(ctx.memory.sql, a["items"], now_ms(ctx))


def lease(ctx: Ctx, a: LeaseArgs) -> w.LeaseAnswer:
    """Lease ready occurrences (the dispatch object)."""
    return reminders.lease(ctx.memory.sql, now_ms=now_ms(ctx), **a)


def ack(ctx: Ctx, a: AckArgs) -> w.AckAnswer:
    """Mark occurrences done (the dispatch object)."""
    return reminders.ack(ctx.memory.sql, a["keys"], now_ms(ctx))


def release(ctx: Ctx, a: ReleaseArgs) -> w.ReleaseAnswer:
    """Give a lease back (the dispatch object)."""
    return reminders.release(ctx.memory.sql, **a)


def catch_up(ctx: Ctx, a: CatchupArgs) -> catchup.CatchupAnswer:
    """What was said since the asker's last message."""
    return catchup.catchup(ctx.memory, **a)


def queue_state(ctx: Ctx, a: NoArgs) -> w.QueueState:
    """Counts of the dispatch queue."""
    return reminders.queue_state(ctx.memory.sql)
