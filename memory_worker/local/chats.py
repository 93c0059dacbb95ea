"""`ChatStore`: one database per chat key, a bounded LRU of open ones, one lock per chat."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from memory_worker.local.storage import ServeLock, SqliteStorage, private_folder

if TYPE_CHECKING:  # imported by the first open: the host listens before it loads the engine
    from memory_engine.api.wire import Message
    from memory_engine.compaction.compact import Summarize
    from memory_engine.engine import ChatMemory

MAX_OPEN_CHATS = 256
T = TypeVar("T")
# The directory of chats (the dashboard's, `memory_engine.dashboard.directory.DIRECTORY_KEY`):
# its own file beside the chats, not one of them (backups, counts and scans of chats/ skip it).
DIRECTORY_KEY = "@directory"
DIRECTORY_FILE = "directory.db"


@dataclass
class _OpenChat:
    memory: ChatMemory
    storage: SqliteStorage


def chat_file(chat_key: str) -> Path:
    """Where a chat's database lives under DIR (`chats/ab/abcd....sqlite3`)."""
    digest = hashlib.sha256(chat_key.encode("utf-8")).hexdigest()[:40]
    return Path("chats") / digest[:2] / f"{digest}.sqlite3"


class ChatStore:
    """One database per chat key under DIR, a bounded LRU of open ones, a lock per chat.

    Like a Durable Object, a chat runs one request at a time (`lock`); chats run in parallel.
    """

    def __init__(
        self,
        data_dir: Path,
        max_open: int = MAX_OPEN_CHATS,
        retention: int | None = None,
        clock: Callable[[], datetime] | None = None,  # tests: the engine's UTC clock (days of usage)
    ):
        self.data_dir = Path(data_dir)
        self.clock = clock
        private_folder(self.data_dir)
        private_folder(self.data_dir / "chats")
        # Held while this store may have databases open: one writer of DIR at a time (a second
        # host, an import, a restore are refused meanwhile). Raises FolderInUse.
        self.serving: ServeLock | None = ServeLock(self.data_dir)
        self.max_open = max_open
        self.retention = retention
        self.max_pages: int | None = None  # see limit_pages
        self._open: OrderedDict[str, _OpenChat] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: Counter[str] = Counter()
        self._pins: Counter[str] = Counter()  # chats with a compaction in flight stay open
        self._empty: ChatMemory | None = None

    @property
    def open_count(self) -> int:
        """How many chat databases are open now (the directory of chats is not one)."""
        return len(self._open) - (DIRECTORY_KEY in self._open)

    def limit_pages(self, max_pages: int | None) -> None:
        """Cap every chat database at `max_pages` pages (None: no cap): a disk-full switch, a quota."""
        self.max_pages = max_pages
        for chat in self._open.values():
            chat.storage.limit_pages(max_pages)

    def path_for(self, chat_key: str) -> Path:
        """The chat's database file: named by a hash, so no key can escape DIR or collide by case."""
        if chat_key == DIRECTORY_KEY:
            return self.data_dir / DIRECTORY_FILE
        return self.data_dir / chat_file(chat_key)

    def exists(self, chat_key: str) -> bool:
        """True when the chat has a database."""
        return chat_key in self._open or self.path_for(chat_key).exists()

    def open(self, chat_key: str) -> ChatMemory:
        """The chat's memory, opening (and creating) its database when needed."""
        chat = self._open.get(chat_key)
        if chat is not None:
            self._open.move_to_end(chat_key)
            return chat.memory
        from memory_engine.engine import ChatMemory

        path = self.path_for(chat_key)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        storage = SqliteStorage(path)
        try:
            if self.max_pages is not None:
                storage.limit_pages(self.max_pages)
            memory = ChatMemory(storage, clock=self.clock, retention=self.retention)
            memory.record_chat_key(chat_key)
        except BaseException:
            storage.conn.close()  # a failed open (disk full) must not leak a connection
            raise
        self._open[chat_key] = _OpenChat(memory, storage)
        for old_key in list(self._open):
            if len(self._open) <= self.max_open:
                break
            # Not a chat in use: one whose request runs in a worker thread, or waits its turn.
            if not self._pins[old_key] and not self._lock_users[old_key] and old_key != chat_key:
                self._open.pop(old_key).storage.close()
        return memory

    def empty(self) -> ChatMemory:
        """A read-only stand-in for a chat that has no database: reads answer empty."""
        if self._empty is None:
            from memory_engine.engine import ChatMemory

            self._empty = ChatMemory(SqliteStorage(":memory:"))
        return self._empty

    def checkpoint(self, chat_key: str) -> bool:
        """Empty the open chat's WAL into its file (after a forget: no old page stays in the WAL)."""
        chat = self._open.get(chat_key)
        return chat is not None and chat.storage.checkpoint()

    def remove(self, chat_key: str) -> None:
        """Close the chat's database and delete its files."""
        chat = self._open.pop(chat_key, None)
        if chat is not None:
            chat.storage.conn.close()
        path = self.path_for(chat_key)
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)

    @contextmanager
    def pinned(self, chat_key: str) -> Iterator[None]:
        """Keep the chat's database open while the block runs (a compaction holds it across awaits)."""
        self._pins[chat_key] += 1
        try:
            yield
        finally:
            self._pins[chat_key] -= 1
            if not self._pins[chat_key]:
                del self._pins[chat_key]

    @asynccontextmanager
    async def lock(self, chat_key: str) -> AsyncIterator[None]:
        """One request at a time per chat key, in arrival order."""
        lock = self._locks.setdefault(chat_key, asyncio.Lock())
        self._lock_users[chat_key] += 1
        try:
            async with lock:
                yield
        finally:
            self._lock_users[chat_key] -= 1
            if not self._lock_users[chat_key]:
                del self._lock_users[chat_key]
                del self._locks[chat_key]

    def unlocked_while(self, chat_key: str, summarize: Summarize) -> Summarize:
        """`summarize`, called with the chat's lock (held by the caller) let go meanwhile.

        A compaction reads and writes the chat under its lock, like every request, and lets
        the chat's turns in while it waits on the model: as a Durable Object's input gate
        opens while it awaits a fetch, and no more. The lock is held again when it returns."""

        async def summarize_unlocked(previous: str, rows: list[Message]) -> str:
            lock = self._locks[chat_key]
            lock.release()
            try:
                return await summarize(previous, rows)
            finally:
                await _hold_again(lock)

        return summarize_unlocked

    def close(self) -> None:
        """Checkpoint and close every open database."""
        while self._open:
            _, chat = self._open.popitem()
            chat.storage.close()
        if self.serving is not None:
            self.serving.release()
            self.serving = None


async def _hold_again(lock: asyncio.Lock) -> None:
    """Acquire `lock` again, even when cancelled meanwhile (the caller's `async with` releases it
    on the way out; then the cancellation goes on)."""
    await uncancelled(asyncio.ensure_future(lock.acquire()))


async def uncancelled(future: asyncio.Future[T]) -> T:
    """`future`'s result, waited for to the end even when the caller is cancelled meanwhile (then
    CancelledError once it is done): a chat's lock is never let go while its work still runs."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return future.result()
