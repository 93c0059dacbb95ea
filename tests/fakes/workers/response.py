"""Mirror of `workers/response.py` (and the `pyodide.http.FetchResponse` it extends)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from tests.fakes.workers._js import JsArrayBuffer, JsResponse
from tests.fakes.workers.request import (
    HTTPMessageMapping,
    _is_js_instance,
    _js_headers_to_http_message,
    _to_js_headers,
)


class FetchResponse:
    """`pyodide.http.FetchResponse` + the SDK's additions: status, headers, body readers."""

    def __init__(self, url: str, js_response: JsResponse):
        self._url = url
        self.js_response = js_response

    @property
    def js_object(self) -> JsResponse:
        """The JS Response."""
        return self.js_response

    @property
    def status(self) -> int:
        """The HTTP status."""
        return self.js_response.status

    @property
    def status_text(self) -> str:
        """The reason phrase."""
        return self.js_response.statusText

    @property
    def ok(self) -> bool:
        """True for 2xx."""
        return self.js_response.ok

    @property
    def url(self) -> str:
        """The URL the response came from."""
        return self.js_response.url

    @property
    def body_used(self) -> bool:
        """True once the body was read."""
        return self.js_response.bodyUsed

    @property
    def headers(self) -> HTTPMessageMapping:
        """The headers (lower-case names)."""
        return _js_headers_to_http_message(self.js_object.headers)

    def _raise_if_failed(self) -> None:
        if self.body_used:
            raise OSError("Response body is already used")

    def raise_for_status(self) -> None:
        """OSError for 4xx/5xx."""
        if 400 <= self.status < 600:
            raise OSError(f"{self.status} {self.status_text} error for url ({self.url})")

    def clone(self) -> FetchResponse:
        """A copy with its own unread body."""
        return type(self)(self._url, self.js_response.clone())

    async def buffer(self) -> JsArrayBuffer:
        """The body as a JS ArrayBuffer."""
        self._raise_if_failed()
        return await self.js_response.arrayBuffer()

    async def bytes(self) -> bytes:
        """The body as bytes."""
        return (await self.buffer()).to_bytes()

    async def text(self) -> str:
        """The body as text."""
        self._raise_if_failed()
        return await self.js_response.text()

    async def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON."""
        return json.loads(await self.text(), **kwargs)


class Response(FetchResponse):
    """A response to send (or one received): body str | bytes | None, status, headers."""

    def __init__(
        self,
        body: Any = None,
        status: HTTPStatus | int | None = None,
        status_text: str = "",
        headers: Any = None,
        web_socket: Any = None,
    ):
        if _is_js_instance(body, "Response"):
            if status is not None or status_text or headers is not None:
                raise ValueError("Expected no options when constructing Response from a js.Response")
            super().__init__(body.url, body)
            return
        if not isinstance(body, (str, bytes)) and body is not None:
            raise TypeError(f"Unsupported type in Response: {type(body).__name__}")
        options = self._create_options(status, status_text, headers)
        js_resp = JsResponse.new(body, **options)
        super().__init__(js_resp.url, js_resp)

    def __repr__(self) -> str:
        return f"Response(status={self.status})"

    @staticmethod
    def _create_options(
        status: Any = HTTPStatus.OK, status_text: str = "", headers: Any = None
    ) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if status:
            options["status"] = status.value if isinstance(status, HTTPStatus) else status
        if status_text:
            options["statusText"] = status_text
        if headers:
            options["headers"] = _to_js_headers(headers)
        return options

    @staticmethod
    def from_json(
        data: Any, status: HTTPStatus | int = HTTPStatus.OK, status_text: str = "", headers: Any = None
    ) -> Response:
        """A JSON response (content-type application/json unless given)."""
        options = Response._create_options(status, status_text, headers)
        if "headers" not in options:
            options["headers"] = _to_js_headers({"content-type": "application/json"})
        elif not options["headers"].has("content-type"):
            options["headers"].set("content-type", "application/json")
        return Response(JsResponse.new(json.dumps(data), **options))

    def json(self, *args: Any, **kwargs: Any):  # type: ignore[override]  # a constructor and a method, as in the SDK
        """Awaitable body as JSON on an instance; `Response.json(data)` builds one, like the SDK."""
        if isinstance(self, Response):
            return super().json()
        return Response.from_json(self, *args, **kwargs)
