"""The memory API v1, one entry per route: the only place a route is stated.

Each `Route` names its method and path, its operation, its effects on the chat (`Kind`),
its request body and query types and its answer type (TypedDicts of `wire.py`), the
function that checks its arguments (`route_args.py`: a TypedDict per route) and the handler
that runs it; `route` checks that the handler takes those arguments and returns the answer.
From this table `http.parse` routes and checks a request, `http.execute` runs it, the hosts
read each operation's effects (`Kind`, also through `operations.py`), `openapi.py` writes
the OpenAPI document, and the bot's client (`bot/chat/memory/client.py`) builds its calls.

A new route is one entry here and one handler (plus its wire types and, when it takes
arguments, one function in `route_args.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memory_engine import catchup, notes, user_data
from memory_engine.api import route_args, wire
from memory_engine.api.http_types import VERSION
from memory_engine.api.route_args import (
    Call,
    ExportArgs,
    ForgetFactArgs,
    ImportArgs,
    NoArgs,
    NoteArgs,
)
from memory_engine.api.validation import ApiError
from memory_engine.chat_state import start_topic, topic_start
from memory_engine.dashboard import directory, views
from memory_engine.dashboard import wire as dash_wire
from memory_engine.reminders import handlers as reminders_api
from memory_engine.reminders import store as reminders
from memory_engine.reminders import wire as reminder_wire

if TYPE_CHECKING:  # the bot reads this table: it must not load the engine to do so
    from memory_engine.compaction.compact import Summarize
    from memory_engine.engine import ChatMemory

B = TypeVar("B")  # the request body's type
R = TypeVar("R")  # the answer's type
A = TypeVar("A", bound=Mapping[str, object])  # the checked arguments (a TypedDict of route_args.py)

MAX_COMPACT_BATCHES = 20


@dataclass(frozen=True)
class Kind:
    """The effects of one operation on its chat."""

    read_only: bool = False  # changes nothing: a chat with no database answers as an empty one
    grows: bool = False  # may leave the un-summarized history past the threshold: check for compaction
    forgets: bool = False  # removes what someone asked to forget: nothing of it may stay in the files
    erases_chat: bool = False  # removes the whole chat: its storage can be dropped entirely
    summarizes: bool = False  # waits on the summarizer: must not hold up the chat's other calls
    sets_alarm: bool = False  # may move the chat's alarm earlier (a reminder write): the host sets it again
    continues_import: bool = False  # an import's batch: runs on what the import holds, not settled first
    defers_index: bool = False  # leaves its rows to index with a later batch: indexed once the import is idle


READ = Kind(read_only=True)
WRITE = Kind()


@dataclass(frozen=True)
class Ctx:
    """What a handler runs on: the chat's memory, its key, the summarizer (None: offline)."""

    memory: ChatMemory
    chat_key: str
    summarize: Summarize | None = None


@dataclass(frozen=True)
class Route(Generic[B, R]):
    """One route of the API: how it is called, what it does, what it answers."""

    name: str  # the operation's name (logs, effects, the client's calls)
    method: str
    path: str  # "/v1/chats/{chat}/..."; other {names} are path parameters
    summary: str  # one line for the API reference
    answer: type[R]
    # Runs on the chat's memory with what `args` returns (the two are checked together by `route`).
    run: Callable[[Ctx, Any], R | Awaitable[R]] | None = None
    effects: Kind = WRITE
    body: type[B] | None = None
    query: type | None = None
    args: Callable[[Call], Mapping[str, object]] = route_args.no_args
    # Statuses that answer about the request itself, beyond the common refusals (400, 401,
    # 404 unknown route, 405, 413), each with what it means.
    errors: tuple[tuple[int, str], ...] = ()
    auth: bool = True
    static: Callable[[], R] | None = None  # a route without a chat: its answer
    on_object: str | None = None  # not on a chat: the name of the one object it runs on
    # The effects of one call when its arguments change them (an import batch with `more`).
    effects_of: Callable[[Any], Kind] | None = None

    @property
    def segments(self) -> tuple[str, ...]:
        """The path split at "/" (the first is "")."""
        return tuple(self.path.split("/"))

    @property
    def on_chat(self) -> bool:
        """True for a call on one chat (the path starts with /v1/chats/{chat})."""
        return self.path.startswith("/v1/chats/{chat}")


