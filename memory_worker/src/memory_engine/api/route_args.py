"""The checked arguments of each route, from its path, query and JSON body.

Each function takes the route's `Call` and returns the keyword arguments of its handler
as the route's own TypedDict, or raises `ApiError` saying what to fix. The route table
(`routes.py`) names one per route, and mypy checks that its handler takes what it returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, cast

from memory_engine import notes, user_data
from memory_engine.api import wire
from memory_engine.api.validation import (
    IMPORTED_FIELDS,
    MODES,
    ROLES,
    ApiError,
    choice,
    imported_message,
    integer,
    iso,
    json_object,
    number,
    optional,
    plain,
    text,
    unquote_strict,
)
from memory_engine.chat_state import MAX_PERSONA_CHARS

MAX_SEARCH_K = 50
# A search's words, in a URL's query: 500 characters percent-encoded stay within the 8 KiB
# request line HTTP servers take.
MAX_QUERY_CHARS = 500
MAX_REMAINING = 10**9  # an import's messages still to come (a hint): far beyond any export


class NoArgs(TypedDict):
    """A route without arguments."""


class TurnArgs(TypedDict):
    """`ChatMemory.turn`'s arguments."""

    text: str
    author: str
    author_id: str
    message_id: str | None
    mode: str | None
    title: str | None  # the chat's name on its platform (kept for the dashboard, not the turn's)


class ReplyArgs(TypedDict):
    """`ChatMemory.reply`'s arguments."""

    text: str
    tier: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float | None
    cost_usd: float
    ok: bool
    message_id: str | None
    error: str | None
    author_id: str
    reply_to_message_id: str | None
    reply_to_author_id: str | None


class SearchArgs(TypedDict):
    """`ChatMemory.search`'s arguments."""

    query: str
    k: int


class FactsArgs(TypedDict):
    """`ChatMemory.facts`'s arguments."""

    history: bool
    kind: str | None


class AuthorFilter(TypedDict):
    """One person's part only (None: everyone's)."""

    author_id: str | None


class SettingsArgs(TypedDict):
    """`ChatMemory.update_settings`'s arguments (`persona` only when given)."""

    mode: str | None
    persona: NotRequired[str]


class ExportArgs(TypedDict):
    """`user_data.export_page`'s paging and filter."""

    author_id: str | None
    after: int | None
    upto: int | None
    limit: int


class ForgetFactArgs(TypedDict):
    """`notes.forget_fact`'s arguments."""

    fact_id: int
    author_id: str | None


class AuthorArgs(TypedDict):
    """One person, named."""

    author_id: str


class NoteArgs(TypedDict):
    """`notes.add_note`'s arguments."""

    text: str
    author: str
    author_id: str


class ImportArgs(TypedDict):
    """`ChatMemory.import_messages`'s arguments."""

    messages: list[wire.ImportedMessage]
    more: bool
    remaining: int | None
    import_id: str | None  # with batch: the import it belongs to (see imports.bulk.check_batch)
    batch: int | None
    title: str | None  # the exported chat's name (kept for the dashboard)


IMPORT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # names one import's batches (the client's choice)


@dataclass
class Call:
    """One request's parts: path parameters (still percent-encoded), query and raw body."""

    params: dict[str, str]
    query: dict[str, str]
    raw_body: bytes = b""
    _body: dict[str, object] | None = field(default=None, repr=False)

    def body(self) -> dict[str, Any]:
        """The body as a checked JSON object (parsed once)."""
        if self._body is None:
            self._body = json_object(self.raw_body)
        return self._body


def no_args(call: Call) -> NoArgs:
    """A route without arguments: path, query and body are ignored."""
    return {}


def turn(call: Call) -> TurnArgs:
    """`POST .../turn`."""
    body = call.body()
    return {
        "text": text(body),
        "author": optional(body, "author") or "",
        "author_id": optional(body, "author_id") or "",
        "message_id": optional(body, "message_id"),
        "mode": choice(body.get("mode"), "mode", MODES),
        "title": optional(body, "title"),  # the chat's name on its platform, for the dashboard
    }


def reply(call: Call) -> ReplyArgs:
    """`POST .../reply`."""
    body = call.body()
    ok = body.get("ok", True)
    if not isinstance(ok, bool):
        raise ApiError(400, "ok must be true or false")
    usage = {} if body.get("usage") is None else body["usage"]
    if not isinstance(usage, dict) or not usage.keys() <= {"prompt_tokens", "completion_tokens"}:
        raise ApiError(400, "usage must be an object of prompt_tokens and completion_tokens")
    tier = optional(body, "tier")
    model = optional(body, "model")
    if not tier or not model:
        raise ApiError(400, "tier and model are required")
    error = body.get("error")
    return {
        "text": text(body, required=ok),
        "tier": tier,
        "model": model,
        "prompt_tokens": integer(usage.get("prompt_tokens", 0), "usage.prompt_tokens", 0, 10**9),
        "completion_tokens": integer(usage.get("completion_tokens", 0), "usage.completion_tokens", 0, 10**9),
        "latency_ms": number(body.get("latency_ms"), "latency_ms", default=None),
        "cost_usd": number(body.get("cost_usd"), "cost_usd") or 0.0,
        "ok": ok,
        "message_id": optional(body, "message_id"),
        "error": None if error is None else plain(error, "error", 2048),
        "author_id": optional(body, "author_id") or "",
        "reply_to_message_id": optional(body, "reply_to_message_id"),
        "reply_to_author_id": optional(body, "reply_to_author_id") or None,
    }


