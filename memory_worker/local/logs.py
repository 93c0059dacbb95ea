"""The JSON log line format, written once for the memory host and the bot (`bot/jsonlog.py`).

It lives here, beside the host, because the bot may import the local host but the host
never imports the bot.
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
    """One JSON object per log line, the one format of the bot and the memory host.

    `ts` (ISO-8601 UTC, milliseconds), `level` (lower case), `logger`, `msg`, then `chat` and
    `request_id` when the record belongs to a handled message or request, then the record's
    own `fields` (a dict passed as `extra={"fields": {...}}`), then `exc` with the traceback.
    """

    # The bot's request context (bot/chat/logs.py sets these attributes on its records).
    CONTEXT = (("bot_chat", "chat"), ("bot_request", "request_id"))

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """ISO-8601 UTC with milliseconds, as every stored timestamp."""
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        out: dict[str, Any] = {
            "ts": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for attr, key in self.CONTEXT:
            value = getattr(record, attr, "")
            if value:
                out[key] = value
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            # exc_text may already be set, and redacted, by a record factory: prefer it.
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
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
