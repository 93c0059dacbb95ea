"""The outbox: records the memory worker could not take yet, kept in SQLite until replayed.

Turns and replies that fail with `MemoryUnavailable` land here in arrival order. `flush`
sends them again, oldest first, each with its `message_id`, so a record the worker did get
(the answer was lost on the way back) is acknowledged and not stored twice. A record the
worker refuses (4xx) is moved aside (`dead` table) instead of blocking the queue forever.

Forgetting covers the outbox: `forget` drops what waits of a person (their turns and the
answers to them) or of a whole chat, and leaves a tombstone in the same file, so a record
made before the forget can never be replayed, also after a restart or when it arrives late.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypedDict, cast

from bot.chat.memory.client import MemoryClient, MemoryRefused, MemoryUnavailable
from memory_engine.api import wire

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chat TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('turn', 'reply')),
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS dead (
    id INTEGER PRIMARY KEY,
    chat TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    error TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS forgotten (
    chat TEXT NOT NULL,
    author_id TEXT NOT NULL,  -- '' for the whole chat
    at REAL NOT NULL,
    PRIMARY KEY (chat, author_id)
);
"""
# A record is a person's when they wrote it or it answers them (reply bodies carry both).
_THEIRS = (
    "chat = ? AND (? = '' OR json_extract(body, '$.author_id') = ? "
    "OR json_extract(body, '$.reply_to_author_id') = ?)"
)


Kind = Literal["turn", "reply"]
Body = wire.TurnRequest | wire.ReplyRequest  # a "turn" record's, a "reply" record's


class DeadRecord(TypedDict):
    """A record the worker refused, moved aside with its error."""

    chat: str
    kind: Kind
    body: Body
    error: str


class Outbox:
    """A durable FIFO of undelivered memory records (one SQLite file under the data folder)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.clock = clock
        # What people said waits here: the owner's alone (SQLite gives the WAL the same mode).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        # One connection, used from the event loop thread only; statements are tiny.
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA secure_delete=ON")  # what is forgotten leaves the file's bytes
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = asyncio.Lock()
        self._pending = self._count()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def _count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def __len__(self) -> int:
        return self._pending

    def pending_for(self, chat: str) -> int:
        """How many records of one chat wait to be delivered."""
        if not self._pending:
            return 0
        return int(self._db.execute("SELECT COUNT(*) FROM outbox WHERE chat = ?", (chat,)).fetchone()[0])

    def add(self, chat: str, kind: Kind, body: Body, made: float | None = None) -> None:
        """Keep one record for later delivery (committed before returning); one `made` before
        a forget of its person or chat is dropped instead."""
        made = self.clock() if made is None else made
        if self._forgotten(chat, body, made):
            return
        self._db.execute(
            "INSERT INTO outbox (chat, kind, body, created_at) VALUES (?, ?, ?, ?)",
            (chat, kind, json.dumps(body, ensure_ascii=False), made),
        )
        self._pending += 1

    def _forgotten(self, chat: str, body: Body, made: float) -> bool:
        people = {"", str(body.get("author_id") or ""), str(body.get("reply_to_author_id") or "")}
        marks = ",".join("?" * len(people))
        row = self._db.execute(
            f"SELECT 1 FROM forgotten WHERE chat = ? AND author_id IN ({marks}) AND at >= ?",
            (chat, *people, made),
        ).fetchone()
        return row is not None

    async def forget(self, chat: str, author_id: str = "") -> int:
        """Drop what waits of one person in a chat (or of the whole chat) and remember the
        forget; how many records went. Waits for a replay in progress, so the caller can
        forget in the worker afterwards knowing nothing of them is still on its way."""
        async with self._lock:
            binds = (chat, author_id, author_id, author_id)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                gone = self._db.execute(f"DELETE FROM outbox WHERE {_THEIRS}", binds).rowcount
                self._db.execute(f"DELETE FROM dead WHERE {_THEIRS}", binds)
                self._db.execute(
                    "INSERT OR REPLACE INTO forgotten (chat, author_id, at) VALUES (?, ?, ?)",
                    (chat, author_id, self.clock()),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL held the deleted text too
            self._pending = self._count()
            return int(gone)

    def dead(self) -> list[DeadRecord]:
        """Records the worker refused (kept for a human to look at)."""
        rows = self._db.execute("SELECT chat, kind, body, error FROM dead ORDER BY id").fetchall()
        return [{"chat": c, "kind": k, "body": json.loads(b), "error": e} for c, k, b, e in rows]

    async def flush(self, memory: MemoryClient) -> int:
        """Replay records oldest first until done or the worker is unavailable; how many were delivered."""
        if not self._pending:
            return 0
        delivered = 0
        async with self._lock:  # one replay at a time keeps the order
            while True:
                row = self._db.execute(
                    "SELECT id, chat, kind, body, created_at FROM outbox ORDER BY id LIMIT 1"
                ).fetchone()
                if row is None:
                    break
                rid, chat, kind, body_text, made = row
                body: Body = json.loads(body_text)
                if self._forgotten(chat, body, made):  # belt and braces: forget deletes them
                    self._db.execute("DELETE FROM outbox WHERE id = ?", (rid,))
                    self._pending -= 1
                    continue
                try:
                    if kind == "turn":
                        turn = cast("wire.TurnRequest", body)  # the kind column says which
                        await memory.turn(
                            chat,
                            turn["text"],
                            author=turn.get("author"),
                            author_id=turn.get("author_id"),
                            message_id=turn.get("message_id"),
                            title=turn.get("title"),
                        )
                    else:
                        await memory.reply(chat, cast("wire.ReplyRequest", body))
                except MemoryUnavailable:
                    self._db.execute("UPDATE outbox SET attempts = attempts + 1 WHERE id = ?", (rid,))
                    break
                except MemoryRefused as exc:
                    log.warning("outbox record %s for %s refused: %s", kind, chat, exc.error)
                    self._db.execute(
                        "INSERT INTO dead (id, chat, kind, body, created_at, error) "
                        "SELECT id, chat, kind, body, created_at, ? FROM outbox WHERE id = ?",
                        (exc.error, rid),
                    )
                    delivered -= 1  # moved aside, not delivered
                self._db.execute("DELETE FROM outbox WHERE id = ?", (rid,))
                self._pending -= 1
                delivered += 1
        return delivered
