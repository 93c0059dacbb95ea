"""`SqliteStorage`: the engine's `SqlStorage` over one sqlite3 database file; `ServeLock`, the
lock every writer of a memory folder holds (a host while it serves, a restore while it swaps)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from memory_engine.errors import MemoryEngineError

T = TypeVar("T")

SQLITE_MAX_PAGES = 1073741823  # SQLite's default max_page_count: "no limit"


def private_file(path: str | Path) -> None:
    """Create `path` readable by its owner alone (0600), or tighten it if it is looser: a chat's
    database holds what people said. SQLite gives its -wal and -shm files the same mode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def private_folder(path: Path) -> None:
    """`path` and its missing parents created 0700; `path` itself tightened if looser."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def _dict_row(cursor: sqlite3.Cursor, row: tuple) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


class SqliteStorage:
    """`SqlStorage` over one sqlite3 database file (WAL, autocommit outside transactions).

    Deleted rows are overwritten in the file (`secure_delete`), not only unlinked from the
    b-tree: what someone asks to forget must not stay readable in the database's free pages.
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path != ":memory:":
            private_file(self.path)
        # 32 cached statements, not sqlite3's 128: prepared FTS5 statements dominate an open
        # chat's memory (0.77 MiB -> 0.45 MiB per open chat, measured; turn latency unchanged).
        # check_same_thread=False: the host may hand the connection to a worker thread, always
        # under the chat's lock, so one thread at a time uses it.
        self.conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=32
        )
        self.conn.row_factory = _dict_row
        if self.path != ":memory:":
            self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a process crash loses nothing committed; only a power cut can.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=5000")
        self.conn.execute("PRAGMA secure_delete=ON")

    def exec(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Run one statement; rows as dicts."""
        return self.conn.execute(query, params).fetchall()

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement; rows as tuples (no dict per row: the engine's hot paths)."""
        cursor = self.conn.cursor()
        cursor.row_factory = None
        return cursor.execute(query, params).fetchall()

    def many(self, query: str, rows: list[tuple[Any, ...]]) -> None:
        """Run one statement once per row of values (an import's rows: no JSON to write and parse)."""
        self.conn.executemany(query, rows)

    def transaction(self, fn: Callable[[], T]) -> T:
        """Run `fn` inside BEGIN IMMEDIATE ... COMMIT (nested calls join the outer one)."""
        if self.conn.in_transaction:
            return fn()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn()
        except BaseException:
            # SQLite rolls back by itself on some errors (SQLITE_FULL, I/O): a second
            # ROLLBACK would raise and hide the error that says what went wrong.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return result

    def limit_pages(self, max_pages: int | None) -> None:
        """Cap the database at `max_pages` pages (None: SQLite's own limit)."""
        self.conn.execute(f"PRAGMA max_page_count = {int(max_pages or SQLITE_MAX_PAGES)}")

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file and empty it; False when that could not be done.

        After a forget, the WAL still holds the old pages' bytes until this runs.
        """
        try:
            row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            return False  # a checkpoint is an optimisation; the WAL stays valid without it
        return bool(row) and not row["busy"]

    def close(self) -> None:
        """Checkpoint the WAL into the database file and close."""
        self.checkpoint()
        self.conn.close()


SERVE_LOCK = ".serving.lock"


class FolderInUse(MemoryEngineError, RuntimeError):
    """Another process holds the folder's serve lock; the message names it and what to do."""


def _this_process() -> str:
    """How the lock file names its holder: the pid and the command (`chatbot memory serve`)."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"]
    words += [w for w in sys.argv[1:3] if not w.startswith("-")]
    return f"pid {os.getpid()}, {' '.join(words)}"


class ServeLock:
    """`flock` on DIR/.serving.lock, exclusive: one writer of a memory folder at a time.

    Every writer takes it: a host serving DIR (`chatbot memory serve`, the embedded host of
    `chatbot chat` and `chatbot import`, the Pyodide host) and `chatbot memory restore`. Two
    hosts on one folder would each migrate and write the same databases behind the other's
    back. The holder writes its pid and command into the file, so a refusal names it. The
    kernel drops the lock when the process ends, however it ends: no stale lock to clean up.
    """

    def __init__(self, data_dir: Path, holder: str | None = None):
        path = Path(data_dir) / SERVE_LOCK
        self.fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = os.read(self.fd, 512).decode("utf-8", "replace").strip()
            os.close(self.fd)
            self.fd = None
            who = f" ({_printable(held_by)})" if held_by else ""
            raise FolderInUse(
                f"the memory folder {data_dir} is in use by another chatbot process{who}: "
                "stop it first, or point this one at its API (MEMORY_URL)"
            ) from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, (holder or _this_process()).encode("utf-8") + b"\n", 0)

    def release(self) -> None:
        """Let go of the lock (closing the file drops it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.release()


def _printable(text: str) -> str:
    """The holder's line as the refusal prints it: no control characters (a terminal's escapes)."""
    return "".join(c for c in text if c.isprintable())[:200]