def search(call: Call) -> SearchArgs:
    """`GET .../search?q=&k=`."""
    return {
        "query": plain(call.query.get("q", ""), "q", MAX_QUERY_CHARS),
        "k": integer(call.query.get("k", "3"), "k", 1, MAX_SEARCH_K),
    }


def facts(call: Call) -> FactsArgs:
    """`GET .../facts?history=&kind=`."""
    return {
        "history": call.query.get("history", "0") not in ("0", "", "false", "no"),
        "kind": choice(call.query.get("kind"), "kind", ("fact", "note")),
    }


def usage(call: Call) -> AuthorFilter:
    """`GET .../usage?author_id=`: that person's usage today too (the daily caps)."""
    return {"author_id": author_filter(call)}


def settings(call: Call) -> SettingsArgs:
    """`PUT .../settings`: mode, persona or both."""
    body = call.body()
    args: SettingsArgs = {"mode": choice(body.get("mode"), "mode", MODES)}
    if body.get("persona") is not None:
        persona = plain(body["persona"], "persona", 4 * MAX_PERSONA_CHARS)
        if len(persona) > MAX_PERSONA_CHARS:
            raise ApiError(400, f"persona is over {MAX_PERSONA_CHARS} characters")
        args["persona"] = persona
    if args["mode"] is None and "persona" not in args:
        raise ApiError(400, "give mode (auto or full) or persona")
    return args


def author_filter(call: Call) -> str | None:
    """The optional `author_id` of a query: absent is None, empty is refused."""
    author_id = call.query.get("author_id")
    if author_id is not None and not plain(author_id, "author_id"):
        raise ApiError(400, "author_id must not be empty")
    return author_id


def export(call: Call) -> ExportArgs:
    """`GET .../export?author_id=&after=&upto=&limit=`."""
    after, upto = call.query.get("after"), call.query.get("upto")
    return {
        "author_id": author_filter(call),
        "after": None if after is None else integer(after, "after", 0, 2**63 - 1),
        "upto": None if upto is None else integer(upto, "upto", 0, 2**63 - 1),
        "limit": integer(call.query.get("limit", user_data.DEFAULT_PAGE), "limit", 1, user_data.MAX_PAGE),
    }


def forget_fact(call: Call) -> ForgetFactArgs:
    """`DELETE .../facts/{fact_id}?author_id=`."""
    raw = unquote_strict(call.params["fact_id"], "fact id")
    return {"fact_id": integer(raw, "fact id", 1, 2**63 - 1), "author_id": author_filter(call)}


def forget_author(call: Call) -> AuthorArgs:
    """`DELETE .../authors/{author_id}`."""
    author_id = plain(unquote_strict(call.params["author_id"], "author_id"), "author_id")
    if not author_id:
        raise ApiError(400, "author_id must not be empty")
    return {"author_id": author_id}


def add_note(call: Call) -> NoteArgs:
    """`POST .../notes`."""
    body = call.body()
    note = plain(body.get("text"), "text", 4 * notes.MAX_NOTE_CHARS).strip()
    if not note or len(note) > notes.MAX_NOTE_CHARS:
        raise ApiError(400, f"text must be 1 to {notes.MAX_NOTE_CHARS} characters")
    return {
        "text": note,
        "author": optional(body, "author") or "",
        "author_id": optional(body, "author_id") or "",
    }


def import_messages(call: Call) -> ImportArgs:
    """`POST .../import`."""
    body = call.body()
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ApiError(400, "messages must be a list")
    more = body.get("more", False)
    if not isinstance(more, bool):
        raise ApiError(400, "more must be true or false")
    remaining = body.get("remaining")
    if remaining is not None:
        remaining = _whole(remaining, "remaining", 0)
    run, batch = body.get("import_id"), body.get("batch")
    if run is not None or batch is not None:
        if type(run) is not str or not IMPORT_ID.fullmatch(run):
            raise ApiError(400, "import_id must be 1-64 characters of A-Z a-z 0-9 _ - (with batch)")
        batch = _whole(batch, "batch (with import_id)", 1)
    out: list[wire.ImportedMessage] = []
    for i, m in enumerate(messages):
        checked = imported_message(m) if type(m) is dict else None  # most: every field plain
        out.append(checked if checked is not None else _imported_message(m, i))
    return {
        "messages": out,
        "more": more,
        "remaining": remaining,
        "import_id": run,
        "batch": batch,
        "title": optional(body, "title"),
    }


def _whole(value: Any, name: str, low: int) -> int:
    """A JSON number with no fraction from `low` to MAX_REMAINING (not its text, not a bool)."""
    if type(value) not in (int, float):
        raise ApiError(400, f"{name} must be a whole number from {low} to {MAX_REMAINING}")
    return integer(value, name, low, MAX_REMAINING)


def _imported_message(m: object, i: int) -> wire.ImportedMessage:
    """One message of an import checked field by field (the refusals say which and why)."""
    if not isinstance(m, dict):
        raise ApiError(400, f"messages[{i}] must be an object")
    unknown = sorted(k for k in m if k not in IMPORTED_FIELDS)
    if unknown:
        raise ApiError(400, f"messages[{i}]: unknown field {unknown[0][:40]!r}")
    try:
        return {
            "role": cast(
                wire.Role, choice("user" if m.get("role") is None else m["role"], "role", ROLES)
            ),  # null: absent
            "text": text(m),
            "author": optional(m, "author"),
            "author_id": optional(m, "author_id"),
            "message_id": optional(m, "message_id"),
            "ts": iso(m.get("ts"), "ts"),
            "reply_to_message_id": optional(m, "reply_to_message_id"),
            "reply_to_author_id": optional(m, "reply_to_author_id") or None,
        }
    except ApiError as err:
        raise ApiError(err.status, f"messages[{i}]: {err.message}") from None
