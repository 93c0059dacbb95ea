"""The HTTP API's transport-neutral request and answer, and the constants a host reads per request.

Kept apart from `api.http` (which loads the route table and with it the whole engine) so a
host can take connections and answer `GET /health` before the engine is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["CHAT_KEY", "JSON_HEADERS", "VERSION", "Request", "Response", "request_of"]

VERSION = "1"
CHAT_KEY = re.compile(r"^[A-Za-z0-9:_\-.]{1,128}\Z")  # \Z: `$` would let a trailing "\n" in
JSON_HEADERS = {"content-type": "application/json; charset=utf-8"}


@dataclass(frozen=True)
class Request:
    """A transport-neutral HTTP request: raw (percent-encoded) path and query."""

    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


def request_of(method: str, url: str, authorization: str | None, body: bytes = b"") -> Request:
    """A request from the parts the engine reads: method, URL, the Authorization header, body."""
    parts = urlsplit(url)
    headers = {} if authorization is None else {"authorization": authorization}
    return Request(method, parts.path or "/", parts.query, headers, body)


@dataclass(frozen=True)
class Response:
    """A JSON answer."""

    status: int
    payload: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)  # beyond the JSON ones (a 405's Allow)

    def body(self) -> bytes:
        """The payload as UTF-8 JSON."""
        return json.dumps(self.payload, ensure_ascii=False).encode("utf-8")
