"""The chat memory engine: pure Python, standard library only, runs in CPython and Pyodide."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_engine.lazy import lazy_exports

if TYPE_CHECKING:
    from memory_engine.api.http import Operation, execute, parse
    from memory_engine.api.http_types import Request, Response
    from memory_engine.engine import ChatMemory
    from memory_engine.storage import SqlStorage

# Imported when first asked for: a host takes connections and answers /health before it
# loads the engine (a restart after a crash is that much shorter), and a module that needs one
# constant (`memory_engine.settings`, `memory_engine.backoff`) does not load the rest.
_WHERE = {
    "ChatMemory": "engine",
    "Operation": "api.http",
    "Request": "api.http_types",
    "Response": "api.http_types",
    "SqlStorage": "storage",
    "execute": "api.http",
    "parse": "api.http",
}


__getattr__ = lazy_exports(__name__, _WHERE)


__all__ = ["ChatMemory", "Operation", "Request", "Response", "SqlStorage", "execute", "parse"]
