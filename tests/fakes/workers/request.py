"""Mirror of `workers/request.py` and the header helper of `workers/utils.py`."""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from http import HTTPMethod
from typing import Any

from tests.fakes.workers._js import JsException, JsHeaders, JsRequest


class HTTPMessageMapping(http.client.HTTPMessage, Mapping):
    """Headers as the SDK returns them: an `http.client.HTTPMessage` that is a Mapping."""


def _js_headers_to_http_message(js_headers: JsHeaders) -> HTTPMessageMapping:
    result = HTTPMessageMapping()
    for key, val in js_headers:
        result[key] = val.strip()
    return result


def _to_js_headers(headers: Any) -> JsHeaders:
    if isinstance(headers, (list, dict, JsHeaders)):
        return JsHeaders(headers)
    raise TypeError("Received unexpected type for headers argument")


def _is_js_instance(val: Any, name: str) -> bool:
    return hasattr(val, "constructor") and val.constructor.name == name


class Request:
    """A request: built from a JS Request, or from a URL and fetch options."""

    def __init__(self, input: Any, **other_options: Any):
        if _is_js_instance(input, "Request"):
            if other_options:
                raise ValueError("Expected no options when constructing Request from a js.Request")
            self._js_request = input
            return
        if isinstance(other_options.get("method"), HTTPMethod):
            other_options["method"] = other_options["method"].value
        if "headers" in other_options:
            other_options["headers"] = _to_js_headers(other_options["headers"])
        self._js_request = JsRequest.new(
            input._js_request if isinstance(input, Request) else input, **other_options
        )

    def __repr__(self) -> str:
        return f"Request(method={self._js_request.method!r}, url={self._js_request.url!r})"

    @property
    def js_object(self) -> JsRequest:
        """The JS Request."""
        return self._js_request

    @property
    def body(self) -> Any:
        """The JS ReadableStream (or None)."""
        return self.js_object.body

    @property
    def body_used(self) -> bool:
        """True once the body was read."""
        return self.js_object.bodyUsed

    @property
    def headers(self) -> HTTPMessageMapping:
        """The headers, lower-case names."""
        return _js_headers_to_http_message(self.js_object.headers)

    @property
    def method(self) -> HTTPMethod:
        """The method; like the SDK, a KeyError for a method HTTPMethod does not know."""
        return HTTPMethod[self.js_object.method]

    @property
    def url(self) -> str:
        """The full URL."""
        return self.js_object.url

    @property
    def cf(self) -> Any:
        """Cloudflare request properties (None here)."""
        return None

    def _raise_if_failed(self) -> None:
        if self.body_used:
            raise OSError("Body already used")

    async def buffer(self) -> Any:
        """The body as a JS ArrayBuffer."""
        self._raise_if_failed()
        return await self.js_object.arrayBuffer()

    async def bytes(self) -> bytes:
        """The body as bytes."""
        self._raise_if_failed()
        return (await self.buffer()).to_bytes()

    def clone(self) -> Request:
        """A copy whose body can be read separately."""
        if self.body_used:
            raise OSError("Body already used")
        return Request(self.js_object.clone())

    async def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON."""
        self._raise_if_failed()
        return json.loads(await self.text(), **kwargs)

    async def text(self) -> str:
        """The body as text."""
        self._raise_if_failed()
        try:
            return await self.js_object.text()
        except JsException as exc:
            raise OSError(exc.message) from None
