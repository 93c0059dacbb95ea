"""Discord adapter: discord.py client <-> the chat service's neutral types.

DMs are answered; guild channels and threads are answered when the bot is mentioned or
replied to, and their other messages are recorded (needs the message content intent).
Slash commands are synced at start-up (to DISCORD_DEV_GUILD_ID when set, else globally).
Every translation between discord.py objects and IncomingMessage lives in `Translator`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import logging
import re
from collections.abc import Iterator
from typing import Any, Literal, Optional

import discord
import yarl
from discord import app_commands

from bot.adapters.discord.send import (
    MESSAGE_LIMIT,
    SORRY,
    TRANSIENT_ERRORS,
    GrowingAnswer,
    parts_of,
    reply_reference,
    send_with_retry,
    typing_shown,
)
from bot.adapters.reminder_sends import discord_send
from bot.adapters.split import split_text
from bot.chat.commands.registry import Command, refused
from bot.chat.types import ChatService, CommandResult, IncomingMessage, MediaPart
from bot.chat_keys import discord_chat_key
from bot.config import Settings
from bot.errors import ChatbotError

log = logging.getLogger(__name__)

DEFER_AFTER_S = 2.0  # Discord drops an interaction not acknowledged within 3 s
CONFIRM_TIMEOUT_S = 300.0
IDENTIFY_PAUSE_S = 5.0  # discord.py's own pause before a new IDENTIFY (Discord rate-limits them)
ANSWERED_TYPES = (discord.MessageType.default, discord.MessageType.reply)

PLATFORM = "discord"
__all__ = ["DiscordBot", "build_client", "parts_of", "run_client", "serve"]


class NotAdmin(ChatbotError, app_commands.CheckFailure):
    """The user may not run an admin command here."""


def configure_endpoints(api_base_url: str | None, gateway_url: str | None) -> None:
    """Point discord.py at a REST/gateway proxy; discord.py only offers process-wide settings."""
    if api_base_url:
        discord.http.Route.BASE = api_base_url.rstrip("/")
    if gateway_url:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


class Translator:
    """The one place where Discord objects become IncomingMessage values."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def chat_key(self, channel_id: int, user_id: int) -> str:
        """`discord:<channel>`, or `discord:<channel>:<user>` with per-user memory."""
        return discord_chat_key(channel_id, user_id, memory_scope=self.settings.memory_scope)

    def is_admin(self, user_id: int, in_dm: bool, manage_guild: bool) -> bool:
        """DM users own their memory; in guilds manage_guild or ADMIN_USER_IDS."""
        return in_dm or manage_guild or str(user_id) in self.settings.admin_user_ids

    def message(self, message: discord.Message, me: discord.ClientUser) -> IncomingMessage | None:
        """The chat service's view of a chat message; None when there is nothing to read."""
        if message.author.bot or message.type not in ANSWERED_TYPES:
            return None  # other bots (no loops), ourselves, joins, pins and other system messages
        text = self._text(message, me)
        media = tuple(p for p in map(_media_part, message.attachments) if p is not None)
        if not text and not media:
            return None  # embeds-only, stickers, other attachments without text: nothing to read
        in_dm = message.guild is None
        # A Member in a guild (its permissions there); a User in a DM, who has none.
        perms = message.author.guild_permissions if isinstance(message.author, discord.Member) else None
        return IncomingMessage(
            chat_key=self.chat_key(message.channel.id, message.author.id),
            author=message.author.display_name,
            author_id=str(message.author.id),
            text=text,
            message_id=str(message.id),
            is_admin=self.is_admin(message.author.id, in_dm, bool(perms and perms.manage_guild)),
            addressed=in_dm or self._mentions(message, me) or self._replies_to(message, me),
            attachments=tuple(_attachment_kind(a) for a in message.attachments),
            platform="discord",
            media=media,
            chat_title=_title(message),
        )

    def interaction(self, interaction: discord.Interaction, name: str, args: str) -> IncomingMessage:
        """The chat service's view of a slash command or button press."""
        user = interaction.user
        return IncomingMessage(
            chat_key=self.chat_key(interaction.channel_id or user.id, user.id),
            author=user.display_name,
            author_id=str(user.id),
            text=f"/{name} {args}".strip(),
            message_id=f"interaction:{interaction.id}",
            is_admin=self.interaction_admin(interaction),
            platform="discord",
        )

    def interaction_admin(self, interaction: discord.Interaction) -> bool:
        """Whether the user of an interaction is an admin where it happened."""
        in_dm = interaction.guild_id is None
        return self.is_admin(interaction.user.id, in_dm, interaction.permissions.manage_guild)

    @staticmethod
    def _mentions(message: discord.Message, me: discord.ClientUser) -> bool:
        # Discord's autocomplete often picks the bot's own managed role instead of the bot user.
        role = message.guild.self_role if message.guild else None
        return me.id in message.raw_mentions or (role is not None and role.id in message.raw_role_mentions)

    @staticmethod
    def _replies_to(message: discord.Message, me: discord.ClientUser) -> bool:
        ref = message.reference
        target = ref and (ref.resolved or ref.cached_message)
        return isinstance(target, discord.Message) and target.author.id == me.id

    @staticmethod
    def _text(message: discord.Message, me: discord.ClientUser) -> str:
        # Drop our own mention (user or managed role); show other people's mentions as names.
        text = re.sub(rf"<@!?{me.id}>", "", message.content)
        role = message.guild.self_role if message.guild else None
        if role is not None:
            text = text.replace(role.mention, "")
        for user in message.mentions:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
        return text.strip()


