"""`AlarmTable`: every chat's pending compaction alarm, persisted so a restart runs them."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from memory_worker.local.storage import SqliteStorage

ALARMS_SCHEMA = "CREATE TABLE IF NOT EXISTS alarms (chat_key TEXT PRIMARY KEY, due_ms INTEGER NOT NULL)"


class AlarmTable:
    """Pending compaction alarms of every chat, persisted so a restart runs them."""

    def __init__(self, data_dir: Path):
        self.storage = SqliteStorage(Path(data_dir) / "alarms.sqlite3")
        self.storage.exec(ALARMS_SCHEMA)

    def set(self, chat_key: str, due_ms: int, keep_earlier: bool = False) -> None:
        """Schedule the chat's alarm at `due_ms` (with keep_earlier, never postpone one)."""
        update = "MIN(due_ms, excluded.due_ms)" if keep_earlier else "excluded.due_ms"
        self.storage.exec(
            "INSERT INTO alarms(chat_key, due_ms) VALUES (?, ?) "
            f"ON CONFLICT(chat_key) DO UPDATE SET due_ms = {update}",
            chat_key,
            due_ms,
        )

    def has(self, chat_key: str) -> bool:
        """True when the chat has a pending alarm."""
        return bool(self.storage.exec("SELECT 1 AS x FROM alarms WHERE chat_key = ?", chat_key))

    def delete(self, chat_key: str) -> None:
        """Drop the chat's alarm."""
        self.storage.exec("DELETE FROM alarms WHERE chat_key = ?", chat_key)

    def due(self, now_ms: int, exclude: Collection[str], limit: int) -> list[str]:
        """Chats whose alarm is due, earliest first."""
        rows = self.storage.exec(
            "SELECT chat_key FROM alarms WHERE due_ms <= ? ORDER BY due_ms LIMIT ?",
            now_ms,
            limit + len(exclude),
        )
        return [r["chat_key"] for r in rows if r["chat_key"] not in exclude][:limit]

    def next_due(self, exclude: Collection[str]) -> int | None:
        """The earliest due time in ms among chats not in `exclude`."""
        rows = self.storage.exec(
            "SELECT chat_key, due_ms FROM alarms ORDER BY due_ms LIMIT ?", len(exclude) + 1
        )
        return next((r["due_ms"] for r in rows if r["chat_key"] not in exclude), None)

    def count(self) -> int:
        """How many chats have a pending alarm."""
        return int(self.storage.exec("SELECT COUNT(*) AS n FROM alarms")[0]["n"])

    def close(self) -> None:
        """Checkpoint and close."""
        self.storage.close()
