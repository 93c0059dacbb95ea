"""The memory worker's HTTP API v1, written once as pure functions of a request.

`parse` checks the token, the route, the chat key and the body, and turns a request into
an `Operation` (or an error `Response`); `execute` runs an operation on one chat's
`ChatMemory`. The Worker entry, the Durable Object and the local host all call these two,
so every host answers exactly alike.
"""

from __future__ import annotations

import hmac
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, unquote

from . import notes, user_data
from .chat_state import MAX_PERSONA_CHARS, start_topic
from .compaction import Summarize, SummarizerError, compact_once, offline_summarize
from .engine import ChatMemory

MAX_TEXT_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_FIELD_CHARS = 256
MAX_SEARCH_K = 50
CHAT_KEY = re.compile(r"^[A-Za-z0-9:_\-.]{1,128}\Z")  # \Z: `$` would let a trailing "\n" in
MODES = ("auto", "full")
ROLES = ("user", "assistant", "system")
VERSION = "1"

JSON_HEADERS = {"content-type": "application/json; charset=utf-8"}


@dataclass(frozen=True)
class Request:
    """A transport-neutral HTTP request: raw (percent-encoded) path and query."""

    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    """A JSON answer."""

    status: int
    payload: dict[str, Any]

    def body(self) -> bytes:
        """The payload as UTF-8 JSON."""
        return json.dumps(self.payload, ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class Operation:
    """A validated call on one chat: `name` is the route, `args` its checked arguments."""

    name: str
    chat_key: str
    args: dict[str, Any]


class ApiError(Exception):
    """A refusal with its HTTP status and a message saying what is wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message

    def response(self) -> Response:
        """The refusal as an error response."""
        return Response(self.status, {"error": self.message})


# (path suffix after /v1/chats/{chat}) -> {method: operation name}
_CHAT_ROUTES: dict[str, dict[str, str]] = {
    "": {"DELETE": "forget_chat"},
    "turn": {"POST": "turn"},
    "reply": {"POST": "reply"},
    "search": {"GET": "search"},
    "facts": {"GET": "facts"},
    "summary": {"GET": "summary"},
    "usage": {"GET": "usage"},
    "stats": {"GET": "stats"},
    "settings": {"GET": "settings", "PUT": "update_settings"},
    "compact": {"POST": "compact"},
    "import": {"POST": "import"},
    "export": {"GET": "export"},
    "notes": {"GET": "notes", "POST": "add_note"},
    "topic": {"POST": "start_topic"},
}
_ITEM_ROUTES = {"authors": {"DELETE": "forget_author"}, "facts": {"DELETE": "forget_fact"}}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def authorized(req: Request, token: str) -> bool:
    """True when the request carries `Authorization: Bearer <token>` (constant-time check)."""
    if not token:
        return False
    given = _header(req.headers, "authorization") or ""
    scheme, _, value = given.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode("utf-8"))


def parse(req: Request, token: str) -> Operation | Response:
    """Check token, route, chat key and body; an Operation to run, or the Response to send."""
    try:
        return _parse(req, token)
    except ApiError as err:
        return err.response()


def _parse(req: Request, token: str) -> Operation | Response:
    method = req.method.upper()
    if req.path == "/health":
        if method not in ("GET", "HEAD"):
            raise ApiError(405, "method not allowed: use GET")
        return Response(200, {"ok": True, "version": VERSION})
    # Before routing: without the token every path looks the same.
    if not authorized(req, token):
        raise ApiError(401, "missing or wrong bearer token")
    parts = req.path.split("/")
    if parts[:3] == ["", "v1", "dispatch"]:  # the reminders' dispatch object (reminders_api.py)
        from . import reminders_api

        return reminders_api.parse_dispatch(method, parts, req)
    if len(parts) < 4 or parts[:3] != ["", "v1", "chats"]:
        raise ApiError(404, "unknown route")
    chat_key = _unquote(parts[3], "chat key")
    rest = parts[4:]
    methods: dict[str, str]
    if rest and rest[0] in ("reminders", "delivered", "timezone") and CHAT_KEY.match(chat_key):
        from . import reminders_api

        return reminders_api.parse_chat(method, chat_key, rest, req)
    if len(rest) == 2 and rest[0] in _ITEM_ROUTES:
        methods = _ITEM_ROUTES[rest[0]]
    elif len(rest) <= 1:
        found = _CHAT_ROUTES.get(rest[0] if rest else "")
        if found is None:
            raise ApiError(404, "unknown route")
        methods = found
    else:
        raise ApiError(404, "unknown route")
    name = methods.get(method)
    if name is None:
        raise ApiError(405, f"method not allowed: use {', '.join(methods)}")
    if not CHAT_KEY.match(chat_key):
        raise ApiError(400, "invalid chat key: 1-128 characters of A-Z a-z 0-9 : _ - .")
    if len(req.body) > MAX_BODY_BYTES:
        raise ApiError(413, f"request body over {MAX_BODY_BYTES} bytes")
    query = _query(req.query)
    args: dict[str, Any] = {}
    if name == "forget_author":
        args["author_id"] = _plain(_unquote(rest[1], "author_id"), "author_id")
        if not args["author_id"]:
            raise ApiError(400, "author_id must not be empty")
    elif name == "turn":
        args = _turn_args(_json_body(req))
    elif name == "reply":
        args = _reply_args(_json_body(req))
    elif name == "search":
        args = {
            "query": _plain(query.get("q", ""), "q", MAX_TEXT_BYTES),
            "k": _int(query.get("k", "3"), "k", 1, MAX_SEARCH_K),
        }
    elif name == "facts":
        args = {"history": query.get("history", "0") not in ("0", "", "false", "no")}
        args["kind"] = _choice(query.get("kind"), "kind", ("fact", "note"))
    elif name == "usage" and query.get("author_id"):  # adds that person's usage today (caps)
        args = {"author_id": _plain(query["author_id"], "author_id")}
    elif name == "update_settings":
        args = _settings_args(_json_body(req))
    elif name in ("export", "forget_fact"):
        args = _user_data_args(name, rest, query)
    elif name == "add_note":
        body = _json_body(req)
        text = _plain(body.get("text"), "text", 4 * notes.MAX_NOTE_CHARS).strip()
        if not text or len(text) > notes.MAX_NOTE_CHARS:
            raise ApiError(400, f"text must be 1 to {notes.MAX_NOTE_CHARS} characters")
        args = {
            "text": text,
            "author": _optional(body, "author") or "",
            "author_id": _optional(body, "author_id") or "",
        }
    elif name == "import":
        args = {"messages": _import_args(_json_body(req))}
    return Operation(name, chat_key, args)


def _settings_args(body: dict[str, Any]) -> dict[str, Any]:
    args = {"mode": _choice(body.get("mode"), "mode", MODES)}
    if body.get("persona") is not None:
        persona = _plain(body["persona"], "persona", 4 * MAX_PERSONA_CHARS)
        if len(persona) > MAX_PERSONA_CHARS:
            raise ApiError(400, f"persona is over {MAX_PERSONA_CHARS} characters")
        args["persona"] = persona
    if args["mode"] is None and "persona" not in args:
        raise ApiError(400, "give mode (auto or full) or persona")
    return args


def _user_data_args(name: str, rest: list[str], query: dict[str, str]) -> dict[str, Any]:
    author_id = query.get("author_id")
    if author_id is not None and not _plain(author_id, "author_id"):
        raise ApiError(400, "author_id must not be empty")
    if name == "forget_fact":
        return {
            "fact_id": _int(_unquote(rest[1], "fact id"), "fact id", 1, 2**63 - 1),
            "author_id": author_id,
        }
    after, upto = query.get("after"), query.get("upto")
    return {
        "author_id": author_id,
        "after": None if after is None else _int(after, "after", 0, 2**63 - 1),
        "upto": None if upto is None else _int(upto, "upto", 0, 2**63 - 1),
        "limit": _int(query.get("limit", user_data.DEFAULT_PAGE), "limit", 1, user_data.MAX_PAGE),
    }


def _unquote(raw: str, name: str) -> str:
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise ApiError(400, f"{name} is not valid percent-encoded UTF-8") from None


def _query(raw: str) -> dict[str, str]:
    try:
        parsed = parse_qs(raw, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "query string is not valid UTF-8") from None
    return {k: v[-1] for k, v in parsed.items()}


def _json_body(req: Request) -> dict[str, Any]:
    if not req.body:
        raise ApiError(400, "a JSON object body is required")
    try:
        data = json.loads(req.body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ApiError(400, "body is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise ApiError(400, "body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body must be a JSON object")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _plain(value: Any, name: str, max_bytes: int = MAX_FIELD_CHARS) -> str:
    """A string field: ints are accepted as text; unencodable unicode is refused."""
    if isinstance(value, bool) or value is None:
        raise ApiError(400, f"{name} must be a string")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ApiError(400, f"{name} is not valid unicode (lone surrogate)") from None
    if size > max_bytes:
        raise ApiError(413 if max_bytes == MAX_TEXT_BYTES else 400, f"{name} is over {max_bytes} bytes")
    return value


def _optional(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    return None if value is None else _plain(value, name)


def _text(body: Mapping[str, Any], required: bool = True) -> str:
    value = body.get("text")
    if value is None and not required:
        return ""
    text = _plain(value, "text", MAX_TEXT_BYTES)
    if required and not text.strip():
        raise ApiError(400, "text must not be empty")
    return text


def _choice(value: Any, name: str, allowed: tuple[str, ...], required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if value not in allowed:
        raise ApiError(400, f"{name} must be one of: {', '.join(allowed)}")
    return value


def _int(value: Any, name: str, low: int, high: int) -> int:
    try:
        number = int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, float) or not low <= number <= high:
        raise ApiError(400, f"{name} must be an integer from {low} to {high}")
    return number


def _number(value: Any, name: str, default: float | None = 0.0) -> float | None:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ApiError(400, f"{name} must be a non-negative number")
    return float(value)


def _turn_args(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": _text(body),
        "author": _optional(body, "author") or "",
        "author_id": _optional(body, "author_id") or "",
        "message_id": _optional(body, "message_id"),
        "mode": _choice(body.get("mode"), "mode", MODES),
    }


def _reply_args(body: dict[str, Any]) -> dict[str, Any]:
    ok = body.get("ok", True)
    if not isinstance(ok, bool):
        raise ApiError(400, "ok must be true or false")
    usage = body.get("usage") or {}
    if not isinstance(usage, dict):
        raise ApiError(400, "usage must be an object")
    tier = _optional(body, "tier")
    model = _optional(body, "model")
    if not tier or not model:
        raise ApiError(400, "tier and model are required")
    error = body.get("error")
    return {
        "text": _text(body, required=ok),
        "tier": tier,
        "model": model,
        "prompt_tokens": _int(usage.get("prompt_tokens", 0), "usage.prompt_tokens", 0, 10**9),
        "completion_tokens": _int(usage.get("completion_tokens", 0), "usage.completion_tokens", 0, 10**9),
        "latency_ms": _number(body.get("latency_ms"), "latency_ms", default=None),
        "cost_usd": _number(body.get("cost_usd"), "cost_usd") or 0.0,
        "ok": ok,
        "message_id": _optional(body, "message_id"),
        "error": None if error is None else _plain(error, "error", 2048),
        "author_id": _optional(body, "author_id") or "",
        "reply_to_message_id": _optional(body, "reply_to_message_id"),
        "reply_to_author_id": _optional(body, "reply_to_author_id") or None,
    }


def _iso(value: Any, name: str) -> str | None:
    if value is None:
        return None
    text = _plain(value, name)
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, f"{name} must be an ISO-8601 timestamp") from None
    return text


def _import_args(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise ApiError(400, "messages must be a list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ApiError(400, f"messages[{i}] must be an object")
        try:
            out.append(
                {
                    "role": _choice(
                        "user" if m.get("role") is None else m["role"], "role", ROLES
                    ),  # null = absent
                    "text": _text(m),
                    "author": _optional(m, "author"),
                    "author_id": _optional(m, "author_id"),
                    "message_id": _optional(m, "message_id"),
                    "ts": _iso(m.get("ts"), "ts"),
                    "reply_to_message_id": _optional(m, "reply_to_message_id"),
                    "reply_to_author_id": _optional(m, "reply_to_author_id") or None,
                }
            )
        except ApiError as err:
            raise ApiError(err.status, f"messages[{i}]: {err.message}") from None
    return out


MAX_COMPACT_BATCHES = 20


async def execute(op: Operation, memory: ChatMemory, summarize: Summarize | None = None) -> Response:
    """Run a parsed operation on the chat's memory and shape the answer."""
    m = memory
    a = op.args
    if op.name == "turn":
        return Response(200, m.turn(**a))
    if op.name == "reply":
        return Response(200, m.reply(**a))
    if op.name == "search":
        return Response(200, m.search(a["query"], a["k"]))
    if op.name == "facts":
        return Response(200, m.facts(history=a["history"], kind=a["kind"]))
    if op.name == "summary":
        return Response(200, m.summary())
    if op.name == "usage":
        return Response(200, m.usage(author_id=a.get("author_id")))
    if op.name == "stats":
        return Response(200, m.stats())
    if op.name == "settings":
        return Response(200, m.settings())
    if op.name == "update_settings":
        return Response(200, m.update_settings(**a))
    if op.name == "import":
        return Response(200, m.import_messages(a["messages"]))
    if op.name == "forget_chat":
        return Response(200, m.forget_chat())
    if op.name == "forget_author":
        return Response(200, m.forget_author(a["author_id"]))
    if op.name in _USER_DATA_OPS:
        return _user_data(op, m)
    if op.name.startswith(("dispatch_", "reminder", "add_reminder", "cancel_reminder", "set_timezone")):
        from . import reminders_api

        return reminders_api.execute(op, m)
    if op.name == "compact":
        committed = 0
        try:
            for _ in range(MAX_COMPACT_BATCHES):
                if not await compact_once(m, summarize or offline_summarize, force=True):
                    break
                committed += 1
        except SummarizerError as err:
            if not committed:
                return Response(502, {"error": f"summarizer failed, nothing changed: {err}"})
            return Response(200, dict(m.summary(), compacted=committed, error=str(err)))
        return Response(200, dict(m.summary(), compacted=committed))
    return Response(404, {"error": "unknown route"})


_USER_DATA_OPS = {"export", "notes", "add_note", "forget_fact", "start_topic"}


def _user_data(op: Operation, m: ChatMemory) -> Response:
    a = op.args
    try:
        if op.name == "export":
            page = user_data.export_page(
                m.sql, op.chat_key, now=m.now(), settings=m.settings, summary=m.summary, usage=m.usage, **a
            )
            return Response(200, page)
        if op.name == "notes":
            return Response(200, {"notes": notes.current_notes(m.sql)})
        if op.name == "add_note":
            return Response(200, notes.add_note(m.sql, now=m.now(), **a))
        if op.name == "forget_fact":
            return Response(200, notes.forget_fact(m.sql, now=m.now(), **a))
        return Response(200, start_topic(m.sql, m.now()))
    except notes.FactNotFound as err:
        return Response(404, {"error": str(err)})
    except notes.NotTheirFact as err:
        return Response(403, {"error": str(err)})
    except notes.NoteLimitError as err:
        return Response(400, {"error": str(err)})