def discord_text(result: CommandResult) -> str:
    """A command's text, its table in a code block (so the columns line up in Discord's font)."""
    return f"{result.text}\n```\n{result.table}\n```" if result.table else result.text


def _attachment_kind(attachment: discord.Attachment) -> str:
    kind = (attachment.content_type or "").split("/")[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(kind, "document")


def _media_part(attachment: discord.Attachment) -> MediaPart | None:
    """An image or audio attachment (voice messages included) as a part the chat service can read."""
    mime = (attachment.content_type or "").split(";")[0].strip()
    if mime.startswith("image/"):
        return MediaPart(
            "photo",
            attachment.read,
            mime=mime,
            name=attachment.filename,
            size=attachment.size,
            width=attachment.width,
            height=attachment.height,
        )
    if mime.startswith("audio/"):
        return MediaPart(
            "voice",
            attachment.read,
            mime=mime,
            name=attachment.filename,
            size=attachment.size,
            duration_s=attachment.duration,
        )
    return None


class ConfirmView(discord.ui.View):
    """One button that runs the chat service's confirmation command (e.g. `forget yes`)."""

    def __init__(self, bot: DiscordBot, confirm: str, owner_id: int) -> None:
        super().__init__(timeout=CONFIRM_TIMEOUT_S)
        self.bot, self.confirm, self.owner_id = bot, confirm, owner_id
        button: discord.ui.Button[ConfirmView] = discord.ui.Button(
            label="Yes, forget it", style=discord.ButtonStyle.danger
        )
        button.callback = self.on_confirm  # type: ignore[method-assign]  # discord.py's documented way
        self.add_item(button)

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        """Only the person who asked may confirm."""
        if interaction.user.id == self.owner_id:
            return True
        await say(interaction, "Only the person who asked can confirm this.")
        return False

    async def on_confirm(self, interaction: discord.Interaction) -> None:
        """Run the confirmation command and replace the question with its answer."""
        self.stop()
        name, _, args = self.confirm.lstrip("/").partition(" ")
        await self.bot.run_command(interaction, name, args)

    async def on_error(
        self, interaction: discord.Interaction, error: Exception, item: discord.ui.Item
    ) -> None:
        """Log a failed confirmation and tell the user, instead of Discord's bare "interaction failed"."""
        log.error("confirmation %r failed", self.confirm, exc_info=error)
        await say(interaction, "Sorry, that failed. Please try again later.")


class DiscordBot(discord.Client):
    """The discord.py client: message handling, slash commands and their sync."""

    def __init__(
        self,
        service: ChatService,
        settings: Settings,
        *,
        identify_pause_s: float = IDENTIFY_PAUSE_S,
        **options: Any,
    ) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: mentions, replies and recording need it
        options.setdefault("allowed_mentions", discord.AllowedMentions.none())  # model text never pings
        super().__init__(intents=intents, **options)
        self.service, self.settings = service, settings
        self.translate = Translator(settings)
        self.tree = app_commands.CommandTree(self)
        self.tree.on_error = self.on_command_error  # type: ignore[method-assign]  # discord.py's documented way
        self._in_hand = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.identify_pause_s = identify_pause_s
        self._reminders_started = False
        add_commands(self)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Pause before identifying again (Discord limits how often a bot may identify)."""
        if not initial:
            await asyncio.sleep(self.identify_pause_s)

    async def setup_hook(self) -> None:
        """Sync slash commands: to the dev guild at once, or globally (Discord may take a while)."""
        guild_id = self.settings.discord.dev_guild_id
        guild = discord.Object(int(guild_id)) if guild_id else None
        try:
            if guild is not None:
                self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
            log.info(
                "synced %d slash commands to %s", len(synced), f"guild {guild_id}" if guild else "all guilds"
            )
        except discord.HTTPException as exc:  # e.g. invited without applications.commands
            log.error("slash command sync failed (the bot still chats): %s", exc)

    async def on_ready(self) -> None:
        """Once connected: deliver the due reminders of Discord channels (on the first connection only)."""
        if not self._reminders_started:
            self._reminders_started = True
            send = discord_send(self, self.settings.discord.send_budget_s)
            self.service.reminders.start("discord", send, parallel=True)  # Discord keeps one copy (nonce)

    async def on_message(self, message: discord.Message) -> None:
        """Answer DMs, mentions and replies; record the rest of a guild channel."""
        if self.user is None:  # not logged in yet: no message can reach us
            return
        incoming = self.translate.message(message, self.user)
        if incoming is None:
            return
        with self.in_hand():
            await self._converse(message, incoming)

    @contextlib.contextmanager
    def in_hand(self) -> Iterator[None]:
        """Count a message being handled, so a shutdown can wait for it."""
        self._in_hand += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_hand -= 1
            if not self._in_hand:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no message is being handled."""
        await self._idle.wait()

    async def _converse(self, message: discord.Message, incoming: IncomingMessage) -> None:
        if not incoming.addressed:
            if self.settings.record_group_messages:
                await self.service.record(incoming)
            return
        async with typing_shown(message.channel):
            if self.settings.discord.streaming:
                await GrowingAnswer(message, self.settings.discord.send_budget_s).show(
                    self.service.stream(incoming)
                )
                return
            try:
                text = (await self.service.handle(incoming)).text
            except Exception:  # a bug below us must not leave the user without any answer
                log.exception("chat service failed on message %s", message.id)
                text = SORRY
        await self.send_answer(message, text)

    async def send_answer(self, message: discord.Message, text: str) -> None:
        """Send an answer in parts of at most 2,000 characters; the first replies to the user."""
        for i, part in enumerate(parts_of(text)):
            await send_with_retry(
                message.channel,
                part,
                budget_s=self.settings.discord.send_budget_s,
                reference=reply_reference(message, i),
            )

    async def on_error(self, event_method: str, /, *args, **kwargs) -> None:
        """Log a failed event handler; the client keeps running."""
        log.exception("error in Discord event %s", event_method)

    async def run_command(self, interaction: discord.Interaction, name: str, args: str = "") -> None:
        """Run a chat command for an interaction; defer when it is (or turns out) slow."""
        incoming = self.translate.interaction(interaction, name, args)
        work = asyncio.ensure_future(self.service.command(incoming, name, args))
        command = self.service.registry.find(name)
        if command is None or not command.slow:
            await asyncio.wait({work}, timeout=DEFER_AFTER_S)
        if not work.done():  # the work goes on while Discord is told to wait
            if interaction.type is discord.InteractionType.component:
                await interaction.response.defer()  # the button's message is updated later
            else:
                await interaction.response.defer(ephemeral=True, thinking=True)
        await self.deliver(interaction, await work)

    async def deliver(self, interaction: discord.Interaction, result: CommandResult) -> None:
        """Show a CommandResult: text in parts, the PNG attached, a button when it needs confirming."""
        parts: list[str | None] = [*split_text(discord_text(result), MESSAGE_LIMIT)] or [None]
        files = [discord.File(io.BytesIO(f.data), filename=f.name) for f in result.files]
        view = ConfirmView(self, result.confirm, interaction.user.id) if result.confirm else None
        # MISSING: left as it is (an edit without files keeps the message's attachments).
        attachments = files or discord.utils.MISSING
        is_button = interaction.type is discord.InteractionType.component
        if not interaction.response.is_done() and is_button:
            await interaction.response.edit_message(content=parts[0], view=view, attachments=attachments)
        elif not interaction.response.is_done():
            await interaction.response.send_message(
                parts[0], ephemeral=result.ephemeral, files=files, view=view or discord.utils.MISSING
            )
        else:
            await interaction.edit_original_response(content=parts[0], view=view, attachments=attachments)
        for part in parts[1:]:
            await interaction.followup.send(part or "", ephemeral=result.ephemeral)

    async def on_command_error(
        self, interaction: discord.Interaction, error: app_commands.AppCommandError
    ) -> None:
        """Refuse non-admins politely; log anything else and say it failed."""
        if isinstance(error, app_commands.CheckFailure):
            # The chat service's words, so a refusal reads the same on every platform.
            await say(interaction, refused(interaction.command.name if interaction.command else "that"))
            return
        log.error("slash command failed", exc_info=error)
        await say(interaction, "Sorry, that command failed. Please try again later.")


async def say(interaction: discord.Interaction, text: str) -> None:
    """An ephemeral answer, whether or not the interaction was already acknowledged."""
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True)
        else:
            await interaction.response.send_message(text, ephemeral=True)
    except (discord.HTTPException, *TRANSIENT_ERRORS) as exc:
        log.warning("could not answer interaction %s: %r", interaction.id, exc)


