"""Discord in tests: the people of a guild, a recording ChatService, the adapter running against
the fake Discord (alone or on the real pipeline), the settings that point it there, and slash
commands and answers waited for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bot.adapters.discord import adapter
from bot.app import build_pipeline
from bot.chat.commands.handlers import COMMANDS
from bot.chat.types import CommandResult, File, IncomingMessage, Reply
from bot.config import DiscordSettings, Settings
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.core import NoReminders, default_config_settings, wait_until

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
ADMIN_NAMES = sorted(c.name for c in COMMANDS if c.admin and c.on("discord"))
EVERYONE_NAMES = sorted(c.name for c in COMMANDS if not c.admin and c.on("discord"))


class World:
    """A guild with an admin, a member and an owner-listed user, plus a DM channel."""

    def __init__(self, fake_discord: Any) -> None:
        self.guild = fake_discord.add_guild("Test guild")
        self.general = self.guild["channels"][0]
        self.thread = fake_discord.add_channel(self.guild, "a thread", parent=self.general)
        self.admin = fake_discord.make_user("alice")
        self.member = fake_discord.make_user("bob")
        self.owner_listed = fake_discord.make_user("carol")  # in ADMIN_USER_IDS, no admin role
        fake_discord.add_member(self.guild, self.admin, roles=[fake_discord.admin_role(self.guild)])
        fake_discord.add_member(self.guild, self.member)
        fake_discord.add_member(self.guild, self.owner_listed)
        self.dm = fake_discord.add_dm(self.member)


class RecordingDiscordService:
    """An honest ChatService: answers by rule, refuses admin commands to non-admins, records calls."""

    registry = COMMANDS  # the real commands: the slash commands are built from them

    def __init__(self, answer: Callable[[IncomingMessage], str] | None = None) -> None:
        self.answer = answer or (lambda m: f"echo: {m.text}")
        self.reminders = NoReminders()  # the ChatService protocol has it; no reminder is due here
        self.handled: list[IncomingMessage] = []
        self.recorded: list[IncomingMessage] = []
        self.commands: list[tuple[IncomingMessage, str, str]] = []
        self.before_answer: Callable | None = None  # awaited inside handle, before answering
        self.streamer: Callable[[IncomingMessage], AsyncIterator[str]] | None = None  # custom stream
        self.command_delay: asyncio.Event | None = None  # commands wait for it when set
        self.results: dict[str, CommandResult] = {}  # a fixed answer for a command name
        self._changed = asyncio.Condition()

    async def _note(self, log: list, item) -> None:
        log.append(item)
        async with self._changed:
            self._changed.notify_all()

    async def handle(self, message: IncomingMessage) -> Reply:
        """Record the message, then answer by rule."""
        await self._note(self.handled, message)
        if self.before_answer is not None:
            await self.before_answer(message)
        return Reply(text=self.answer(message), tier="standard", model="fake")

    async def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        """The `streamer`'s pieces, or the whole answer as one chunk."""
        if self.streamer is None:
            yield (await self.handle(message)).text
            return
        await self._note(self.handled, message)
        async for piece in self.streamer(message):
            yield piece

    async def record(self, message: IncomingMessage) -> None:
        """Keep the message."""
        await self._note(self.recorded, message)

    async def command(self, message: IncomingMessage, name: str, args: str) -> CommandResult:
        """Admin commands refuse non-admins; /usage has a chart; /forget asks to confirm."""
        await self._note(self.commands, (message, name, args))
        if self.command_delay is not None:
            await self.command_delay.wait()
        if name in self.results:
            return self.results[name]
        if name in ADMIN_NAMES and not message.is_admin:
            return CommandResult(text="Only admins can do that.")
        if name == "usage":
            return CommandResult(
                "Usage:", table="tier calls\nstandard 3", files=(File("usage.png", PNG, "image/png"),)
            )
        if name == "forget" and args != "yes":
            return CommandResult(text="Forget this whole chat?", confirm="/forget yes")
        return CommandResult(text=f"{name} done {args}".strip())

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0):
        """Wait until `predicate()` is truthy; re-checked on every recorded call."""

        async with asyncio.timeout(timeout):  # not wait_for: it can swallow cancellation on 3.11
            async with self._changed:
                return await self._changed.wait_for(predicate)


