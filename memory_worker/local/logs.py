"""The memory host's JSON log lines, with the field names of the bot's (`bot/router/logs.py`).

One JSON object per line: `time`, `level`, `logger`, `message`, then `chat_key` and
`request_id` when the record has them, the record's other `fields`, and `error` (the
traceback) last. When the bot's formatter becomes the shared one, the host switches by
changing the import in `configure`.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

# The host's own loggers and the libraries it runs on; httpx logs every summarizer call at
# INFO, so only its warnings are worth a line.
LOGGERS = {"memory_worker": logging.INFO, "aiohttp": logging.INFO, "httpx": logging.WARNING}


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message and the record's `fields`."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """ISO-8601 UTC with milliseconds, as every stored timestamp."""
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        out: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["error"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure() -> None:
    """Send the host's logs to stderr as JSON lines (for `chatbot memory serve`)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter())
    for name, level in LOGGERS.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
        logger.setLevel(level)
