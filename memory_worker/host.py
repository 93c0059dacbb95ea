"""The local memory host: the memory engine on CPython's sqlite3, serving the HTTP API v1.

It gives the same guarantees as a Durable Object: one SQLite database per chat key, one
request at a time per chat key (many chats in parallel), and writes that survive a
`kill -9` once acknowledged. A bounded number of chat databases stay open, least recently
used closed first, with their WAL checkpointed on close.
"""
from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import os
import secrets
import signal
import sqlite3
import uuid
from collections import OrderedDict
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, TypeVar

from aiohttp import web

from memory_engine import ChatMemory, Request, Response, execute, parse

log = logging.getLogger("memory_worker.host")
T = TypeVar("T")

MAX_OPEN_CHATS = 256
READ_ONLY = {"search", "facts", "summary", "usage", "stats", "settings"}
FORGETTING = {"forget_chat", "forget_author"}


def _dict_row(cursor: sqlite3.Cursor, row: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row)}


class SqliteStorage:
    """`SqlStorage` over one sqlite3 database file (WAL, autocommit outside transactions)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = _dict_row
        if self.path != ":memory:":
            self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a process crash loses nothing committed; only a power cut can.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one statement; rows as dicts."""
        return self.conn.execute(query, params).fetchall()

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside BEGIN IMMEDIATE ... COMMIT (nested calls join the outer one)."""
        if self.conn.in_transaction:
            return fn()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn()
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return result

    def close(self) -> None:
        """Checkpoint the WAL into the database file and close."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # a checkpoint is an optimisation; the WAL stays valid without it
        self.conn.close()


