"""The memory client: one interface to the memory worker's HTTP API v1 (see docs/api.md).

Every call is one route of the engine's route table (`memory_engine.api.routes`), with its
request and answer types (`memory_engine.api.wire`): `MemoryRoutes.call` sends a route, and
the named methods below are one line each over it. `HttpMemoryClient` speaks to a deployed
Cloudflare Worker (`MEMORY_URL`) or to the local host; the pipeline never knows which.
Failures come in two kinds: `MemoryUnavailable` (cannot reach it, it timed out, it answered
5xx, or it refused the token or the URL: retry later, the outbox keeps the record) and
`MemoryRefused` (it refused the request itself, 400/405/413: retrying will not help).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import yarl

from bot.config import default
from bot.errors import MemoryRefused, MemoryUnavailable
from memory_engine.api import routes, wire
from memory_engine.api.routes import Route

B = TypeVar("B")
R = TypeVar("R")
Query = Mapping[str, str | int | None]


def _segment(value: str) -> str:
    # Quote everything: a key never becomes a path trick ("/", "?", "%"); "." and ".."
    # are encoded too, or URL normalisation would turn them into "this/parent folder".
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def route_path(route: Route[Any, Any], chat: str | None, path: Mapping[str, str | int] | None = None) -> str:
    """The route's path with the chat key and its other parameters quoted in."""
    values = {"chat": chat or "", **{k: str(v) for k, v in (path or {}).items()}}
    return "/".join(_segment(values[s[1:-1]]) if s.startswith("{") else s for s in route.segments)