def route(
    *,
    name: str,
    method: str,
    path: str,
    summary: str,
    answer: type[R],
    run: Callable[[Ctx, A], R | Awaitable[R]] | None = None,
    args: Callable[[Call], A] = route_args.no_args,  # type: ignore[assignment]  # A is NoArgs then
    effects: Kind = WRITE,
    effects_of: Callable[[A], Kind] | None = None,
    body: type[B] | None = None,
    query: type | None = None,
    errors: tuple[tuple[int, str], ...] = (),
    auth: bool = True,
    static: Callable[[], R] | None = None,
    on_object: str | None = None,
) -> Route[B, R]:
    """One route, its handler checked against its arguments' type and its answer's."""
    return Route(
        name=name, method=method, path=path, summary=summary, answer=answer, run=run, effects=effects,
        body=body, query=query, args=args, errors=errors, auth=auth, static=static, on_object=on_object,
        effects_of=effects_of,
    )  # fmt: skip


def _health() -> wire.Health:
    return {"ok": True, "version": VERSION}


def _openapi() -> dict[str, object]:
    from memory_engine.api.openapi import document  # generated from this table: imported when asked for

    return document()


async def _compact(ctx: Ctx, args: NoArgs) -> wire.CompactAnswer:
    from memory_engine.compaction.compact import SummarizerError, compact_once, offline_summarize

    m, committed = ctx.memory, 0
    try:
        for _ in range(MAX_COMPACT_BATCHES):
            if not await compact_once(m, ctx.summarize or offline_summarize, force=True):
                break
            committed += 1
    except SummarizerError as err:
        if not committed:
            raise ApiError(502, f"summarizer failed, nothing changed: {err}") from None
        return {**m.summary(), "compacted": committed, "error": str(err)}
    return {**m.summary(), "compacted": committed}


def _export(ctx: Ctx, a: ExportArgs) -> wire.ExportPage:
    m = ctx.memory
    page = user_data.export_page(
        m.sql, ctx.chat_key, now=m.now(), settings=m.settings, summary=m.summary, usage=m.usage, **a
    )
    return page


def _forget_fact(ctx: Ctx, a: ForgetFactArgs) -> wire.ForgetFactAnswer:
    try:
        return notes.forget_fact(ctx.memory.sql, now=ctx.memory.now(), **a)
    except notes.FactNotFound as err:
        raise ApiError(404, str(err)) from None
    except notes.NotTheirFact as err:
        raise ApiError(403, str(err)) from None


def _add_note(ctx: Ctx, a: NoteArgs) -> wire.NoteAnswer:
    try:
        return notes.add_note(ctx.memory.sql, now=ctx.memory.now(), **a)
    except notes.NoteLimitError as err:
        raise ApiError(400, str(err)) from None


def _notes(ctx: Ctx, a: NoArgs) -> wire.NotesAnswer:
    return {"notes": notes.current_notes(ctx.memory.sql)}


def _topic(ctx: Ctx, a: NoArgs) -> wire.TopicAnswer:
    after_id, started_at = topic_start(ctx.memory.sql)
    return {"topic_started_at": started_at, "after_id": after_id}


def _start_topic(ctx: Ctx, a: NoArgs) -> wire.TopicAnswer:
    return start_topic(ctx.memory.sql, ctx.memory.now())


def _turn(ctx: Ctx, a: route_args.TurnArgs) -> wire.TurnAnswer:
    directory.set_title(ctx.memory, a["title"])  # the chat's name on its platform, for the dashboard
    return ctx.memory.turn(
        text=a["text"],
        author=a["author"],
        author_id=a["author_id"],
        message_id=a["message_id"],
        mode=a["mode"],
    )