class ChatStore:
    """One database per chat key under DIR, a bounded LRU of open ones, a lock per chat."""

    def __init__(self, data_dir: Path, max_open: int = MAX_OPEN_CHATS):
        self.data_dir = Path(data_dir)
        (self.data_dir / "chats").mkdir(parents=True, exist_ok=True)
        self.max_open = max_open
        self._open: OrderedDict[str, ChatMemory] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._empty: ChatMemory | None = None

    def path_for(self, chat_key: str) -> Path:
        """The chat's database file: named by a hash, so no key can escape DIR or collide by case."""
        digest = hashlib.sha256(chat_key.encode("utf-8")).hexdigest()[:40]
        return self.data_dir / "chats" / digest[:2] / f"{digest}.sqlite3"

    def exists(self, chat_key: str) -> bool:
        """True when the chat has a database."""
        return chat_key in self._open or self.path_for(chat_key).exists()

    def open(self, chat_key: str) -> ChatMemory:
        """The chat's memory, opening (and creating) its database when needed."""
        memory = self._open.get(chat_key)
        if memory is not None:
            self._open.move_to_end(chat_key)
            return memory
        path = self.path_for(chat_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        storage = SqliteStorage(path)
        memory = ChatMemory(storage)
        if memory._state("chat_key") is None:
            memory._set_state("chat_key", chat_key)
        self._open[chat_key] = memory
        while len(self._open) > self.max_open:
            _, old = self._open.popitem(last=False)
            old.sql.close()  # type: ignore[attr-defined]
        return memory

    def empty(self) -> ChatMemory:
        """A read-only stand-in for a chat that has no database: reads answer empty."""
        if self._empty is None:
            self._empty = ChatMemory(SqliteStorage(":memory:"))
        return self._empty

    def remove(self, chat_key: str) -> None:
        """Close the chat's database and delete its files."""
        memory = self._open.pop(chat_key, None)
        if memory is not None:
            memory.sql.conn.close()  # type: ignore[attr-defined]
        path = self.path_for(chat_key)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)

    @asynccontextmanager
    async def lock(self, chat_key: str) -> AsyncIterator[None]:
        """One request at a time per chat key, in arrival order."""
        lock = self._locks.setdefault(chat_key, asyncio.Lock())
        self._lock_users[chat_key] = self._lock_users.get(chat_key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[chat_key] -= 1
            if not self._lock_users[chat_key]:
                del self._lock_users[chat_key]
                del self._locks[chat_key]

    def close(self) -> None:
        """Checkpoint and close every open database."""
        while self._open:
            _, memory = self._open.popitem()
            memory.sql.close()  # type: ignore[attr-defined]


class MemoryHost:
    """Serves the HTTP API v1 over a ChatStore; the same `parse`/`execute` as the Worker."""

    def __init__(self, data_dir: Path, token: str, max_open: int = MAX_OPEN_CHATS):
        self.store = ChatStore(data_dir, max_open=max_open)
        self.token = token

    async def respond(self, req: Request) -> Response:
        """Answer one request."""
        op = parse(req, self.token)
        if isinstance(op, Response):
            return op
        async with self.store.lock(op.chat_key):
            if not self.store.exists(op.chat_key) and (op.name in READ_ONLY or op.name in FORGETTING):
                if op.name in FORGETTING:
                    return Response(200, {"deleted": False})
                return await execute(op, self.store.empty())
            memory = self.store.open(op.chat_key)
            response = await execute(op, memory)
            if op.name == "forget_chat":
                self.store.remove(op.chat_key)
            return response

    def app(self) -> web.Application:
        """The aiohttp application: one catch-all route into `respond`."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._web_handler)
        return app

    async def _web_handler(self, request: web.Request) -> web.Response:
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex[:12]
        path, _, query = request.raw_path.partition("?")
        try:
            body = await request.read()
            response = await self.respond(Request(
                request.method, path, query, dict(request.headers), body))
        except sqlite3.OperationalError as err:
            full = "full" in str(err).lower()
            log.error("storage error request_id=%s path=%s: %s", request_id, path, err)
            response = Response(507 if full else 503, {
                "error": "storage is full: nothing was recorded" if full
                else "storage is unavailable right now: nothing was recorded"})
        except Exception:
            log.exception("internal error request_id=%s path=%s", request_id, path)
            response = Response(500, {"error": "internal error"})
        return web.Response(status=response.status, body=response.body(),
                            headers={"content-type": "application/json; charset=utf-8",
                                     "x-request-id": request_id})

    def close(self) -> None:
        """Close every chat database."""
        self.store.close()


class EmbeddedMemoryHost:
    """The local host started inside the current event loop on 127.0.0.1 (a free port).

    `async with EmbeddedMemoryHost(dir) as host:` gives `host.url` and `host.token`.
    """

    def __init__(self, data_dir: Path, token: str | None = None, port: int = 0,
                 summarizer: Any = None, bind: str = "127.0.0.1"):
        self.data_dir = Path(data_dir)
        self.token = token or secrets.token_urlsafe(32)
        self.port = port
        self.bind = bind
        self.summarizer = summarizer
        self.host: MemoryHost | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> "EmbeddedMemoryHost":
        self.host = MemoryHost(self.data_dir, self.token)
        self._runner = web.AppRunner(self.host.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{'127.0.0.1' if self.bind in ('0.0.0.0', '::') else self.bind}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.host is not None:
            self.host.close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_forever(host: str, port: int, data_dir: Path) -> int:
    """`chatbot memory serve`: serve until SIGINT/SIGTERM; returns the exit code."""
    token = os.environ.get("MEMORY_API_TOKEN", "").strip()
    if not token:
        if not _is_loopback(host):
            print("refusing to serve on a non-loopback address without MEMORY_API_TOKEN")
            return 2
        token = secrets.token_urlsafe(32)
        print(f"MEMORY_API_TOKEN not set; generated one for this run: {token}", flush=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with EmbeddedMemoryHost(data_dir, token=token, port=port, bind=host):
            print(f"memory host serving {data_dir} on http://{host}:{port}", flush=True)
            await stop.wait()

    asyncio.run(run())
    return 0
