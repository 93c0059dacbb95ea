"""The wire types of the reminder and dispatch routes (see `reminders/store.py`, `reminders/handlers.py`)."""

# No `from __future__ import annotations`: Python 3.11 reads NotRequired only from evaluated
# annotations, and the OpenAPI document states which fields are required from them.
from typing import NotRequired, TypedDict


class Every(TypedDict, total=False):
    """How a reminder repeats, as the bot computes it (the engine stores it as it came).

    `at` the local time ("HH:MM"); `weekday` one day (0 is Monday) or `weekdays` several, else
    every day. A follow-up has `followup` (the event asked about) and no recurrence.
    """

    at: str
    weekday: int
    weekdays: list[int]
    followup: str


class Reminder(TypedDict):
    """A reminder (`due_at`, `last_sent_at`: ms UTC; `every`: the recurrence the bot wrote, or null)."""

    id: int
    author: str
    author_id: str
    text: str
    due_at: int
    tz: str
    every: Every | None
    created_at: str
    state: str
    sent_count: int
    last_sent_at: int | None
    last_late: int


class DispatchItem(TypedDict):
    """One due occurrence in the dispatch queue: a pointer into its chat, never the words."""

    key: str
    chat_key: str
    reminder_id: int
    due_at: int
    attempts: NotRequired[int]


class ReminderRequest(TypedDict):
    """A reminder to keep: its words, when (ms UTC), whose, in which zone, how it repeats."""

    text: str
    due_at: int
    author: NotRequired[str | None]
    author_id: NotRequired[str | None]
    tz: NotRequired[str | None]
    every: NotRequired[Every | None]


class ReminderAnswer(TypedDict):
    """One reminder."""

    reminder: Reminder


class RemindersAnswer(TypedDict):
    """The pending reminders, soonest first."""

    reminders: list[Reminder]


class CancelAnswer(TypedDict):
    """The reminder that was cancelled (deleted)."""

    cancelled: Reminder


class DeliveredRequest(TypedDict):
    """The send of one occurrence (`next_due_at`: the next one of a recurring reminder)."""

    reminder_id: int
    due_at: int
    sent_at: int
    late: NotRequired[bool]
    next_due_at: NotRequired[int | None]


class DeliveredAnswer(TypedDict):
    """Whether this call recorded the send (`duplicate`: it was recorded already, or is gone)."""

    recorded: bool
    duplicate: bool


class TimezoneRequest(TypedDict):
    """A person's IANA time zone, kept as their fact `timezone`."""

    timezone: str
    author_id: str
    author: NotRequired[str | None]


class TimezoneAnswer(TypedDict):
    """The zone kept."""

    timezone: str


class FollowupsRequest(TypedDict):
    """A person's opt-in to follow-ups in this chat, kept as their fact `followups` (on/off)."""

    on: bool
    author_id: str
    author: NotRequired[str | None]


class FollowupsAnswer(TypedDict):
    """Whether follow-ups are on for that person in this chat."""

    on: bool


class OfferRequest(TypedDict):
    """Due occurrences handed over by a chat's alarm."""

    items: list[DispatchItem]


class OfferAnswer(TypedDict):
    """How many were new to the queue."""

    queued: int


class LeaseRequest(TypedDict):
    """Who leases (a restarted bot keeps its owner id), which chats, how many, for how long."""

    owner: str
    prefixes: NotRequired[list[str] | None]
    limit: NotRequired[int]
    lease_ms: NotRequired[int]


class LeaseAnswer(TypedDict):
    """The leased occurrences."""

    items: list[DispatchItem]


class AckRequest(TypedDict):
    """Occurrences done (sent and recorded, or found gone)."""

    keys: list[str]


class AckAnswer(TypedDict):
    """How many were newly marked done."""

    acked: int


class ReleaseRequest(TypedDict):
    """A lease given back after a failed send, to be retried from `retry_at` (ms UTC)."""

    key: str
    owner: str
    retry_at: int


class ReleaseAnswer(TypedDict):
    """Whether the lease was this owner's and is given back."""

    released: bool


class CatchupQuery(TypedDict):
    """Whose catch-up, and at most how many messages."""

    author_id: str
    limit: NotRequired[int]


class QueueState(TypedDict):
    """The dispatch queue: occurrences waiting, and done ones still kept (a day)."""

    open: int
    done: int