class MemoryRoutes:
    """The memory API's reads and admin actions as typed calls, over one `call`."""

    async def call(
        self,
        route: Route[B, R],
        chat: str | None = None,
        *,
        body: B | None = None,
        query: Query | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> R:
        """Send one route; its typed answer (raises `MemoryUnavailable` / `MemoryRefused`)."""
        raise NotImplementedError

    async def search(self, chat: str, q: str, k: int = 3) -> list[wire.ScoredMessage]:
        """Retrieve older messages like `turn` does, recording nothing."""
        return (await self.call(routes.SEARCH, chat, query={"q": q, "k": k}))["results"]

    async def facts(self, chat: str, history: bool = False, kind: str | None = None) -> list[wire.Fact]:
        """Current facts and notes (superseded ones too with `history`; only one `kind` if given)."""
        query = {"history": "1" if history else None, "kind": kind}
        return (await self.call(routes.FACTS, chat, query=query))["facts"]

    async def summary(self, chat: str) -> wire.SummaryAnswer:
        """The rolling summary and its compaction state."""
        return await self.call(routes.SUMMARY, chat)

    async def usage(self, chat: str, author_id: str | None = None) -> wire.UsageAnswer:
        """routerUsage totals per tier and the recent rows (with `author_id`: their usage today)."""
        return await self.call(routes.USAGE, chat, query={"author_id": author_id or None})

    async def stats(self, chat: str) -> wire.StatsAnswer:
        """Message and fact counts, the mode, the last prompt."""
        return await self.call(routes.STATS, chat)

    async def settings(self, chat: str) -> wire.SettingsAnswer:
        """The chat's settings: mode and persona."""
        return await self.call(routes.SETTINGS, chat)

    async def set_mode(self, chat: str, mode: wire.Mode) -> wire.SettingsAnswer:
        """Set the memory mode (`auto` or `full`)."""
        body: wire.SettingsRequest = {"mode": mode}
        return await self.call(routes.UPDATE_SETTINGS, chat, body=body)

    async def set_persona(self, chat: str, persona: str) -> wire.SettingsAnswer:
        """Set the chat's persona ("" resets it to the bot's default)."""
        body: wire.SettingsRequest = {"persona": persona}
        return await self.call(routes.UPDATE_SETTINGS, chat, body=body)

    async def compact(self, chat: str) -> wire.CompactAnswer:
        """Run compaction now; the new summary state."""
        return await self.call(routes.COMPACT, chat)

    async def import_messages(self, chat: str, messages: Sequence[wire.ImportedMessage]) -> wire.ImportAnswer:
        """Bulk-import history; `{"imported", "skipped"}`."""
        body: wire.ImportRequest = {"messages": list(messages)}
        return await self.call(routes.IMPORT, chat, body=body)

    async def import_encoded(self, chat: str, body: bytes) -> wire.ImportAnswer:
        """`import_messages` of a request body already encoded as JSON (`{"messages": [...]}`)."""
        request: wire.ImportRequest = _json.loads(body)
        return await self.call(routes.IMPORT, chat, body=request)

    async def forget_author(self, chat: str, author_id: str) -> wire.ForgetAuthorAnswer:
        """Forget one person's messages and facts in a chat."""
        return await self.call(routes.FORGET_AUTHOR, chat, path={"author_id": author_id})

    async def forget_chat(self, chat: str) -> wire.ForgetChatAnswer:
        """Forget the whole chat."""
        return await self.call(routes.FORGET_CHAT, chat)

    async def export_page(
        self, chat: str, author_id: str | None = None, after: int | None = None, upto: int | None = None
    ) -> wire.ExportPage:
        """One page of the chat's (or one person's) export; follow `next_after` for the rest."""
        query = {"author_id": author_id, "after": after, "upto": upto}
        return await self.call(routes.EXPORT, chat, query=query)

    async def add_note(self, chat: str, text: str, author: str, author_id: str) -> wire.NoteAnswer:
        """Keep a note in every prompt of the chat; `{"note", "duplicate"}`."""
        body: wire.NoteRequest = {"text": text, "author": author, "author_id": author_id}
        return await self.call(routes.ADD_NOTE, chat, body=body)

    async def notes(self, chat: str) -> list[wire.Fact]:
        """The chat's current notes, oldest first."""
        return (await self.call(routes.NOTES, chat))["notes"]

    async def forget_fact(
        self, chat: str, fact_id: int, author_id: str | None = None
    ) -> wire.ForgetFactAnswer:
        """Supersede one fact or note by id (only if it is `author_id`'s, when given)."""
        query = {"author_id": author_id}
        return await self.call(routes.FORGET_FACT, chat, query=query, path={"fact_id": int(fact_id)})

    async def start_topic(self, chat: str) -> wire.TopicAnswer:
        """Start a new topic: the recent window begins after the newest message."""
        return await self.call(routes.START_TOPIC, chat)


class MemoryClient(MemoryRoutes):
    """What the pipeline needs from the memory worker: every route of the API v1.

    Every method raises `MemoryUnavailable` when the worker cannot be reached (or answers
    5xx) and `MemoryRefused` on a 4xx answer.
    """

    async def health(self) -> bool:
        """True when `GET /health` answers ok."""
        try:
            data = await self.call(routes.HEALTH)
        except (MemoryUnavailable, MemoryRefused):
            return False
        return bool(data.get("ok"))

    async def turn(
        self,
        chat: str,
        text: str,
        *,
        author: str | None = None,
        author_id: str | None = None,
        message_id: str | None = None,
        mode: wire.Mode | None = None,
        title: str | None = None,
    ) -> wire.TurnAnswer:
        """Record a user message; the memory prompt and context for answering it."""
        body: wire.TurnRequest = {"text": text}
        if title:
            body["title"] = title
        if author is not None:
            body["author"] = author
        if author_id is not None:
            body["author_id"] = author_id
        if message_id is not None:
            body["message_id"] = message_id
        if mode is not None:
            body["mode"] = mode
        return await self.call(routes.TURN, chat, body=body)

    async def reply(self, chat: str, body: wire.ReplyRequest) -> wire.ReplyAnswer:
        """Record one model attempt (and, when ok, the assistant message)."""
        return await self.call(routes.REPLY, chat, body=body)


_RETRY_LATER = frozenset({401, 403, 404, 408, 429})
_JSON_BODY = {"Content-Type": "application/json"}


class HttpMemoryClient(MemoryClient):
    """`MemoryClient` over HTTP with a bearer token; open it with `async with`.

    The transport is an aiohttp.ClientSession (keep-alive pool): measured against
    httpx.AsyncClient on the same local host it costs ~0.45 ms per request instead of
    ~2.7 ms, and the bot makes two requests per message (benchmarks/pipeline.py).
    """

    def __init__(
        self, base_url: str, token: str | None, *, timeout: float = default("memory", "timeout_s")
    ) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._token = token
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        # No proxy from the environment between the bot and a loopback memory host.
        self._local = self._base_url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))
        self._session: aiohttp.ClientSession | None = None

    def dashboard_link(
        self,
        *,
        role: str = "owner",
        who: str = "owner",
        chats: tuple[str, ...] | None = None,
        minutes: float = 10,
    ) -> str | None:
        """A one-time login link to the memory worker's dashboard (None without a token)."""
        if not self._token:
            return None
        import time

        from memory_engine.dashboard.auth import make_link

        now = int(time.time() * 1000)
        return make_link(self._token, self._base_url, now, role=role, who=who, chats=chats, minutes=minutes)

    def _http(self) -> aiohttp.ClientSession:
        # Created on first use: a ClientSession belongs to the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self._timeout, connect=min(self._timeout, 3.0)),
                trust_env=not self._local,
                raise_for_status=False,
            )
        return self._session

    async def __aenter__(self) -> HttpMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._session is not None:
            await self._session.close()

    async def call(
        self,
        route: Route[B, R],
        chat: str | None = None,
        *,
        body: B | None = None,
        query: Query | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> R:
        """Send one route over HTTP; its answer."""
        params = {k: str(v) for k, v in (query or {}).items() if v is not None}
        return await self._send(route, route_path(route, chat, path), params, json=body)

    async def import_encoded(self, chat: str, body: bytes) -> wire.ImportAnswer:
        """POST the encoded body as it is: the importer encodes its batches while checking the file."""
        return await self._send(routes.IMPORT, route_path(routes.IMPORT, chat), {}, encoded=body)

    async def _send(
        self,
        route: Route[Any, R],
        path: str,
        params: dict[str, str],
        *,
        json: Any = None,
        encoded: bytes | None = None,
    ) -> R:
        # encoded=True: the path is quoted already and must reach the worker as it is.
        url = yarl.URL(self._base_url + path, encoded=True)
        headers = None if encoded is None else _JSON_BODY
        try:
            async with self._http().request(
                route.method, url, json=json, data=encoded, params=params or None, headers=headers
            ) as resp:
                status = resp.status
                raw = await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:  # refused, reset, timeout
            raise MemoryUnavailable(f"{type(exc).__name__}: {exc}") from exc
        try:
            answer = _json.loads(raw) if raw else None
        except ValueError:
            answer = None
        return answer_of(route, status, answer, raw)


def answer_of(route: Route[Any, R], status: int, data: Any, raw: bytes = b"") -> R:
    """The answer of a route from its status and JSON, or the failure it means."""
    # A status the route declares (403/404 of one fact) is an answer about the request itself.
    if status >= 500 or (status in _RETRY_LATER and status not in dict(route.errors)):
        # 401/403/404 mean a wrong token or URL: an operator fixes that, and until then
        # the records wait in the outbox rather than being dropped.
        raise MemoryUnavailable(f"memory worker answered {status}: {_error_of(data, raw)}", status)
    if status >= 400:
        raise MemoryRefused(status, _error_of(data, raw))
    if not isinstance(data, dict):
        raise MemoryUnavailable("memory worker answered something that is not a JSON object")
    answer: R = data  # type: ignore[assignment]  # its shape is the route's, checked by the contract tests
    return answer


def _error_of(data: Any, body: bytes) -> str:
    if isinstance(data, dict) and "error" in data:
        return str(data["error"])[:200]
    if data is not None:
        return str(data)[:200]
    return body[:200].decode("utf-8", "replace")
