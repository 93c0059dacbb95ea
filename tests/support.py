"""Helpers shared by the router tests (no tests here): settings for the fake server, a running router."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bot.app import build_router
from bot.config import Settings, settings_from
from bot.router.pipeline import Router, RouterOptions
from bot.router.types import IncomingMessage

API_KEY = "sk-test-secret-0123456789abcdefXYZ"
MODELS = {"light": "m-light", "standard": "m-standard", "heavy": "m-heavy"}
FAST = RouterOptions(replay_interval_s=0.05, memory_retry_s=0.05, memory_retry_max_s=0.2)


def make_settings(
    base_url: str | None,
    *,
    api_key: str | None = API_KEY,
    fallback: tuple[str, ...] = ("standard", "light", "heavy"),
    time_budget_s: float = 10.0,
    request_timeout_s: float = 10.0,  # tests of timeouts pass their own
    attempts: int = 2,
    max_retry_wait_s: float = 2.0,
    daily_budget_usd: float = 1.0,
    memory_url: str | None = None,
    memory_token: str | None = None,
    choice: dict[str, Any] | None = None,
) -> Settings:
    """Settings with three tiers on the fake server (models m-light, m-standard, m-heavy)."""
    data: dict[str, Any] = {
        "bot": {"daily_budget_usd": daily_budget_usd},
        "router": {
            "fallback_order": list(fallback),
            "default_tier": "standard",
            "time_budget_s": time_budget_s,
            "request_timeout_s": request_timeout_s,
            "max_attempts_per_tier": attempts,
            "max_retry_wait_s": max_retry_wait_s,
            # No "small talk" shortcut by default: short test messages stay on the default tier.
            "choice": {"short_chars": 0} if choice is None else choice,
        },
        "tiers": {
            "light": {"model": MODELS["light"], "price_in_per_mtok": 0.1, "price_out_per_mtok": 0.4},
            "standard": {"model": MODELS["standard"], "price_in_per_mtok": 0.4, "price_out_per_mtok": 1.6},
            "heavy": {"model": MODELS["heavy"], "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0},
        },
    }
    env: dict[str, str] = {}
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    if memory_url:
        env["MEMORY_URL"] = memory_url
    if memory_token:
        env["MEMORY_API_TOKEN"] = memory_token
    return settings_from(data, env)


@contextlib.asynccontextmanager
async def running_router(settings: Settings, data_dir: Path, **kwargs: Any) -> AsyncIterator[Router]:
    """build_router with fast outbox replay (embedded memory host unless settings say otherwise)."""
    kwargs.setdefault("options", FAST)
    async with build_router(settings, data_dir, **kwargs) as router:
        yield router


def msg(
    text: str,
    *,
    chat: str = "test:chat",
    author: str = "ada",
    author_id: str = "u1",
    message_id: str | None = None,
    admin: bool = True,
    **extra: Any,
) -> IncomingMessage:
    """An incoming message with test defaults."""
    return IncomingMessage(
        chat_key=chat,
        author=author,
        author_id=author_id,
        text=text,
        message_id=message_id,
        is_admin=admin,
        **extra,
    )


async def wait_until(
    predicate: Callable[[], Awaitable[Any] | Any], timeout: float = 5.0, what: str = "condition"
) -> Any:
    """Poll `predicate` (sync or async) until truthy, failing after `timeout` seconds; its value.

    For state with no event to wait on; where a fake offers an event (`wait_for`), use that.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)  # a poll step with a deadline, not a wait-for-luck sleep


def tier_totals(usage: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{tier: (calls, errors)} from GET /usage."""
    return {t: (int(r["calls"]), int(r["errors"])) for t, r in (usage.get("tiers") or {}).items()}


_SERVING = re.compile(r"^memory host serving .* on (http://\S+)$", re.M)


class ServedMemory:
    """`chatbot memory serve --port 0` as a subprocess, its output kept in a file.

    The system picks the port (no free-port guess that another process could take first);
    `start` reads the URL the host prints, so each restart may get a new `url`.
    """

    def __init__(self, data: Path, token: str, env: dict[str, str] | None = None, log: Path | None = None):
        self.data, self.token, self.env = data, token, env or {}
        self.log = log or data.parent / f"{data.name}-serve.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0

    async def start(self, timeout: float = 20) -> None:
        """Start the host, wait for the URL it prints and for /health to answer 200."""
        chatbot = Path(sys.executable).with_name("chatbot")
        env = dict(os.environ, MEMORY_API_TOKEN=self.token, **self.env)
        offset = self.log.stat().st_size if self.log.exists() else 0
        args = ["memory", "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(self.data)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(chatbot), *args],
                env=env,
                stdout=out,
                stderr=out,
            )
        self.starts += 1

        def printed_url() -> str | None:
            assert self.proc is not None and self.proc.poll() is None, self.output()[-2000:]
            with open(self.log, "rb") as f:
                f.seek(offset)
                found = _SERVING.search(f.read().decode("utf-8", "replace"))
            return found.group(1) if found else None

        self.url = await wait_until(printed_url, timeout=timeout, what="the memory host's URL")
        async with httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=2) as client:

            async def healthy() -> bool:
                try:
                    return (await client.get("/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_until(healthy, timeout=timeout, what="memory host health")

    def output(self) -> str:
        """Everything the host printed so far (all its runs)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        """SIGKILL, and reap."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop_quietly(self) -> None:
        """Make sure nothing is left running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def image_bytes(width: int = 64, height: int = 48, color: str = "red", fmt: str = "PNG") -> bytes:
    """A real picture (Pillow, which matplotlib brings), for photo tests."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, fmt)
    return out.getvalue()


def default_config_settings(env: dict[str, str], **tables: dict[str, Any]) -> Settings:
    """The shipped config/bot.toml (vision tiers, [transcription]...) with `tables` merged over it
    (`tiers` replaces the shipped tiers)."""
    import tomllib

    from bot.config import DEFAULT_CONFIG

    with open(DEFAULT_CONFIG, "rb") as fh:
        data = tomllib.load(fh)
    for name, values in tables.items():
        if name == "tiers":
            data["tiers"] = dict(values)
        else:
            data.setdefault(name, {}).update(values)
    return settings_from(data, env)
