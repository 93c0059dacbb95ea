"""The memory worker in process: the real engine over in-memory SQLite behind `MemoryClient`.

For pipeline and command tests, where the HTTP host, its SQLite files and its background
compaction add time and nothing to what is tested. Every call still goes through the
engine's own `parse` and `execute` (the token, the route, every check) and its answer
through a JSON round trip and `answer_of`, so a refusal raises `MemoryRefused` exactly as
over HTTP. Nothing compacts in the background (as a host whose alarm has not fired yet);
`POST .../compact` compacts with the offline summarizer. The contract and end-to-end tests
keep the real hosts (tests/support/backends.py); `TEST_MEMORY=host` puts every pipeline test
back on the real host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

from bot.chat.memory.client import MemoryClient, Query, answer_of, route_path
from memory_engine import ChatMemory, Request, Response, execute, parse
from memory_engine.api.operations import kind
from memory_engine.api.routes import Route
from memory_engine.compaction.compact import offline_summarize
from memory_worker.local import SqliteStorage

B = TypeVar("B")
R = TypeVar("R")
TOKEN = "in-process-memory-token"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class InProcessMemory(MemoryClient):
    """`MemoryClient` over the engine in this process: one in-memory SQLite database per chat."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or _utc_now
        self.chats: dict[str, ChatMemory] = {}
        self._storage: dict[str, SqliteStorage] = {}
        self.calls: list[tuple[str, str]] = []  # (operation, chat key), in order

    async def __aenter__(self) -> InProcessMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for storage in self._storage.values():
            storage.close()
        self.chats.clear()
        self._storage.clear()

    def memory(self, chat: str) -> ChatMemory:
        """The chat's engine (created empty on first use)."""
        if chat not in self.chats:
            self._storage[chat] = SqliteStorage(":memory:")
            self.chats[chat] = ChatMemory(self._storage[chat], clock=self.clock)
        return self.chats[chat]

    async def call(
        self,
        route: Route[B, R],
        chat: str | None = None,
        *,
        body: B | None = None,
        query: Query | None = None,
        path: Mapping[str, str | int] | None = None,
    ) -> R:
        """Run one route through the engine's parse and execute; its answer as over HTTP."""
        params = urlencode({k: str(v) for k, v in (query or {}).items() if v is not None})
        raw = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"authorization": f"Bearer {TOKEN}"}
        op = parse(Request(route.method, route_path(route, chat, path), params, headers, raw), TOKEN)
        if isinstance(op, Response):
            return self._answer(route, op)
        self.calls.append((op.name, op.chat_key))
        effects = kind(op.name)
        if effects.forgets and op.chat_key not in self.chats:  # as the host: nothing to forget
            return self._answer(route, Response(200, {"deleted": False}))
        if effects.read_only and op.chat_key not in self.chats:
            memory = ChatMemory(SqliteStorage(":memory:"), clock=self.clock)  # nothing is created
        else:
            memory = self.memory(op.chat_key)
        answer = await execute(op, memory, offline_summarize)
        if answer.status == 200 and effects.erases_chat:
            del self.chats[op.chat_key]
            self._storage.pop(op.chat_key).close()
        return self._answer(route, answer)

    @staticmethod
    def _answer(route: Route[Any, R], answer: Response) -> R:
        data = json.loads(answer.body())  # exactly what would cross the wire
        return answer_of(route, answer.status, data)
