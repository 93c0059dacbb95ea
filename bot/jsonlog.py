"""The one JSON log line format of the bot and the memory host (standard library only).

One object per line: `ts` (ISO-8601 UTC, milliseconds), `level` (lower case), `logger`, `msg`,
then `chat` and `request_id` when the line belongs to a handled message or request, then the
record's own `fields` (a dict passed as `extra={"fields": {...}}`), then `exc` with the
traceback. The memory host imports this module too (it pulls in nothing else of the bot).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        # The bot's request context (bot/router/logs.py sets these on every record it sees).
        for attr, key in (("bot_chat", "chat"), ("bot_request", "request_id")):
            value = getattr(record, attr, "")
            if value:
                out[key] = value
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            # exc_text may already be set, and redacted, by a record factory: prefer it.
            out["exc"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)