def add_commands(bot: DiscordBot) -> None:
    """A slash command per registry entry: admin ones carry the manage_guild hint and a real check."""

    async def admin_only(interaction: discord.Interaction) -> bool:
        if not bot.translate.interaction_admin(interaction):
            raise NotAdmin()
        return True

    for command in bot.service.registry.listed(PLATFORM, admin=True):
        slash = _slash_command(bot, command)
        if command.admin:
            slash.add_check(admin_only)
            slash.default_permissions = discord.Permissions(manage_guild=True)
        bot.tree.add_command(slash)


def _slash_command(bot: DiscordBot, command: Command) -> app_commands.Command[Any, ..., None]:
    """The app command of one registry entry; its arguments become options (choices as a list)."""

    async def callback(interaction: discord.Interaction, **options: str | None) -> None:
        args = " ".join(str(options[a.name]) for a in command.args if options.get(a.name))
        await bot.run_command(interaction, command.name, args)

    # discord.py reads the options from the callback's signature: write the one the entry describes.
    params = [inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for arg in command.args:
        kind: Any = (
            Literal[arg.choices] if arg.choices else str
        )  # a Literal of the choices, built at run time
        params.append(
            inspect.Parameter(
                arg.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=kind if arg.required else Optional[kind],  # noqa: UP045  # a runtime type
                default=inspect.Parameter.empty if arg.required else None,
            )
        )
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # read by discord.py
    app_commands.describe(**{a.name: a.help for a in command.args})(callback)
    return app_commands.Command(name=command.name, description=command.help, callback=callback)


def build_client(service: ChatService, settings: Settings, **options) -> DiscordBot:
    """The Discord client for `service`; `options` go to discord.Client (tests shorten timeouts)."""
    configure_endpoints(settings.discord.api_base_url, settings.discord.gateway_url)
    return DiscordBot(service, settings, **options)


async def run_client(client: discord.Client, token: str, stop: asyncio.Event | None = None) -> None:
    """Log in and stay connected (discord.py reconnects and resumes) until `stop` is set or cancelled."""
    # On `stop` the messages in hand are finished first; the caller bounds how long that may take.
    try:
        async with client:
            await client.login(token)
            connection = asyncio.create_task(client.connect(reconnect=True))
            stopping = asyncio.create_task((stop or asyncio.Event()).wait())
            try:
                await asyncio.wait({connection, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if connection.done():
                    connection.result()  # a login or intent failure: raise it
                    return
                log.info("stopping: finishing the messages in hand")
                if isinstance(client, DiscordBot):
                    await client.wait_idle()
            finally:
                stopping.cancel()
                connection.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await connection
    except discord.LoginFailure:
        raise RuntimeError(
            "Discord rejected DISCORD_BOT_TOKEN: copy the bot's token again (docs/discord.md)"
        ) from None
    except discord.PrivilegedIntentsRequired:
        raise RuntimeError(
            "Discord refused the message content intent: switch on Message Content Intent under "
            "Bot > Privileged Gateway Intents in the Developer Portal (docs/discord.md)"
        ) from None


async def serve(service: ChatService, settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run the Discord bot until `stop` is set (messages in hand finished) or cancelled."""
    if not settings.discord.token:
        raise RuntimeError("DISCORD_BOT_TOKEN is not set (see docs/discord.md)")
    await run_client(build_client(service, settings), settings.discord.token, stop)


def _title(message: discord.Message) -> str | None:
    """The chat's name for the dashboard: `server #channel`, or the person of a DM."""
    if message.guild is None:
        return f"DM with {message.author.display_name}"
    channel = getattr(message.channel, "name", None)
    return f"{message.guild.name} #{channel}" if channel else message.guild.name
