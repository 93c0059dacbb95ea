"""Old import path of the local host, which now lives in `memory_worker.local`.

Kept for code written against it (branches in flight); new code imports `memory_worker.local`.
"""

from memory_worker.local import (
    AlarmTable,
    ChatStore,
    EmbeddedMemoryHost,
    JsonLogFormatter,
    MemoryHost,
    SqliteStorage,
    serve_forever,
)

__all__ = [
    "AlarmTable",
    "ChatStore",
    "EmbeddedMemoryHost",
    "JsonLogFormatter",
    "MemoryHost",
    "SqliteStorage",
    "serve_forever",
]
