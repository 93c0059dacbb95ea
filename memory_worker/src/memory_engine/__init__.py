"""The chat memory engine: pure Python, standard library only, runs in CPython and Pyodide."""

from .engine import ChatMemory
from .http_api import Operation, Request, Response, execute, parse
from .storage import SqlStorage

__all__ = ["ChatMemory", "Operation", "Request", "Response", "SqlStorage", "execute", "parse"]
