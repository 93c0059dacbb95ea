"""The core of the test helpers: settings on the fake model server, a running pipeline, messages,
waiting with a deadline, and reading what the memory stored."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.app import build_pipeline
from bot.chat.options import PipelineOptions
from bot.chat.pipeline import Pipeline
from bot.chat.types import IncomingMessage
from bot.config import MemoryRetry, Settings, settings_from
from tests.support.memory import InProcessMemory

API_KEY = "sk-test-secret-0123456789abcdefXYZ"
MODELS = {"light": "m-light", "standard": "m-standard", "heavy": "m-heavy"}
MEMORY_TOKEN = "memory-token-reliability-0123456789"  # a memory host token of the right length
REPO = Path(__file__).resolve().parents[2]
FAST = PipelineOptions(MemoryRetry(replay_interval_s=0.05, retry_s=0.05, retry_max_s=0.2))


class NoReminders:
    """The reminder delivery of an in-test ChatService: records which platforms started it."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, platform: str, send: object, parallel: bool = False, prefix: str | None = None) -> None:
        """Note the start; no reminder is ever due."""
        self.started.append(platform)


async def no_wait(seconds: float) -> None:
    """An injected sleep for the tier router: every retry decision is made, no time is waited."""
    await asyncio.sleep(0)


# For tests of what the pipeline decides, not of how long it waits (those keep FAST).
INSTANT = dataclasses.replace(FAST, sleep=no_wait)


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
    summary_model: str | None = "offline",
) -> Settings:
    """Settings with three tiers on the fake server (models m-light, m-standard, m-heavy).

    Compaction summarizes offline unless `summary_model` says otherwise (None: the cheapest
    tier, the product's default), so the fake model sees only the pipeline's calls.
    """
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
    if summary_model:
        env["SUMMARY_MODEL"] = summary_model
    return settings_from(data, env)


@contextlib.asynccontextmanager
async def running_pipeline(
    settings: Settings, data_dir: Path, *, host: bool = False, **kwargs: Any
) -> AsyncIterator[Pipeline]:
    """build_pipeline with fast outbox replay, on the memory engine in process
    (`InProcessMemory`); with `host=True` (or MEMORY_URL in the settings) on the real
    memory host over HTTP, for tests of the host, its files or the way to it.
    `TEST_MEMORY=host` runs every pipeline test on the real host."""
    kwargs.setdefault("options", FAST)
    in_process = not host and os.environ.get("TEST_MEMORY", "") != "host"
    if in_process and settings.memory_url is None and "memory" not in kwargs:
        kwargs["memory"] = InProcessMemory(clock=kwargs.get("clock"))
    async with build_pipeline(settings, data_dir, **kwargs) as pipeline:
        yield pipeline


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


class MsClock:
    """The Worker's clock in ms, moved by the test."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


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

    from memory_worker.local.chats import chat_file

    path = Path(memory_dir) / chat_file(chat_key)  # not a ChatStore: it would take the folder's lock
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


def prompt_section(prompt: str, title: str) -> str:
    """One section of a memory prompt (or of /why), e.g. "Recent messages"; "" when absent."""
    if f"{title}:" not in prompt:
        return ""
    return prompt.split(f"{title}:", 1)[1].split("\n\n", 1)[0]


def numbered(text: str) -> dict[str, int]:
    """{"name: Ada": 1, ...} from the "#N ..." lines of /facts, /forgetfact or /remember."""
    return {m.group(2).strip(): int(m.group(1)) for m in re.finditer(r"#(\d+) ([^\n]+)", text)}


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


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without the bot's settings (a subprocess sees only `extra`), the repo on PYTHONPATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "MEMORY_", "BOT_CONFIG", "TELEGRAM_", "DISCORD_", "SUMMARY_"))
    }
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def console_chat(tmp_path: Path, lines: list[str], *, subprocess_: bool = False, **env: str) -> str:
    """The output of one `chatbot chat --chat console:grace` fed `lines` (exit 0 asserted).

    It runs in `tmp_path` (no .env from the repository) with data in `tmp_path / "data"`
    and `clean_env(**env)`: in this process (tests/support/cli.py), or as a real
    `python -m bot.cli` child with `subprocess_=True` (the end-to-end tests keep one).
    """
    argv = ["chat", "--data", str(tmp_path / "data"), "--chat", "console:grace"]
    text = "\n".join(lines) + "\n"
    if not subprocess_:
        from tests.support.cli import run_cli

        run = run_cli(*argv, cwd=tmp_path, env=clean_env(**env), stdin=text)
        assert run.returncode == 0, run.stderr
        return run.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", *argv],
        input=text,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
        env=clean_env(**env),
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
