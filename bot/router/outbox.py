"""The outbox: records the memory worker could not take yet, kept in SQLite until replayed.

Turns and replies that fail with `MemoryUnavailable` land here in arrival order. `flush`
sends them again, oldest first, each with its `message_id`, so a record the worker did get
(the answer was lost on the way back) is acknowledged and not stored twice. A record the
worker refuses (4xx) is moved aside (`dead` table) instead of blocking the queue forever.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from bot.router.memory import MemoryClient, MemoryRefused, MemoryUnavailable

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
"""


class Outbox:
    """A durable FIFO of undelivered memory records (one SQLite file under the data folder)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, used from the event loop thread only; statements are tiny.
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
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

    def add(self, chat: str, kind: str, body: dict[str, Any]) -> None:
        """Keep one record for later delivery (committed before returning)."""
        self._db.execute(
            "INSERT INTO outbox (chat, kind, body, created_at) VALUES (?, ?, ?, ?)",
            (chat, kind, json.dumps(body, ensure_ascii=False), time.time()),
        )
        self._pending += 1

    def dead(self) -> list[dict[str, Any]]:
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
                    "SELECT id, chat, kind, body FROM outbox ORDER BY id LIMIT 1"
                ).fetchone()
                if row is None:
                    break
                rid, chat, kind, body_text = row
                body = json.loads(body_text)
                try:
                    if kind == "turn":
                        await memory.turn(
                            chat,
                            body["text"],
                            author=body.get("author"),
                            author_id=body.get("author_id"),
                            message_id=body.get("message_id"),
                        )
                    else:
                        await memory.reply(chat, body)
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