def _import(ctx: Ctx, a: ImportArgs) -> wire.ImportAnswer:
    from memory_engine.imports.bulk import ImportForgotten, check_batch, end_run

    directory.set_title(ctx.memory, a["title"])  # the exported chat's name, for the dashboard
    run, batch = a["import_id"], a["batch"]
    if run is not None and batch is not None:
        try:
            check_batch(ctx.memory, run, batch)
        except ImportForgotten as err:
            raise ApiError(409, str(err)) from None
    answer = ctx.memory.import_messages(a["messages"], a["more"], a["remaining"])
    if run is not None and not a["more"]:
        end_run(ctx.memory, run)
    return answer


def _import_effects(a: ImportArgs) -> Kind:
    return IMPORT_MORE if a["more"] else IMPORT_LAST


IMPORT_LAST = Kind(grows=True, continues_import=True)
IMPORT_MORE = Kind(grows=True, continues_import=True, defers_index=True)
REMINDER_WRITE = Kind(sets_alarm=True)


CHATS = "/v1/chats/{chat}"

# fmt: off
HEALTH: Route[None, wire.Health] = route(
    name="health", method="GET", path="/health", summary="Liveness (no token needed; HEAD too).",
    answer=wire.Health, static=_health, auth=False,
)
OPENAPI: Route[None, dict[str, object]] = route(
    name="openapi", method="GET", path="/openapi.json", summary="This API as an OpenAPI 3.1 document.",
    answer=dict, static=_openapi,
)
TURN: Route[wire.TurnRequest, wire.TurnAnswer] = route(
    name="turn", method="POST", path=CHATS + "/turn",
    summary="Record a user message (a repeated message_id is stored once); its memory prompt.",
    answer=wire.TurnAnswer, run=_turn,
    effects=Kind(grows=True), body=wire.TurnRequest, args=route_args.turn,
)
REPLY: Route[wire.ReplyRequest, wire.ReplyAnswer] = route(
    name="reply", method="POST", path=CHATS + "/reply",
    summary="Record one model attempt: the assistant message when ok, one routerUsage row.",
    answer=wire.ReplyAnswer, run=lambda c, a: c.memory.reply(**a),
    effects=Kind(grows=True), body=wire.ReplyRequest, args=route_args.reply,
)
SEARCH: Route[None, wire.SearchAnswer] = route(
    name="search", method="GET", path=CHATS + "/search",
    summary="Retrieve older messages as a turn does, recording nothing.",
    answer=wire.SearchAnswer, run=lambda c, a: c.memory.search(a["query"], a["k"]),
    effects=READ, query=wire.SearchQuery, args=route_args.search,
)
FACTS: Route[None, wire.FactsAnswer] = route(
    name="facts", method="GET", path=CHATS + "/facts",
    summary="Current facts and notes (superseded ones too with history=1).",
    answer=wire.FactsAnswer, run=lambda c, a: c.memory.facts(**a),
    effects=READ, query=wire.FactsQuery, args=route_args.facts,
)
SUMMARY: Route[None, wire.SummaryAnswer] = route(
    name="summary", method="GET", path=CHATS + "/summary",
    summary="The rolling summary and its compaction state.",
    answer=wire.SummaryAnswer, run=lambda c, a: c.memory.summary(), effects=READ,
)
USAGE: Route[None, wire.UsageAnswer] = route(
    name="usage", method="GET", path=CHATS + "/usage",
    summary="routerUsage totals per tier, today's, the recent calls (and one person's day).",
    answer=wire.UsageAnswer, run=lambda c, a: c.memory.usage(**a),
    effects=READ, query=wire.AuthorQuery, args=route_args.usage,
)
STATS: Route[None, wire.StatsAnswer] = route(
    name="stats", method="GET", path=CHATS + "/stats",
    summary="Message and fact counts, the mode, the last prompt.",
    answer=wire.StatsAnswer, run=lambda c, a: c.memory.stats(), effects=READ,
)
SETTINGS: Route[None, wire.SettingsAnswer] = route(
    name="settings", method="GET", path=CHATS + "/settings", summary="The chat's settings: mode and persona.",
    answer=wire.SettingsAnswer, run=lambda c, a: c.memory.settings(), effects=READ,
)
UPDATE_SETTINGS: Route[wire.SettingsRequest, wire.SettingsAnswer] = route(
    name="update_settings", method="PUT", path=CHATS + "/settings",
    summary="Change the mode and/or the persona; the settings.",
    answer=wire.SettingsAnswer, run=lambda c, a: c.memory.update_settings(**a),
    body=wire.SettingsRequest, args=route_args.settings,
)
COMPACT: Route[None, wire.CompactAnswer] = route(
    name="compact", method="POST", path=CHATS + "/compact",
    summary="Compact now (502 and no change when the summarizer fails).",
    answer=wire.CompactAnswer, run=_compact, effects=Kind(summarizes=True),
    errors=((502, "The summarizer failed; nothing changed."),),
)
IMPORT: Route[wire.ImportRequest, wire.ImportAnswer] = route(
    name="import", method="POST", path=CHATS + "/import",
    summary="Bulk history import, idempotent by message_id; keeps each ts.",
    answer=wire.ImportAnswer, effects=IMPORT_LAST, effects_of=_import_effects,
    run=_import, body=wire.ImportRequest, args=route_args.import_messages,
    errors=((409, "The chat (or someone in it) was forgotten since the import's first batch "
             "(`import_id`): the batch was not stored, the import stops."),),
)
EXPORT: Route[None, wire.ExportPage] = route(
    name="export", method="GET", path=CHATS + "/export",
    summary="One page of everything the chat (or one person) has in memory.",
    answer=wire.ExportPage, run=_export, effects=READ, query=wire.ExportQuery, args=route_args.export,
)
NOTES: Route[None, wire.NotesAnswer] = route(
    name="notes", method="GET", path=CHATS + "/notes", summary="The chat's current notes, oldest first.",
    answer=wire.NotesAnswer, run=_notes, effects=READ,
)
ADD_NOTE: Route[wire.NoteRequest, wire.NoteAnswer] = route(
    name="add_note", method="POST", path=CHATS + "/notes", summary="Keep a note in every prompt of the chat.",
    answer=wire.NoteAnswer, run=_add_note, body=wire.NoteRequest, args=route_args.add_note,
)
TOPIC: Route[None, wire.TopicAnswer] = route(
    name="topic", method="GET", path=CHATS + "/topic",
    summary="Where the current topic starts (after_id 0 and null: no /new yet).",
    answer=wire.TopicAnswer, run=_topic, effects=READ,
)
START_TOPIC: Route[None, wire.TopicAnswer] = route(
    name="start_topic", method="POST", path=CHATS + "/topic",
    summary="Start a new topic: recent messages begin after the newest one.",
    answer=wire.TopicAnswer, run=_start_topic,
)
FORGET_FACT: Route[None, wire.ForgetFactAnswer] = route(
    name="forget_fact", method="DELETE", path=CHATS + "/facts/{fact_id}",
    summary="Supersede one fact or note by id (kept in the history: not a forgetting).",
    answer=wire.ForgetFactAnswer, run=_forget_fact, query=wire.AuthorQuery, args=route_args.forget_fact,
    errors=((403, "The fact is someone else's (author_id given)."), (404, "No current fact with that id.")),
)
FORGET_AUTHOR: Route[None, wire.ForgetAuthorAnswer] = route(
    name="forget_author", method="DELETE", path=CHATS + "/authors/{author_id}",
    summary="Forget one person: their messages, the replies to them, their facts.",
    answer=wire.ForgetAuthorAnswer, run=lambda c, a: c.memory.forget_author(**a),
    # Forgetting someone resets the summary mark: all that remains is un-summarized again.
    effects=Kind(grows=True, forgets=True), args=route_args.forget_author,
)
FORGET_CHAT: Route[None, wire.ForgetChatAnswer] = route(
    name="forget_chat", method="DELETE", path=CHATS, summary="Forget the whole chat.",
    answer=wire.ForgetChatAnswer, run=lambda c, a: c.memory.forget_chat(),
    effects=Kind(forgets=True, erases_chat=True),
)

