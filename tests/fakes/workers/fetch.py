"""Mirror of `workers/fetch.py`: `await fetch(resource, **options)` -> SDK `Response`.

With `fetcher=` (what a stub's `fetch` passes) the request goes to that JS fetch function;
otherwise it is the global `fetch`, done here as real HTTP with httpx (tests keep it on
127.0.0.1). Like Pyodide's `pyfetch`, a network failure raises `OSError`; like the
Workers runtime, there is no timeout of its own (the caller cancels).
"""

from __future__ import annotations

from http import HTTPMethod
from typing import Any

import httpx

from tests.fakes.workers._js import JsException, JsHeaders, JsRequest, JsResponse
from tests.fakes.workers.request import Request, _to_js_headers
from tests.fakes.workers.response import Response


async def _global_fetch(resource: Any, init: dict[str, Any]) -> JsResponse:
    """The runtime's own `fetch`: real HTTP."""
    if isinstance(resource, JsRequest):
        request = JsRequest.new(resource, **init) if init else resource
    else:
        request = JsRequest.new(str(resource), **init)
    body = await request.arrayBuffer()
    headers = list(request.headers)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=None) as client:
            resp = await client.request(
                request.method, request.url, headers=headers, content=body.to_bytes() or None
            )
    except httpx.HTTPError as exc:
        raise JsException("TypeError", f"Network connection lost: {exc!r}") from None
    return JsResponse(
        resp.content,
        resp.status_code,
        resp.reason_phrase,
        list(resp.headers.multi_items()),
        url=str(resp.url),
    )


async def fetch(resource: Any, **other_options: Any) -> Response:
    """Fetch a URL or Request; the SDK Response."""
    if isinstance(resource, Request):
        resource = resource.js_object
    if isinstance(other_options.get("method"), HTTPMethod):
        other_options["method"] = other_options["method"].value
    fetcher = other_options.pop("fetcher", None)
    if "headers" in other_options and not isinstance(other_options["headers"], JsHeaders):
        other_options["headers"] = _to_js_headers(other_options["headers"])
    try:
        if fetcher is not None:
            js_resp = await fetcher(resource, other_options)
        else:
            js_resp = await _global_fetch(resource, other_options)
    except JsException as exc:
        raise OSError(exc.message) from None
    return Response(js_resp)
