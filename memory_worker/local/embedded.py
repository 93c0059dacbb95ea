"""`EmbeddedMemoryHost`: the local host inside the current event loop, on a port it reports."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from memory_engine.backoff import BACKOFF_BASE_MS, BACKOFF_MAX_MS
from memory_worker.local.server import MemoryHost

if TYPE_CHECKING:  # only a configured summarizer posts: httpx is imported then, not at start
    import httpx

    from memory_engine.compaction.compact import Summarize

log = logging.getLogger("memory_worker.local")

SHUTDOWN_TIMEOUT_S = 30.0  # in-flight requests get this long to finish on SIGTERM


class EmbeddedMemoryHost:
    """The local host started inside the current event loop, on 127.0.0.1 and port 0 by default.

    `async with EmbeddedMemoryHost(dir) as host:` gives `host.url` (with the port the
    system chose) and `host.token`.
    """

    def __init__(
        self,
        data_dir: Path,
        token: str | None = None,
        port: int = 0,
        summarizer: Summarize | None = None,
        bind: str = "127.0.0.1",
        summary_base_url: str | None = None,
        summary_model: str | None = None,
        summary_api_key: str | None = None,
        retention: int | None = None,
        summary_timeout_s: float = 60.0,
        backoff_base_ms: int = BACKOFF_BASE_MS,
        backoff_max_ms: int = BACKOFF_MAX_MS,
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
        clock: Callable[[], datetime] | None = None,  # tests: the engine's UTC clock
    ):
        self.clock = clock
        self.data_dir = Path(data_dir)
        self.shutdown_timeout_s = shutdown_timeout_s
        if not token:
            import secrets

            token = secrets.token_urlsafe(32)
        self.token = token
        self.port = port
        self.bind = bind
        self.summarizer = summarizer
        self.summary = (summary_base_url, summary_model, summary_api_key, summary_timeout_s)
        self.retention = retention
        self.backoff = (backoff_base_ms, backoff_max_ms)
        self.host: MemoryHost | None = None
        self._runner: web.ServerRunner | None = None
        self._http: httpx.AsyncClient | None = None
        self.url = ""

    async def _post(
        self, url: str, headers: dict[str, str], body: bytes, timeout_s: float
    ) -> tuple[int, dict[str, str], bytes]:
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient()
        r = await self._http.post(url, headers=headers, content=body, timeout=timeout_s)
        return r.status_code, dict(r.headers), r.content

    def _summarizer(self) -> Summarize:
        """The given summarizer, else the configured endpoint's, else the offline one."""
        from memory_engine.compaction.compact import make_summarizer

        base, model, key, timeout = self.summary
        return self.summarizer or make_summarizer(base, model, key, self._post, timeout)

    async def __aenter__(self) -> EmbeddedMemoryHost:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.host = MemoryHost(
            self.data_dir,
            self.token,
            retention=self.retention,
            backoff_base_ms=self.backoff[0],
            backoff_max_ms=self.backoff[1],
            clock=self.clock,
        )
        # The graceful wait is our own `drain`, before cleanup(): aiohttp's shutdown drops the
        # bytes that arrive after it starts, so a request whose body was still on its way would
        # hang until its timeout. What is left for cleanup() is at most such a stray request.
        self._runner = web.ServerRunner(self.host.server(), shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.bind, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self.url = f"http://{_url_host(self.bind)}:{self.port}"
        # Listening: /health answers from here on, API requests wait for the engine to load.
        try:
            await self.host.start(self._summarizer)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            for site in list(self._runner.sites):
                await site.stop()  # no new connections
            if self.host is not None and not await self.host.drain(self.shutdown_timeout_s):
                log.warning(
                    "shutdown: %d requests still in flight after %.0fs",
                    self.host.in_flight,
                    self.shutdown_timeout_s,
                )
            await self._runner.cleanup()
        if self.host is not None:
            await self.host.scheduler.stop()
        if self._http is not None:
            await self._http.aclose()
        if self.host is not None:
            self.host.close()


def _url_host(bind: str) -> str:
    """The host part of a URL that reaches a server bound to `bind`."""
    if bind in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{bind}]" if ":" in bind else bind
