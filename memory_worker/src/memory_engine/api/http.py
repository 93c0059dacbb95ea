"""The memory worker's HTTP API v1, written once as pure functions of a request.

`parse` checks the token, the route, the chat key and the arguments, and turns a request
into an `Operation` (or an error `Response`); `execute` runs an operation on one chat's
`ChatMemory`. Both read the route table (`routes.py`): the Worker entry, the Durable Object
and the local host all call these two, so every host answers exactly alike. A host decides
what a call needs (a lock, the alarm, freeing the chat's storage) from its `kind` alone.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_engine.api.http_types import CHAT_KEY, JSON_HEADERS, VERSION, Request, Response
from memory_engine.api.route_args import MAX_SEARCH_K, Call
from memory_engine.api.routes import BY_NAME, ROUTES, WRITE, Ctx, Kind, Route
from memory_engine.api.validation import (
    BODY_TOO_LARGE,
    MAX_BODY_BYTES,
    MAX_FIELD_CHARS,
    MAX_TEXT_BYTES,
    MODES,
    ROLES,
    ApiError,
    query_of,
)
from memory_engine.api.validation import unquote_strict as _unquote
from memory_engine.compaction.compact import Summarize
from memory_engine.engine import ChatMemory
from memory_engine.index.pending import ensure_settled

__all__ = [
    "CHAT_KEY",
    "JSON_HEADERS",
    "MAX_BODY_BYTES",
    "MAX_FIELD_CHARS",
    "MAX_SEARCH_K",
    "MAX_TEXT_BYTES",
    "MODES",
    "ROLES",
    "VERSION",
    "ApiError",
    "Operation",
    "Request",
    "Response",
    "authorized",
    "execute",
    "execute_now",
    "parse",
]


@dataclass(frozen=True)
class Operation:
    """A validated call on one chat: `name` is the route's operation, `args` its checked arguments
    (the route's TypedDict), `kind` what it does to the chat."""

    name: str
    chat_key: str
    args: Mapping[str, object]
    kind: Kind = WRITE


def _refusal(err: ApiError) -> Response:
    return Response(err.status, {"error": err.message}, err.headers)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)  # a host's case-insensitive headers (aiohttp's) find it at once
    if value is not None:
        return value
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
    """Check token, route, chat key and arguments; an Operation to run, or the Response to send."""
    try:
        return _parse(req, token)
    except ApiError as err:
        return _refusal(err)


# The routes by (segment count, needs the token), then by the positions of their path
# parameters, then by their path with "{}" there: a request is looked up under each
# parameter layout of its shape (one or two), not matched against every route (this runs on
# every turn). Each entry: the route's position in ROUTES (which orders the routes one path
# names), the route, and its parameters' (position, name).
_Found = tuple[int, "Route[Any, Any]", tuple[tuple[int, str], ...]]
_Layouts = dict[tuple[int, ...], dict[tuple[str, ...], list[_Found]]]
_SHAPES: dict[tuple[int, bool], _Layouts] = {}
for _n, _r in enumerate(ROUTES):
    _at = tuple(i for i, part in enumerate(_r.segments) if part.startswith("{"))
    _key = tuple("{}" if i in _at else part for i, part in enumerate(_r.segments))
    _names = tuple((i, _r.segments[i][1:-1]) for i in _at)
    _layout = _SHAPES.setdefault((len(_key), _r.auth), {}).setdefault(_at, {})
    _layout.setdefault(_key, []).append((_n, _r, _names))
_PUBLIC_PATHS = frozenset(r.path for r in ROUTES if not r.auth)


def _routes_for(parts: list[str], public: bool) -> list[_Found]:
    """The routes whose path `parts` fit, in ROUTES order."""
    found: list[_Found] = []
    for at, paths in _SHAPES.get((len(parts), not public), {}).items():
        key = list(parts)
        for i in at:
            key[i] = "{}"
        found += paths.get(tuple(key), ())
    if len(found) > 1:
        found.sort(key=lambda f: f[0])
    return found


def _allowed(route: Route[Any, Any], method: str) -> bool:
    # HEAD is answered like GET where no token is asked for (`/health`, for probes).
    return method == route.method or (method == "HEAD" and route.method == "GET" and not route.auth)


