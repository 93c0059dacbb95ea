"""The Worker's side of the dashboard: `/dashboard` pages and the chats' reports to the directory object.

A thin shell, as `entry.py` is, over the engine's `memory_engine.dashboard`: it turns the JS
Request into the pages' `DashRequest`, gives them a `Backend` whose calls go to the chat's
(or the directory's) Durable Object over RPC exactly as the Worker forwards any API call,
and turns their answer into a JS Response. `entry.py` calls it; it uses entry's helpers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import entry
from memory_engine import Request as ApiRequest
from memory_engine import Response as ApiResponse
from memory_engine import parse
from memory_engine.dashboard.app import DashRequest, handle
from memory_engine.dashboard.directory import DIRECTORY_KEY, chat_report, erased_report, reports

log = logging.getLogger("memory_worker.dashboard")
DIRECTORY_REPORT_URL = "https://directory/v1/directory/report"
# The headers the pages read (the Worker reads no other: each crosses from JS one by one).
_READ = ("cookie", "origin", "host", "content-type", "x-forwarded-proto")


class WorkerBackend:
    """The dashboard's calls of the memory API, sent to the objects as the Worker sends any call."""

    def __init__(self, env: Any):
        self.env = env
        self.token = entry.var(env, "MEMORY_API_TOKEN") or ""

    async def call(self, method: str, path: str, query: str = "", body: object = None) -> tuple[int, Any]:
        """One API call with the token: parsed here, run by the object it names."""
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        authorization = f"Bearer {self.token}"
        op = parse(ApiRequest(method, path, query, {"authorization": authorization}, data), self.token)
        if isinstance(op, ApiResponse):
            return op.status, dict(op.payload)
        url = "https://memory" + path + (f"?{query}" if query else "")
        resp = await entry.call_object(self.env, op.chat_key, method, url, authorization, data)
        text = await resp.text()
        return int(resp.status), json.loads(str(text))

    def now_ms(self) -> int:
        """The Worker's clock."""
        return entry.now_ms()


def _get(request: Any, name: str) -> str | None:
    value = request.headers.get(name)
    return None if entry.is_null(value) else str(value)


async def serve(env: Any, request: Any) -> Any:
    """Answer one `/dashboard` request: a JS Response."""
    url = urlsplit(str(request.url))
    body = b"" if entry.is_null(request.body) else await entry.read_body(request)
    if body is None:
        return entry.json_response(ApiResponse(413, {"error": "the form is too large"}))
    headers = {name: v for name in _READ if (v := _get(request, name)) is not None}
    headers.setdefault("host", url.netloc)
    client = _get(request, "cf-connecting-ip") or ""
    req = DashRequest(
        method=str(request.method),
        path=url.path,
        query=url.query,
        headers=headers,
        body=bytes(body),
        client=client,
        secure=url.scheme == "https",
    )
    answer = await handle(req, WorkerBackend(env))
    body = entry.to_js(answer.body) if answer.body else None
    return entry.JsResponse.new(
        body, status=answer.status, headers=entry.to_js([list(h) for h in answer.headers])
    )


async def report(env: Any, chat_key: str, name: str, args: Mapping[str, Any], memory: Any) -> None:
    """Tell the directory object what the write `name` changed in the chat (a failure is only logged)."""
    if not reports(name):
        return
    try:
        erased = memory is None
        data = erased_report(chat_key) if erased else chat_report(memory, chat_key, name, args)
        token = entry.var(env, "MEMORY_API_TOKEN") or ""
        body = json.dumps(data).encode("utf-8")
        auth = f"Bearer {token}"
        resp = await entry.call_object(env, DIRECTORY_KEY, "POST", DIRECTORY_REPORT_URL, auth, body)
        if int(resp.status) != 200:
            log.warning("the directory refused a report chat=%s status=%s", chat_key, resp.status)
    except Exception:
        log.exception("could not report to the directory chat=%s", chat_key)
