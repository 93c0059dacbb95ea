"""Old import path of the local host, which now lives in `memory_worker.local`.

Its last user is tests/test_retrieval_index.py (on the recall2 branch, still being edited):
once that imports `memory_worker.local`, delete this module. Nothing else may import it.
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
