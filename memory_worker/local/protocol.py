"""The log of aiohttp's HTTP protocol for the local host: a malformed request is one line.

A request aiohttp cannot parse (a NUL byte or a line break in a header, a bad request line)
never reaches the host's handler: aiohttp answers it 400 and logs the parse error with a
traceback, at error level, as if the server had failed. The client's mistake is one warning
line here; every other error aiohttp logs keeps its traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError


class ServerLog(logging.LoggerAdapter):
    """The logger aiohttp's request handler writes to (`web.Server(..., logger=ServerLog(log))`)."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        """aiohttp's failures; a request it could not parse is a warning without traceback."""
        err = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(err, HttpProcessingError):
            why = "".join(c if c.isprintable() else "?" for c in str(err.message))[:200]
            self.logger.warning("malformed HTTP request (answered 400): %s", why)
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        """The message as it is."""
        return msg, kwargs
