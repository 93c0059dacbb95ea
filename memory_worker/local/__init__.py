"""The local memory host: the memory engine on CPython's sqlite3, serving the HTTP API v1.

It gives the same guarantees as a Durable Object: one SQLite database per chat key, one
request at a time per chat key (many chats in parallel), and writes that survive a
`kill -9` once acknowledged. A bounded number of chat databases stay open, least recently
used closed first, with their WAL checkpointed on close.

- `storage`: `SqliteStorage`, the engine's storage interface over one sqlite3 file
- `chats`: `ChatStore`, the database per chat, the LRU of open ones, the lock per chat
- `alarms`: `AlarmTable`, the persisted compaction alarms
- `scheduler`: `CompactionScheduler`, the alarm loop (the Durable Object's `alarm()`)
- `health`: the storage state `GET /health` reports
- `server`: `MemoryHost`, the HTTP server, access logs and drain
- `logs`: the JSON log lines
- `embedded`: `EmbeddedMemoryHost`, the host inside the caller's event loop
- `cli`: `serve_forever`, `chatbot memory serve`
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_engine.lazy import lazy_exports

if TYPE_CHECKING:
    from memory_worker.local.alarms import AlarmTable
    from memory_worker.local.chats import ChatStore
    from memory_worker.local.cli import serve_forever
    from memory_worker.local.embedded import EmbeddedMemoryHost
    from memory_worker.local.logs import JsonLogFormatter
    from memory_worker.local.server import MemoryHost
    from memory_worker.local.storage import SqliteStorage

# Imported when first asked for: `bot.jsonlog` needs only `logs`, and `chatbot memory serve`
# must not pay for what it does not use before it answers /health.
_WHERE = {
    "AlarmTable": "alarms",
    "ChatStore": "chats",
    "serve_forever": "cli",
    "EmbeddedMemoryHost": "embedded",
    "JsonLogFormatter": "logs",
    "MemoryHost": "server",
    "SqliteStorage": "storage",
}


__getattr__ = lazy_exports(__name__, _WHERE)


__all__ = [
    "AlarmTable",
    "ChatStore",
    "EmbeddedMemoryHost",
    "JsonLogFormatter",
    "MemoryHost",
    "SqliteStorage",
    "serve_forever",
]
