"""The bot's JSON log lines: the memory host's format, so both write one format."""

from memory_worker.local.logs import JsonLogFormatter as JsonFormatter

__all__ = ["JsonFormatter"]