ADD_REMINDER: Route[reminder_wire.ReminderRequest, reminder_wire.ReminderAnswer] = route(
    name="add_reminder", method="POST", path=CHATS + "/reminders",
    summary="Keep a reminder (due_at in ms UTC; every: its recurrence, computed by the bot).",
    answer=reminder_wire.ReminderAnswer, run=reminders_api.add, effects=REMINDER_WRITE,
    body=reminder_wire.ReminderRequest, args=reminders_api.add_args,
)
REMINDERS: Route[None, reminder_wire.RemindersAnswer] = route(
    name="reminders", method="GET", path=CHATS + "/reminders",
    summary="The chat's pending reminders, soonest first (one person's with author_id).",
    answer=reminder_wire.RemindersAnswer, run=reminders_api.pending, effects=READ,
    query=wire.AuthorQuery, args=reminders_api.list_args,
)
REMINDER: Route[None, reminder_wire.ReminderAnswer] = route(
    name="reminder", method="GET", path=CHATS + "/reminders/{reminder_id}",
    summary="One reminder, whatever its state.", answer=reminder_wire.ReminderAnswer,
    run=reminders_api.get, effects=READ, args=reminders_api.get_args,
    errors=((404, "No such reminder (cancelled or forgotten)."),),
)
CANCEL_REMINDER: Route[None, reminder_wire.CancelAnswer] = route(
    name="cancel_reminder", method="DELETE", path=CHATS + "/reminders/{reminder_id}",
    summary="Cancel (delete) a pending reminder; only author_id's when given.",
    answer=reminder_wire.CancelAnswer, run=reminders_api.cancel,
    query=wire.AuthorQuery, args=reminders_api.cancel_args,
    errors=((403, "The reminder is someone else's (author_id given)."), (404, "No such pending reminder.")),
)
REMINDER_DELIVERED: Route[reminder_wire.DeliveredRequest, reminder_wire.DeliveredAnswer] = route(
    name="reminder_delivered", method="POST", path=CHATS + "/delivered",
    summary="Record the send of one occurrence (once); a recurring reminder moves to next_due_at.",
    answer=reminder_wire.DeliveredAnswer, run=reminders_api.delivered, effects=REMINDER_WRITE,
    body=reminder_wire.DeliveredRequest, args=reminders_api.delivered_args,
)
SET_TIMEZONE: Route[reminder_wire.TimezoneRequest, reminder_wire.TimezoneAnswer] = route(
    name="set_timezone", method="PUT", path=CHATS + "/timezone",
    summary="Keep a person's time zone as their fact `timezone`.",
    answer=reminder_wire.TimezoneAnswer, run=reminders_api.set_timezone,
    body=reminder_wire.TimezoneRequest, args=reminders_api.timezone_args,
)
SET_FOLLOWUPS: Route[reminder_wire.FollowupsRequest, reminder_wire.FollowupsAnswer] = route(
    name="set_followups", method="PUT", path=CHATS + "/followups",
    summary="Keep a person's opt-in to follow-ups in this chat as their fact `followups` (on/off).",
    answer=reminder_wire.FollowupsAnswer, run=reminders_api.set_followups,
    body=reminder_wire.FollowupsRequest, args=reminders_api.followups_args,
)
DISPATCH = "/v1/dispatch"
DISPATCH_OFFER: Route[reminder_wire.OfferRequest, reminder_wire.OfferAnswer] = route(
    name="dispatch_offer", method="POST", path=DISPATCH + "/offer",
    summary="Queue due reminder occurrences (a chat's alarm; idempotent by key).",
    answer=reminder_wire.OfferAnswer, run=reminders_api.offer, body=reminder_wire.OfferRequest,
    args=reminders_api.offer_args, on_object=reminders.DISPATCH_KEY,
)
DISPATCH_LEASE: Route[reminder_wire.LeaseRequest, reminder_wire.LeaseAnswer] = route(
    name="dispatch_lease", method="POST", path=DISPATCH + "/lease",
    summary="Lease due occurrences of some chats (the bot; its own live leases come back to it).",
    answer=reminder_wire.LeaseAnswer, run=reminders_api.lease, body=reminder_wire.LeaseRequest,
    args=reminders_api.lease_args, on_object=reminders.DISPATCH_KEY,
)
DISPATCH_ACK: Route[reminder_wire.AckRequest, reminder_wire.AckAnswer] = route(
    name="dispatch_ack", method="POST", path=DISPATCH + "/ack",
    summary="Mark occurrences done (sent and recorded, or gone).",
    answer=reminder_wire.AckAnswer, run=reminders_api.ack, body=reminder_wire.AckRequest,
    args=reminders_api.ack_args, on_object=reminders.DISPATCH_KEY,
)
DISPATCH_RELEASE: Route[reminder_wire.ReleaseRequest, reminder_wire.ReleaseAnswer] = route(
    name="dispatch_release", method="POST", path=DISPATCH + "/release",
    summary="Give a lease back after a failed send: retried from retry_at.",
    answer=reminder_wire.ReleaseAnswer, run=reminders_api.release, body=reminder_wire.ReleaseRequest,
    args=reminders_api.release_args, on_object=reminders.DISPATCH_KEY,
)
DISPATCH_STATE: Route[None, reminder_wire.QueueState] = route(
    name="dispatch_state", method="POST", path=DISPATCH + "/state",
    summary="Counts of the dispatch queue (open, done).", answer=reminder_wire.QueueState,
    run=reminders_api.queue_state, effects=READ, on_object=reminders.DISPATCH_KEY,
)
CATCHUP: Route[None, catchup.CatchupAnswer] = route(
    name="catchup", method="GET", path=CHATS + "/catchup",
    summary="What was said since author_id's last message (or the last day), at most limit messages.",
    answer=catchup.CatchupAnswer, run=reminders_api.catch_up, effects=READ,
    query=reminder_wire.CatchupQuery, args=reminders_api.catchup_args,
)

