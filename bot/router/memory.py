"""The memory client: one interface to the memory worker's HTTP API v1 (see ARCHITECTURE.md).

`HttpMemoryClient` speaks to a deployed Cloudflare Worker (`MEMORY_URL`) or to the local
host started in-process; the router never knows which. Failures come in two kinds:
`MemoryUnavailable` (cannot reach it, it timed out, it answered 5xx, or it refused the token
or the URL: retry later, the outbox keeps the record) and `MemoryRefused` (it refused the
request itself, 400/405/413: retrying will not help).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import yarl

from bot.config import default


class MemoryUnavailable(Exception):
    """The memory worker could not be reached or failed on its side (retry later)."""


class MemoryRefused(Exception):
    """The memory worker refused the request (4xx); `status` and `error` say why."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"memory worker refused ({status}): {error}")
        self.status = status
        self.error = error


class MemoryClient(Protocol):
    """What the router needs from the memory worker: one method per route of the API v1.

    Every method raises `MemoryUnavailable` when the worker cannot be reached (or answers
    5xx) and `MemoryRefused` on a 4xx answer. Bodies and answers are the JSON of the API.
    """

    async def health(self) -> bool:
        """True when `GET /health` answers ok."""

    async def turn(
        self,
        chat: str,
        text: str,
        *,
        author: str | None = None,
        author_id: str | None = None,
        message_id: str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """Record a user message; the memory prompt and context for answering it."""

    async def reply(self, chat: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Record one model attempt (and, when ok, the assistant message)."""

    async def search(self, chat: str, q: str, k: int = 3) -> list[dict[str, Any]]:
        """Retrieve older messages like `turn` does, recording nothing."""

    async def facts(self, chat: str, history: bool = False, kind: str | None = None) -> list[dict[str, Any]]:
        """Current facts and notes (superseded ones too with `history`; only one `kind` if given)."""

    async def summary(self, chat: str) -> dict[str, Any]:
        """The rolling summary and its compaction state."""

    async def usage(self, chat: str, author_id: str | None = None) -> dict[str, Any]:
        """routerUsage totals per tier and the recent rows (with `author_id`: their usage today)."""

    async def stats(self, chat: str) -> dict[str, Any]:
        """Message and fact counts, the mode, the last prompt."""

    async def set_mode(self, chat: str, mode: str) -> dict[str, Any]:
        """Set the memory mode (`auto` or `full`)."""

    async def settings(self, chat: str) -> dict[str, Any]:
        """The chat's settings: mode and persona."""

    async def set_persona(self, chat: str, persona: str) -> dict[str, Any]:
        """Set the chat's persona ("" resets it to the bot's default)."""

    async def compact(self, chat: str) -> dict[str, Any]:
        """Run compaction now; the new summary state."""

    async def import_messages(self, chat: str, messages: list[Mapping[str, Any]]) -> dict[str, Any]:
        """Bulk-import history; `{"imported", "skipped"}`."""

    async def forget_author(self, chat: str, author_id: str) -> dict[str, Any]:
        """Forget one person's messages and facts in a chat."""

    async def forget_chat(self, chat: str) -> dict[str, Any]:
        """Forget the whole chat."""

    async def export_page(
        self, chat: str, author_id: str | None = None, after: int | None = None, upto: int | None = None
    ) -> dict[str, Any]:
        """One page of the chat's (or one person's) export; follow `next_after` for the rest."""

    async def add_note(self, chat: str, text: str, author: str, author_id: str) -> dict[str, Any]:
        """Keep a note in every prompt of the chat; `{"note", "duplicate"}`."""

    async def notes(self, chat: str) -> list[dict[str, Any]]:
        """The chat's current notes, oldest first."""

    async def forget_fact(self, chat: str, fact_id: int, author_id: str | None = None) -> dict[str, Any]:
        """Supersede one fact or note by id (only if it is `author_id`'s, when given)."""

    async def start_topic(self, chat: str) -> dict[str, Any]:
        """Start a new topic: the recent window begins after the newest message."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        refusals: frozenset[int] = frozenset(),
    ) -> Any:
        """Any route by method and path (reminders, the dispatch queue); `refusals`: 4xx answers
        that are refusals (`MemoryRefused`) rather than a reason to retry later."""


_RETRY_LATER = frozenset({401, 403, 404, 408, 429})
_FACT_ANSWERS = frozenset({403, 404})


def _segment(value: str) -> str:
    # Quote everything: a key never becomes a path trick ("/", "?", "%"); "." and ".."
    # are encoded too, or URL normalisation would turn them into "this/parent folder".
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _chat_path(chat: str) -> str:
    return "/v1/chats/" + _segment(chat)


class HttpMemoryClient:
    """`MemoryClient` over HTTP with a bearer token; open it with `async with`.

    The transport is an aiohttp.ClientSession (keep-alive pool): measured against
    httpx.AsyncClient on the same local host it costs ~0.45 ms per request instead of
    ~2.7 ms, and the bot makes two requests per message (benchmarks/pipeline.py).
    """

    def __init__(
        self, base_url: str, token: str | None, *, timeout: float = default("memory", "timeout_s")
    ) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        # No proxy from the environment between the bot and a loopback memory host.
        self._local = self._base_url.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]"))
        self._session: aiohttp.ClientSession | None = None

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

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        refusals: frozenset[int] = frozenset(),
    ) -> Any:
        # encoded=True: the path is quoted already and must reach the worker as it is.
        url = yarl.URL(self._base_url + path, encoded=True)
        try:
            async with self._http().request(method, url, json=json, params=params) as resp:
                status = resp.status
                body = await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:  # refused, reset, timeout
            raise MemoryUnavailable(f"{type(exc).__name__}: {exc}") from exc
        try:
            data = _json.loads(body) if body else None
        except ValueError:
            data = None
        if status >= 500 or (status in _RETRY_LATER and status not in refusals):
            # 401/403/404 mean a wrong token or URL: an operator fixes that, and until then
            # the records wait in the outbox rather than being dropped.
            raise MemoryUnavailable(f"memory worker answered {status}: {_error_of(data, body)}")
        if status >= 400:
            raise MemoryRefused(status, _error_of(data, body))
        if data is None:
            raise MemoryUnavailable("memory worker answered something that is not JSON")
        return data

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        refusals: frozenset[int] = frozenset(),
    ) -> Any:
        """Any route by method and (quoted) path: the reminder and dispatch routes."""
        return await self._call(method, path, json=json, params=params, refusals=refusals)

    async def health(self) -> bool:
        """True when `GET /health` answers ok."""
        try:
            data = await self._call("GET", "/health")
        except (MemoryUnavailable, MemoryRefused):
            return False
        return bool(isinstance(data, dict) and data.get("ok"))

    async def turn(
        self,
        chat: str,
        text: str,
        *,
        author: str | None = None,
        author_id: str | None = None,
        message_id: str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/turn`."""
        body: dict[str, Any] = {"text": text}
        for key, value in (
            ("author", author),
            ("author_id", author_id),
            ("message_id", message_id),
            ("mode", mode),
        ):
            if value is not None:
                body[key] = value
        return await self._call("POST", _chat_path(chat) + "/turn", json=body)

    async def reply(self, chat: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/reply`."""
        return await self._call("POST", _chat_path(chat) + "/reply", json=dict(body))

    async def search(self, chat: str, q: str, k: int = 3) -> list[dict[str, Any]]:
        """`GET /v1/chats/{chat}/search?q=&k=`."""
        data = await self._call("GET", _chat_path(chat) + "/search", params={"q": q, "k": str(k)})
        return list(data.get("results") or [])

    async def facts(self, chat: str, history: bool = False, kind: str | None = None) -> list[dict[str, Any]]:
        """`GET /v1/chats/{chat}/facts[?history=1][&kind=]`."""
        params = ({"history": "1"} if history else {}) | ({"kind": kind} if kind else {})
        data = await self._call("GET", _chat_path(chat) + "/facts", params=params or None)
        return list(data.get("facts") or [])

    async def summary(self, chat: str) -> dict[str, Any]:
        """`GET /v1/chats/{chat}/summary`."""
        return await self._call("GET", _chat_path(chat) + "/summary")

    async def usage(self, chat: str, author_id: str | None = None) -> dict[str, Any]:
        """`GET /v1/chats/{chat}/usage[?author_id=]`."""
        params = {"author_id": author_id} if author_id else None
        return await self._call("GET", _chat_path(chat) + "/usage", params=params)

    async def stats(self, chat: str) -> dict[str, Any]:
        """`GET /v1/chats/{chat}/stats`."""
        return await self._call("GET", _chat_path(chat) + "/stats")

    async def set_mode(self, chat: str, mode: str) -> dict[str, Any]:
        """`PUT /v1/chats/{chat}/settings`."""
        return await self._call("PUT", _chat_path(chat) + "/settings", json={"mode": mode})

    async def settings(self, chat: str) -> dict[str, Any]:
        """`GET /v1/chats/{chat}/settings`."""
        return await self._call("GET", _chat_path(chat) + "/settings")

    async def set_persona(self, chat: str, persona: str) -> dict[str, Any]:
        """`PUT /v1/chats/{chat}/settings` with `persona`."""
        return await self._call("PUT", _chat_path(chat) + "/settings", json={"persona": persona})

    async def compact(self, chat: str) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/compact`."""
        return await self._call("POST", _chat_path(chat) + "/compact")

    async def import_messages(self, chat: str, messages: list[Mapping[str, Any]]) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/import`."""
        return await self._call(
            "POST", _chat_path(chat) + "/import", json={"messages": [dict(m) for m in messages]}
        )

    async def forget_author(self, chat: str, author_id: str) -> dict[str, Any]:
        """`DELETE /v1/chats/{chat}/authors/{author_id}`."""
        return await self._call("DELETE", _chat_path(chat) + "/authors/" + _segment(author_id))

    async def forget_chat(self, chat: str) -> dict[str, Any]:
        """`DELETE /v1/chats/{chat}`."""
        return await self._call("DELETE", _chat_path(chat))

    async def export_page(
        self, chat: str, author_id: str | None = None, after: int | None = None, upto: int | None = None
    ) -> dict[str, Any]:
        """`GET /v1/chats/{chat}/export[?author_id=&after=&upto=]`."""
        given = (("author_id", author_id), ("after", after), ("upto", upto))
        params = {k: str(v) for k, v in given if v is not None}
        return await self._call("GET", _chat_path(chat) + "/export", params=params or None)

    async def add_note(self, chat: str, text: str, author: str, author_id: str) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/notes`."""
        body = {"text": text, "author": author, "author_id": author_id}
        return await self._call("POST", _chat_path(chat) + "/notes", json=body)

    async def notes(self, chat: str) -> list[dict[str, Any]]:
        """`GET /v1/chats/{chat}/notes`."""
        data = await self._call("GET", _chat_path(chat) + "/notes")
        return list(data.get("notes") or [])

    async def forget_fact(self, chat: str, fact_id: int, author_id: str | None = None) -> dict[str, Any]:
        """`DELETE /v1/chats/{chat}/facts/{fact_id}[?author_id=]`."""
        params = {"author_id": author_id} if author_id is not None else None
        # Here 404 (no such current fact) and 403 (not theirs) are answers about the fact itself.
        return await self._call(
            "DELETE", _chat_path(chat) + f"/facts/{int(fact_id)}", params=params, refusals=_FACT_ANSWERS
        )

    async def start_topic(self, chat: str) -> dict[str, Any]:
        """`POST /v1/chats/{chat}/topic`."""
        return await self._call("POST", _chat_path(chat) + "/topic")


def _error_of(data: Any, body: bytes) -> str:
    if isinstance(data, dict) and "error" in data:
        return str(data["error"])[:200]
    if data is not None:
        return str(data)[:200]
    return body[:200].decode("utf-8", "replace")
