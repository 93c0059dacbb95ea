"""Telegram in tests: the people of a chat, a recording ChatService, the adapter running against
the fake Bot API (alone or on the real pipeline), and the settings that point it there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from bot.adapters.telegram import adapter as tgad
from bot.app import build_pipeline
from bot.chat.commands.handlers import COMMANDS
from bot.chat.types import CommandResult, File, IncomingMessage, Reply
from bot.config import Settings, TelegramSettings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.support.core import MEMORY_TOKEN, NoReminders, default_config_settings, running_pipeline

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
ADMIN_ONLY = {c.name for c in COMMANDS if c.admin}


class People:
    """Alice (group admin), Bob (plain member), their group and private chats."""

    def __init__(self, tg: Any) -> None:
        self.alice = tg.user(111, "Alice", "alice")
        self.bob = tg.user(222, "Bob", "bob")
        self.group = tg.group(-100777, "Team")
        self.alice_dm = tg.private_chat(self.alice)
        self.bob_dm = tg.private_chat(self.bob)
        tg.set_role(self.group, self.alice, "administrator")


class RecordingService:
    """An honest ChatService: records every call, answers like the pipeline's surface does."""

    registry = COMMANDS  # the real commands: menus and handlers are built from them

    def __init__(self) -> None:
        self.reminders = NoReminders()  # the ChatService protocol has it; no reminder is due here
        self.handled: list[IncomingMessage] = []
        self.recorded: list[IncomingMessage] = []
        self.commands: list[tuple[IncomingMessage, str, str]] = []
        self.answer = lambda m: f"You said: {m.text}"
        self.hold: asyncio.Event | None = None  # set: handle() waits for it
        self.fail_on: str | None = None  # handle() raises for this text
        self.forget_asked: set[str] = set()
        self.results: dict[str, CommandResult] = {}  # a fixed answer for a command name

    async def handle(self, message: IncomingMessage) -> Reply:
        self.handled.append(message)
        if self.hold is not None:
            await self.hold.wait()
        if message.text == self.fail_on:
            raise RuntimeError("boom")
        return Reply(self.answer(message), tier="standard", model="fake")

    async def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        yield (await self.handle(message)).text

    async def record(self, message: IncomingMessage) -> None:
        self.recorded.append(message)

    async def command(self, message: IncomingMessage, name: str, args: str) -> CommandResult:
        self.commands.append((message, name, args))
        if name in self.results:
            return self.results[name]
        if name in ADMIN_ONLY and not message.is_admin:
            return CommandResult("Unknown command. Send /help for the list.")
        if name == "usage":
            return CommandResult(
                "Usage:", table="tier calls\nstandard 3", files=(File("u.png", PNG, "image/png"),)
            )
        if name == "forget":
            if args == "yes" and message.chat_key in self.forget_asked:
                return CommandResult("Done: this chat's memory is erased.")
            self.forget_asked.add(message.chat_key)
            return CommandResult(
                "This erases everything. Send /forget yes within 5 minutes to confirm.", confirm="/forget yes"
            )
        if name == "help":
            return CommandResult("Commands:\n/help - this list")
        if name == "start":
            return CommandResult("Hi! Commands:\n/help - this list")
        if COMMANDS.find(name) is None:
            return CommandResult("Unknown command. Send /help for the list.")
        return CommandResult(f"{name} for {message.chat_key} ({args or 'no args'})")


def telegram_settings_for(tg: FakeTelegram, streaming: bool = True, **changes) -> Settings:
    """Settings pointing the adapter at the fake server."""
    platform = TelegramSettings(token=tg.token, api_base_url=tg.base_url, streaming=streaming)
    return replace(Settings(tiers={}, telegram=platform), **changes)


@contextlib.asynccontextmanager
async def running_bot(
    service, settings: Settings, tg: FakeTelegram, **serve_kw
) -> AsyncIterator[tgad.TelegramBot]:
    """Run `serve()` in a task until the block ends; wait until it is polling (or set its webhook).
    Yields the adapter."""
    app = tgad.build_application(
        service,
        settings,
        typing_interval=serve_kw.pop("typing_interval", 0.1),
        # Fast pacing keeps the tests quick; the pacing tests pass their own.
        edit_intervals=serve_kw.pop("edit_intervals", (0.05, 0.1)),
    )
    start = len(tg.calls)
    task = asyncio.create_task(tgad.serve(service, settings, app=app, poll_timeout=5, **serve_kw))
    ready = "setWebhook" if settings.telegram.webhook_url else "getUpdates"
    started = asyncio.create_task(tg.wait_until(lambda: any(c.method == ready for c in tg.calls[start:])))
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # raise what went wrong at start-up
    await started
    try:
        yield app.bot_data["adapter"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


OWNER_ID = 4242  # listed in ADMIN_USER_IDS


def telegram_e2e_settings(tg: FakeTelegram, openai: FakeOpenAI) -> Settings:
    """The default config/bot.toml, every tier on the fake model, read from the documented env vars."""
    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": openai.url,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_BASE_URL": tg.base_url,
        "ADMIN_USER_IDS": str(OWNER_ID),
    }
    return default_config_settings(env)


@contextlib.asynccontextmanager
async def bot_on_pipeline(tg: FakeTelegram, openai: FakeOpenAI, data_dir) -> AsyncIterator[None]:
    """The real pipeline (embedded memory host) as `chatbot telegram` builds it, and the bot on it."""
    settings = telegram_e2e_settings(tg, openai)
    async with build_pipeline(settings, data_dir) as pipeline, running_bot(pipeline, settings, tg):
        yield


async def ask(tg: FakeTelegram, chat: dict, user: dict, text: str, **kw) -> dict:
    """Send a message and wait for the bot's next message in that chat."""
    before = len(tg.bot_messages(chat["id"]))
    tg.send(chat, user, text, **kw)
    return (await tg.wait_for_message(chat["id"], count=before + 1, timeout=15))[before]


def telegram_settings(
    tg: FakeTelegram,
    openai: FakeOpenAI,
    *,
    base_url: str | None = None,
    streaming: bool = True,
    send_budget_s: float = 10.0,
    memory_url: str | None = None,
) -> Settings:
    """The default config/bot.toml on the fakes, from the documented environment variables."""
    env = {
        "OPENAI_API_KEY": "sk-test-reliability-0123456789abcdef",
        "OPENAI_BASE_URL": openai.url,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_BASE_URL": base_url or tg.base_url,
    }
    if memory_url:
        env |= {"MEMORY_URL": memory_url, "MEMORY_API_TOKEN": MEMORY_TOKEN}
    settings = default_config_settings(env)
    return replace(
        settings, telegram=replace(settings.telegram, streaming=streaming, send_budget_s=send_budget_s)
    )


@contextlib.asynccontextmanager
async def telegram_bot(settings: Settings, tg: FakeTelegram, data_dir) -> AsyncIterator:
    """The real pipeline (embedded memory unless MEMORY_URL) with the Telegram bot on it; yields it."""
    async with running_pipeline(settings, data_dir) as pipeline, running_bot(pipeline, settings, tg):
        yield pipeline


def answers(tg: FakeTelegram, chat_id: int) -> list[str]:
    """The texts the bot shows in a chat, oldest first."""
    return [m.get("text", "") for m in tg.bot_messages(chat_id)]
