"""The chat memory engine: pure Python, standard library only, runs in CPython and Pyodide."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import ChatMemory
    from .http_api import Operation, execute, parse
    from .http_base import Request, Response
    from .storage import SqlStorage

# Imported when first asked for: a host takes connections and answers /health before it
# loads the engine (a restart after a crash is that much shorter), and a module that needs one
# constant (`memory_engine.settings`, `memory_engine.backoff`) does not load the rest.
_WHERE = {
    "ChatMemory": "engine",
    "Operation": "http_api",
    "Request": "http_base",
    "Response": "http_base",
    "SqlStorage": "storage",
    "execute": "http_api",
    "parse": "http_api",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)


__all__ = ["ChatMemory", "Operation", "Request", "Response", "SqlStorage", "execute", "parse"]
