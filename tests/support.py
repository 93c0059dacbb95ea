"""Helpers shared by the router tests (no tests here): settings for the fake server, a running router."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

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


def stored_messages(memory_dir: Path, chat_key: str) -> list[dict[str, Any]]:
    """Every message row of one chat, read straight from its database file (read-only), in id order."""
    import sqlite3

    from memory_worker.host import ChatStore

    path = ChatStore(memory_dir).path_for(chat_key)
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM messages ORDER BY id")]
    finally:
        conn.close()


def tier_totals(usage: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{tier: (calls, errors)} from GET /usage."""
    return {t: (int(r["calls"]), int(r["errors"])) for t, r in (usage.get("tiers") or {}).items()}