def discord_settings_for(
    fake_discord: FakeDiscord, world: World, streaming: bool = False, **discord_options
) -> Settings:
    """Settings pointing the adapter at the fake Discord (whole answers unless `streaming`)."""
    discord_options["streaming"] = streaming
    return Settings(
        tiers={},
        admin_user_ids=frozenset({world.owner_listed["id"]}),
        discord=DiscordSettings(
            token=fake_discord.token,
            api_base_url=fake_discord.api_base,
            gateway_url=fake_discord.gateway_url,
            **discord_options,
        ),
    )


@contextlib.asynccontextmanager
async def running_client(pipeline, settings: Settings) -> AsyncIterator[adapter.DiscordBot]:
    """The adapter's client, logged in and connected to the fake until the block ends."""
    # No pause before identifying again: the fake does not rate-limit IDENTIFY.
    client = adapter.build_client(pipeline, settings, guild_ready_timeout=0.05, identify_pause_s=0.0)
    task = asyncio.create_task(adapter.run_client(client, settings.discord.token))
    try:
        await wait_until(lambda: client.is_ready() or task.done(), timeout=10)
        if task.done():
            task.result()  # surface a start-up failure
        yield client
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def discord_env(fake_discord: FakeDiscord, openai: FakeOpenAI, api_key: str = "sk-test") -> dict[str, str]:
    """The documented env vars that point the bot at the fake Discord and the fake model."""
    return {
        "OPENAI_API_KEY": api_key,
        "OPENAI_BASE_URL": openai.url,
        "DISCORD_BOT_TOKEN": fake_discord.token,
        "DISCORD_API_BASE_URL": fake_discord.api_base,
        "DISCORD_GATEWAY_URL": fake_discord.gateway_url,
    }


def discord_e2e_settings(fake_discord: FakeDiscord, openai: FakeOpenAI, world: World) -> Settings:
    """The default config/bot.toml with every tier on the fake model, read from the documented env vars."""
    env = {**discord_env(fake_discord, openai), "ADMIN_USER_IDS": world.owner_listed["id"]}
    return default_config_settings(env)


@contextlib.asynccontextmanager
async def discord_on_pipeline(
    fake_discord: FakeDiscord, openai: FakeOpenAI, world: World, data_dir: Path
) -> AsyncIterator[adapter.DiscordBot]:
    """The adapter on the real pipeline (embedded memory host) as `chatbot discord` builds it,
    connected to the fake Discord; yields the client."""
    settings = discord_e2e_settings(fake_discord, openai, world)
    async with build_pipeline(settings, data_dir) as pipeline, running_client(pipeline, settings) as client:
        yield client


async def answered(fake_discord: FakeDiscord, channel: dict, words: str, count: int = 1) -> list[str]:
    """Wait until `count` bot answers in `channel` are complete, the last echoing `words`."""
    done = lambda: len(shown := fake_discord.shown(channel)) == count and shown[-1].endswith(words)  # noqa: E731
    await fake_discord.wait_for(done, timeout=15)
    return fake_discord.shown(channel)


async def slash(fake_discord: FakeDiscord, name: str, user: dict, channel: dict, **options) -> dict:
    """Run a slash command and wait for its final (non-loading) answer."""
    iid = await fake_discord.invoke(name, user, channel, options or None)

    def done() -> object:
        m = fake_discord.final_message(iid)
        return m and not m["flags"] & 128 and (m["content"] or m["attachments"])

    await fake_discord.wait_for(done, timeout=15)
    return {**fake_discord.final_message(iid), "iid": iid}


async def forget_clicked_by(fake_discord: FakeDiscord, world: World, clicker: dict) -> tuple[dict, object]:
    """The admin talks in #general and asks /forget; `clicker` presses its button.
    Returns the question and the click."""
    ch = world.general
    await fake_discord.user_says(ch, world.admin, "My name is Alice and I live in Lyon.")
    await fake_discord.user_says(
        ch, world.admin, f"{fake_discord.mention(fake_discord.bot)} hi", mentions=[fake_discord.bot]
    )
    await answered(fake_discord, ch, "hi")
    question = await slash(fake_discord, "forget", world.admin, ch)
    button = question["components"][0]["components"][0]
    click = await fake_discord.click(
        fake_discord.final_message(question["iid"]), button["custom_id"], clicker
    )
    await fake_discord.wait_for(lambda: fake_discord.responses(click), timeout=15)
    return question, click