PEOPLE: Route[None, dash_wire.PeopleAnswer] = route(
    name="people", method="GET", path=CHATS + "/people",
    summary="The chat's people: names, message counts, last seen; where each fact came from.",
    answer=dash_wire.PeopleAnswer, run=views.people, effects=READ, query=wire.AuthorQuery,
    args=views.people_args,
)
AROUND: Route[None, dash_wire.AroundAnswer] = route(
    name="around", method="GET", path=CHATS + "/messages/{message}/around",
    summary="One message (the memory's id) with the messages before and after it.",
    answer=dash_wire.AroundAnswer, run=views.around, effects=READ, query=dash_wire.AroundQuery,
    args=views.around_args,
)
DIRECTORY = "/v1/directory"
DIRECTORY_REPORT: Route[dash_wire.ChatReport, dash_wire.ReportAnswer] = route(
    name="directory_report", method="POST", path=DIRECTORY + "/report",
    summary="A chat's counts, people and usage for the directory of chats (its hosts send it).",
    answer=dash_wire.ReportAnswer, run=directory.report, body=dash_wire.ChatReport,
    args=directory.report_args, on_object=directory.DIRECTORY_KEY,
)
DIRECTORY_LIST: Route[dash_wire.DirectoryQuery, dash_wire.DirectoryAnswer] = route(
    name="directory_list", method="POST", path=DIRECTORY + "/list",
    summary="Every chat (or those named), newest activity first; usage per day and tier.",
    answer=dash_wire.DirectoryAnswer, run=directory.listing, effects=READ, body=dash_wire.DirectoryQuery,
    args=directory.list_args, on_object=directory.DIRECTORY_KEY,
)
DIRECTORY_AUTH: Route[dash_wire.AuthRequest, dash_wire.AuthAnswer] = route(
    name="directory_auth", method="POST", path=DIRECTORY + "/auth",
    summary="The dashboard's login state: attempts, one-time links, sessions.",
    answer=dash_wire.AuthAnswer, run=directory.auth_step, body=dash_wire.AuthRequest,
    args=directory.auth_args, on_object=directory.DIRECTORY_KEY,
)

# fmt: on
# Every Route above, in the order written (which orders the 405 answer's methods and the
# API reference): a new route is its entry and its handler, nothing more.
ROUTES: tuple[Route[Any, Any], ...] = tuple(v for v in list(globals().values()) if isinstance(v, Route))
BY_NAME: dict[str, Route[Any, Any]] = {r.name: r for r in ROUTES}
