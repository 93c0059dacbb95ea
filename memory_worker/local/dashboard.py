"""The local host's side of the dashboard: `/dashboard` on the API's port, and the directory's reports.

The pages are the engine's (`memory_engine.dashboard.app`); this module hands them a
request and a `Backend` that calls the host's own API (token, parse, execute: the same path
as every client), and turns their answer into aiohttp's. After each write on a chat the
host tells the directory object what changed (`after_write`), as each chat's Durable Object
does on Cloudflare.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from memory_engine.api.http_types import Request
from memory_engine.dashboard.app import DashRequest, handle
from memory_engine.dashboard.directory import DIRECTORY_KEY, chat_report, erased_report, reports

if TYPE_CHECKING:
    from memory_engine.api.http import Operation
    from memory_worker.local.server import MemoryHost

log = logging.getLogger("memory_worker.local.dashboard")
access_log = logging.getLogger("memory_worker.access")


def route_of(path: str) -> str:
    """A dashboard path's shape for the access log: no chat key, person or message in it."""
    parts = path.split("/")[:6]
    for i in (3, 5):
        if len(parts) > i:
            parts[i] = "{chat}" if i == 3 else "{id}"
    return "/".join(parts)[:80]


class HostBackend:
    """The dashboard's way into the host's API: every call as a client would make it."""

    def __init__(self, host: MemoryHost):
        self.host = host
        self.token = host.token

    async def call(self, method: str, path: str, query: str = "", body: object = None) -> tuple[int, Any]:
        """One API call with the token, through the host's own routing."""
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        headers = {"authorization": f"Bearer {self.token}"}
        answer = await self.host.respond(Request(method, path, query, headers, data))
        return answer.status, answer.payload

    def now_ms(self) -> int:
        """The host's clock (tests inject theirs)."""
        return self.host.scheduler.now_ms()


async def serve(host: MemoryHost, request: web.BaseRequest, path: str, query: str) -> web.Response:
    """Answer one `/dashboard` request (one access line: never the query, which may hold a link)."""
    started = time.perf_counter()
    body = await request.read()
    secure = request.secure or request.headers.get("x-forwarded-proto", "") == "https"
    peer = request.remote or ""
    req = DashRequest(
        method=request.method,
        path=path,
        query=query,
        headers={k.lower(): v for k, v in request.headers.items()},
        body=body,
        client=peer,
        secure=secure,
    )
    answer = await handle(req, HostBackend(host))
    if access_log.isEnabledFor(logging.INFO):
        fields = {
            "method": request.method[:16],
            "route": route_of(path),
            "status": answer.status,
            "ms": round((time.perf_counter() - started) * 1000, 2),
        }
        access_log.info("request", extra={"fields": fields})
    response = web.Response(status=answer.status, body=answer.body)
    for name, value in answer.headers:
        if name == "content-type":
            response.headers["Content-Type"] = value
        else:
            response.headers.add(name, value)
    return response


async def after_write(host: MemoryHost, op: Operation) -> None:
    """Tell the directory what the write `op` changed in its chat (a failure is logged, not raised)."""
    if not reports(op.name) or op.chat_key.startswith("@"):
        return
    try:
        chat = op.chat_key
        async with host.store.lock(chat):
            if host.store.exists(chat):
                report = chat_report(host.store.open(chat), chat, op.name, op.args)
            else:
                report = erased_report(chat)
        data = json.dumps(report).encode("utf-8")
        headers = {"authorization": f"Bearer {host.token}"}
        answer = await host.respond(Request("POST", "/v1/directory/report", "", headers, data))
        if answer.status != 200:
            log.warning("the directory refused a report chat=%s: %s", chat, answer.payload)
    except Exception:
        log.exception("could not report to the directory chat=%s", op.chat_key)


__all__ = ["DIRECTORY_KEY", "HostBackend", "after_write", "serve"]