def _route(req: Request, method: str, public: bool) -> tuple[Route[Any, Any], dict[str, str]]:
    """The route a request names (404/405 otherwise); `public`: only the token-free ones."""
    parts = req.path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "v1", "chats"] and parts[4] == "":
        parts = parts[:4]  # "/v1/chats/{chat}/" is the chat itself
    found = _routes_for(parts, public)
    if not found:
        raise ApiError(404, "unknown route")
    for _, route, names in found:
        if _allowed(route, method):
            return route, {name: parts[i] for i, name in names}  # the raw path parameters
    allowed = ", ".join(dict.fromkeys(r.method for _, r, _ in found))
    raise ApiError(405, f"method not allowed: use {allowed}", {"allow": allowed})


def _parse(req: Request, token: str) -> Operation | Response:
    method = req.method.upper()
    if req.path in _PUBLIC_PATHS:
        route, _ = _route(req, method, public=True)
        assert route.static is not None  # a route without a token has no chat
        return Response(200, route.static())
    # Before routing: without the token every path looks the same.
    if not authorized(req, token):
        raise ApiError(401, "missing or wrong bearer token")
    parts = req.path.split("/")
    chat_key = ""
    if len(parts) >= 4 and parts[:3] == ["", "v1", "chats"]:
        chat_key = _unquote(parts[3], "chat key")
    route, params = _route(req, method, public=False)
    if route.static is not None:
        return Response(200, route.static())
    chat_key = route.on_object or chat_key  # the reminders' dispatch object: no chat key to check
    if not route.on_object and not CHAT_KEY.match(chat_key):
        raise ApiError(400, "invalid chat key: 1-128 characters of A-Z a-z 0-9 : _ - .")
    if len(req.body) > MAX_BODY_BYTES:
        raise ApiError(413, BODY_TOO_LARGE)
    call = Call(params, query_of(req.query), req.body)
    if route.body is not None:
        _known_fields(route.body, call.body())
    args = route.args(call)
    kind = route.effects if route.effects_of is None else route.effects_of(args)
    return Operation(route.name, chat_key, args, kind)


def _known_fields(body_type: Any, body: Mapping[str, Any]) -> None:
    """400 for a body field the route's document does not name (a misspelt one is not ignored)."""
    known = _FIELDS.get(body_type)
    if known is None:
        known = _FIELDS[body_type] = body_type.__required_keys__ | body_type.__optional_keys__
    unknown = [k for k in body if k not in known]
    if unknown:
        names = ", ".join(sorted(repr(k[:40]) for k in unknown)[:5])
        raise ApiError(400, f"unknown field {names}; known: {', '.join(sorted(known))}")


_FIELDS: dict[Any, frozenset[str]] = {}


async def execute(op: Operation, memory: ChatMemory, summarize: Summarize | None = None) -> Response:
    """Run a parsed operation on the chat's memory and shape the answer."""
    answer = _begin(op, memory, summarize)
    if not inspect.isawaitable(answer):
        return answer
    try:
        return Response(200, await answer)
    except ApiError as err:
        return _refusal(err)


def execute_now(op: Operation, memory: ChatMemory) -> Response:
    """Run a parsed operation that never waits (its kind does not summarize) to the end, in the
    caller's thread: a host may run it off its event loop. TypeError for one that waits."""
    answer = _begin(op, memory, None)
    if inspect.isawaitable(answer):
        if inspect.iscoroutine(answer):
            answer.close()
        raise TypeError(f"{op.name} waits on the summarizer: run it with `execute`")
    return answer


def _begin(op: Operation, memory: ChatMemory, summarize: Summarize | None) -> Response | Awaitable[Any]:
    """The operation's answer, or what to await for it (an operation that waits)."""
    route = BY_NAME.get(op.name)
    if route is None or route.run is None:
        return Response(404, {"error": "unknown route"})
    # An import's next batch continues what it held; everything else sees the chat settled.
    if not op.kind.continues_import:
        ensure_settled(memory.sql)
    try:
        answer = route.run(Ctx(memory, op.chat_key, summarize), op.args)
    except ApiError as err:
        return _refusal(err)
    if inspect.isawaitable(answer):
        return answer
    return Response(200, answer)
