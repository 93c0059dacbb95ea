"""An OpenAI-compatible summarizer that answers only when the test opens its gate: a
compaction held in flight while the test does something else."""

from __future__ import annotations

import asyncio

from aiohttp import web


class GatedSummarizer:
    """POST /v1/chat/completions answers `summary` once `gate` is set; `arrived` is set by the first call."""

    def __init__(self, summary: str) -> None:
        self.summary = summary
        self.arrived = asyncio.Event()
        self.gate = asyncio.Event()
        self.calls = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.calls += 1
        self.arrived.set()
        await self.gate.wait()
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": self.summary}}]})

    async def __aenter__(self) -> GatedSummarizer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gate.set()
        assert self._runner is not None
        await self._runner.cleanup()
