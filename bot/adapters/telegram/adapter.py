"""Telegram adapter (python-telegram-bot 22): updates in, neutral messages to the chat service, answers out.

Private chats: every text is answered. Groups: the bot answers when mentioned by @username,
replied to, or given one of its commands; other messages are recorded into memory
(`record_group_messages`) so it knows the conversation when asked. Answers are split to
Telegram's 4096 characters, sent as HTML converted from the model's Markdown, and sent again
as plain text when Telegram rejects the formatting. Flood limits and RetryAfter are handled by
PTB's AIORateLimiter. Updates of one chat are handled in order, chats in parallel.

The parts: translation and admin rights (chat.py), formatting (html.py), sending (send.py),
streamed answers (stream.py), the webhook server (webhook.py).
The commands, their menus and their handlers come from the chat service's command registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import math

from telegram import (
    BotCommand,
    BotCommandScopeAllChatAdministrators,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeDefault,
    Chat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    Update,
)
from telegram.constants import MessageLimit, ParseMode
from telegram.error import BadRequest, Forbidden, NetworkError, TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from bot.adapters.reminder_sends import telegram_send
from bot.adapters.telegram.chat import AdminCheck, ChatOrder, Translator
from bot.adapters.telegram.html import markdown_to_html, split_for_telegram
from bot.adapters.telegram.send import TelegramSender, unless_not_modified
from bot.adapters.telegram.stream import BROKEN, GrowingAnswer
from bot.adapters.telegram.webhook import ALLOWED_UPDATES, webhook_secret, webhook_server
from bot.chat.commands.registry import refused
from bot.chat.retry import RetryPlan, patiently
from bot.chat.types import ChatService, CommandResult, MediaPart
from bot.config import Settings

__all__ = [
    "ALLOWED_UPDATES",
    "BROKEN",
    "TelegramBot",
    "build_application",
    "markdown_to_html",
    "serve",
    "split_for_telegram",
    "webhook_secret",
]

log = logging.getLogger(__name__)

PLATFORM = "telegram"
CAPTION_LIMIT = MessageLimit.CAPTION_LENGTH  # 1024
# Streaming: Telegram allows about one message (edits included) per second in a chat and 20 a
# minute in a group.
EDIT_INTERVAL_PRIVATE_S = 1.0
EDIT_INTERVAL_GROUP_S = 3.0
NOT_TEXT = "Sorry, I can only read text for now. Please write your message (a caption works too)."
ONLY_ASKER = "Only the person who asked can confirm this."
SENT_PRIVATELY = "I sent it to you in our private chat."
PRIVATE_FIRST = (
    "That is for your eyes only, and I can't write to you privately yet: open a chat with {who}, "
    "press Start, then send /{command} here again."
)


class TelegramBot:
    """The handlers: each one translates, calls the chat service once, and sends what comes back."""

    def __init__(
        self,
        service: ChatService,
        settings: Settings,
        typing_interval: float = 4.0,
        edit_intervals: tuple[float, float] = (EDIT_INTERVAL_PRIVATE_S, EDIT_INTERVAL_GROUP_S),
    ) -> None:
        self.service = service
        self.settings = settings
        self.translate = Translator(settings)
        self.admin = AdminCheck(settings.admin_user_ids)
        self.sender = TelegramSender(RetryPlan(budget_s=settings.telegram.send_budget_s), typing_interval)
        self.edit_intervals = edit_intervals
        self.webhook_port: int | None = None  # the port the webhook server listens on, once it does

    def edit_interval(self, chat: Chat) -> float:
        """Seconds between two renders of a streamed answer in this chat."""
        return self.edit_intervals[0] if chat.type == Chat.PRIVATE else self.edit_intervals[1]

    def install(self, app: Application) -> None:
        """Register the handlers on `app` (new messages only: edits are ignored on purpose)."""
        new = filters.UpdateType.MESSAGE
        for name in self.service.registry.names(PLATFORM):
            app.add_handler(CommandHandler(name, self.on_command, filters=new))
        app.add_handler(MessageHandler(new & filters.TEXT & ~filters.COMMAND, self.on_text))
        app.add_handler(MessageHandler(new & filters.COMMAND, self.on_unknown_command))
        app.add_handler(MessageHandler(new & ~filters.TEXT & ~filters.StatusUpdate.ALL, self.on_other))
        app.add_handler(MessageHandler(filters.UpdateType.EDITED, self.on_edited))
        app.add_handler(CallbackQueryHandler(self.on_button, pattern=r"^(confirm|cancel):"))
        app.add_error_handler(self.on_error)

    async def learn_identity(self, app: Application) -> None:
        """Remember the bot's own id and username (for mentions and replies)."""
        me = app.bot.bot
        self.translate.bot_id, self.translate.bot_username = me.id, me.username or ""

    async def register_commands(self, app: Application) -> None:
        """set_my_commands: everyone's commands by default, all of them for admins and in private."""
        registry = self.service.registry
        everyone = [BotCommand(c.name, c.help) for c in registry.listed(PLATFORM, admin=False)]
        admins = [BotCommand(c.name, c.help) for c in registry.listed(PLATFORM, admin=True)]
        await app.bot.set_my_commands(everyone, scope=BotCommandScopeDefault())
        await app.bot.set_my_commands(admins, scope=BotCommandScopeAllChatAdministrators())
        await app.bot.set_my_commands(admins, scope=BotCommandScopeAllPrivateChats())

    # --- handlers

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A text message: answer it when addressed, else record it (groups)."""
        message = _message(update)
        await self._converse(message, self.translate.text(message), update.update_id)

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A photo, voice...: read by the service; a sticker's caption counts as text; else a polite word."""
        message = _message(update)
        text = self.translate.text(message)
        media = self.translate.media(message)
        if text or media:
            await self._converse(message, text, update.update_id, media)
        elif message.chat.type == Chat.PRIVATE:
            await message.reply_text(NOT_TEXT)

    async def on_edited(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Edits are neither answered nor recorded again: the original already was."""
        message = _message(update)
        log.debug("ignoring edit of message %s in chat %s", message.message_id, message.chat.id)

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """One of the bot's commands: admin ones are refused plainly to others."""
        message = _message(update)
        name = _command_name(message)
        args = " ".join(context.args or [])
        is_admin = await self.admin(message.chat, message.from_user, message.sender_chat)
        command = self.service.registry.find(name)
        if command is not None and command.admin and not is_admin:
            await message.reply_text(refused(name))
            return
        incoming = self.translate.incoming(message, text=message.text or "", is_admin=is_admin)
        async with self.sender.typing(message.chat):
            result = await self.service.command(incoming, name, args)
        await self.deliver(message, result, incoming.author_id)

    async def on_unknown_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A command that is not ours: say so when it was meant for us, else let it pass."""
        message = _message(update)
        if self.translate.addressed(message):
            is_admin = await self.admin(message.chat, message.from_user, message.sender_chat)
            incoming = self.translate.incoming(message, text=message.text or "", is_admin=is_admin)
            result = await self.service.command(incoming, _command_name(message), "")
            await self.deliver(message, result, incoming.author_id)

    async def on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A confirmation button: only the person who asked may press it."""
        query = update.callback_query
        if query is None or not isinstance(query.message, Message):
            return  # a button under a message too old to be seen: nothing to update
        action, asker, command_text = _parse_button(query.data)
        if str(query.from_user.id) != asker:
            await query.answer(ONLY_ASKER, show_alert=True)
            return
        name, _, args = command_text.lstrip("/").partition(" ")
        is_admin = await self.admin(query.message.chat, query.from_user)
        command = self.service.registry.find(name)
        if action == "confirm" and command is not None and command.admin and not is_admin:
            # Callback data comes from the client: a forged button must not touch the question.
            await query.answer(refused(name), show_alert=True)
            return
        await query.answer()
        if action == "cancel":
            await query.edit_message_text("Cancelled: nothing was forgotten.")
            return
        incoming = self.translate.from_button(query.message, query.from_user, command_text, is_admin)
        result = await self.service.command(incoming, name, args)
        # A late press (the question expired) gets the question again, with its buttons.
        markup = self.confirm_buttons(asker, result.confirm) if result.confirm else None
        with unless_not_modified():
            await query.edit_message_text(self.confirm_text(result), reply_markup=markup)

    async def on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Log every handler error with its update id; tell a private chat something went wrong."""
        update_id = update.update_id if isinstance(update, Update) else None
        log.error("error handling update %s: %r", update_id, context.error, exc_info=context.error)
        if (
            isinstance(update, Update)
            and update.effective_chat
            and update.effective_chat.type == Chat.PRIVATE
        ):
            with contextlib.suppress(TelegramError):
                await context.bot.send_message(update.effective_chat.id, BROKEN)

    # --- the work

    async def _converse(
        self, message: Message, text: str, update_id: int, media: tuple[MediaPart, ...] = ()
    ) -> None:
        """Answer an addressed message; record an unaddressed one (when allowed)."""
        if not text and not media:
            return
        if not self.translate.addressed(message):
            if self.settings.record_group_messages:
                await self.service.record(
                    self.translate.incoming(message, text=text, is_admin=False, addressed=False, media=media)
                )
            return
        is_admin = await self.admin(message.chat, message.from_user, message.sender_chat)
        incoming = self.translate.incoming(message, text=text, is_admin=is_admin, media=media)
        if self.settings.telegram.streaming:
            async with self.sender.typing(message.chat) as stop_typing:
                answer = GrowingAnswer(
                    self.sender,
                    message,
                    update_id,
                    interval=self.edit_interval(message.chat),
                    before_first=stop_typing,
                )
                await answer.show(self.service.stream(incoming))
            return
        async with self.sender.typing(message.chat):
            reply = await self.service.handle(incoming)
        if not reply.text:  # nothing to say (a stranger refused a moment ago)
            return
        try:
            await self.sender.send_text(message.chat, reply.text, reply_to=message.message_id)
        except NetworkError as exc:  # BadRequest included: the retry budget is spent or it is final
            log.error(
                "error handling update %s: the answer was not delivered to chat %s (kept in memory): %r",
                update_id,
                message.chat.id,
                exc,
            )

    async def deliver(self, message: Message, result: CommandResult, asker: str) -> None:
        """Send a command's answer: pictures as photos, other files as documents, a button to confirm."""
        if result.private and message.chat.type != Chat.PRIVATE:
            await self.deliver_privately(message, result)
            return
        images = [f for f in result.files if f.is_image]
        caption_used = False
        for n, image in enumerate(images):
            caption = _caption(result) if n == 0 else None
            caption_used = caption is not None
            await message.reply_photo(image.data, caption=caption, parse_mode=ParseMode.HTML)
        if result.confirm:
            await message.reply_text(
                self.confirm_text(result), reply_markup=self.confirm_buttons(asker, result.confirm)
            )
        elif not caption_used:
            await self.send_result_text(message, result)
        for document in (f for f in result.files if not f.is_image):
            await message.reply_document(document.data, filename=document.name)

    async def deliver_privately(self, message: Message, result: CommandResult) -> None:
        """One person's data asked for in a group: it goes to their private chat; the group hears where."""
        user = message.from_user
        try:
            if user is None or message.sender_chat is not None:  # an anonymous admin has no private chat
                raise Forbidden("no private chat with an anonymous sender")
            await message.get_bot().send_message(user.id, result.text)
            for file in result.files:
                await message.get_bot().send_document(user.id, file.data, filename=file.name)
        except (Forbidden, BadRequest) as exc:  # they never opened a private chat with the bot
            log.info("no private chat with the asker in %s: %s", message.chat.id, exc)
            who = f"@{self.translate.bot_username}" if self.translate.bot_username else "me"
            await message.reply_text(PRIVATE_FIRST.format(who=who, command=_command_name(message)))
            return
        await message.reply_text(SENT_PRIVATELY)

    async def send_result_text(self, message: Message, result: CommandResult) -> None:
        """A command's text (its table in a monospaced block), in parts like an answer."""
        if result.table:
            # The table as a code block: the renderer keeps it verbatim, in a monospaced font.
            text = f"{result.text}\n```\n{result.table}\n```"
            await self.sender.send_text(message.chat, text, reply_to=message.message_id)
        else:
            await self.sender.send_text(
                message.chat, result.text, reply_to=message.message_id, markdown=False
            )

    @staticmethod
    def confirm_buttons(asker: str, confirm: str) -> InlineKeyboardMarkup:
        """ "Yes" runs the confirming command; only `asker` may press either button."""
        return InlineKeyboardMarkup(
            [
                [
                    InlineKeyboardButton("Yes, forget", callback_data=_button("confirm", asker, confirm)),
                    InlineKeyboardButton("Cancel", callback_data=_button("cancel", asker, "")),
                ]
            ]
        )

    @staticmethod
    def confirm_text(result: CommandResult) -> str:
        """The chat service asks to send the confirming command; here a button does it."""
        if not result.confirm:
            return result.text
        return result.text.replace(f"Send {result.confirm}", f"Press the button (or send {result.confirm})")


def _message(update: Update) -> Message:
    """The message of an update the handler filters guarantee to carry one."""
    message = update.effective_message
    if message is None:  # the filters only let message updates through
        raise ValueError(f"update {update.update_id} carries no message")
    return message


def _command_name(message: Message) -> str:
    return (message.text or "/").split()[0][1:].split("@")[0].lower()


def _caption(result: CommandResult) -> str | None:
    """The HTML caption of a command's picture (a table in <pre>), or None when it is too long."""
    if len(result.full_text) > CAPTION_LIMIT:
        return None
    if not result.table:
        return html.escape(result.text, quote=False)
    return f"{html.escape(result.text, quote=False)}\n<pre>{html.escape(result.table, quote=False)}</pre>"


def _button(action: str, asker: str, command: str) -> str:
    data = f"{action}:{asker}:{command}"
    return data.encode()[:64].decode(errors="ignore")  # Telegram allows 64 bytes of callback data


def _parse_button(data: str | None) -> tuple[str, str, str]:
    action, _, rest = (data or "").partition(":")
    asker, _, command = rest.partition(":")
    return action, asker, command


# ----------------------------------------------------------------------------- wiring


def build_application(
    service: ChatService,
    settings: Settings,
    *,
    typing_interval: float = 4.0,
    edit_intervals: tuple[float, float] = (EDIT_INTERVAL_PRIVATE_S, EDIT_INTERVAL_GROUP_S),
    rate_limiter: AIORateLimiter | None = None,
) -> Application:
    """The PTB Application for `service`, with handlers, rate limiter and per-chat ordering."""
    token = settings.telegram.token
    if not token:
        raise RuntimeError("TELEGRAM_BOT_TOKEN is not set (see docs/telegram.md)")
    builder = (
        ApplicationBuilder()
        .token(token)
        # RetryAfter is retried after the wait Telegram asks for; flood limits are respected.
        .rate_limiter(rate_limiter or AIORateLimiter(max_retries=3))
        .concurrent_updates(ChatOrder())
    )
    if settings.telegram.api_base_url:
        base = settings.telegram.api_base_url.rstrip("/")
        builder = builder.base_url(base).base_file_url(_file_url(base))
    app = builder.build()
    bot = TelegramBot(service, settings, typing_interval=typing_interval, edit_intervals=edit_intervals)
    bot.install(app)
    app.bot_data["adapter"] = bot
    return app


def _file_url(base: str) -> str:
    """The file URL that goes with a Bot API URL: .../bot -> .../file/bot."""
    head, sep, tail = base.rpartition("/bot")
    return f"{head}/file/bot{tail}" if sep else base + "/file/bot"


async def serve(
    service: ChatService,
    settings: Settings,
    *,
    webhook_listen: str | None = None,
    webhook_port: int | None = None,
    poll_timeout: int = 30,
    app: Application | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the bot until `stop` is set (or cancelled): long polling, or a webhook when
    TELEGRAM_WEBHOOK_URL is set (listening on TELEGRAM_WEBHOOK_LISTEN:TELEGRAM_WEBHOOK_PORT).

    On `stop` no new update is taken, and the updates being handled are finished (PTB's
    `Application.stop` waits for them) before it returns.
    """
    webhook_listen = webhook_listen or settings.telegram.webhook_listen
    webhook_port = settings.telegram.webhook_port if webhook_port is None else webhook_port  # 0: any
    stop = stop or asyncio.Event()
    app = app or build_application(service, settings)
    adapter: TelegramBot = app.bot_data["adapter"]
    updater = app.updater
    if updater is None:  # build_application always makes one
        raise RuntimeError("the Telegram application has no updater")
    await _initialize(app)
    async with app:  # initialized above; shut down on the way out
        await adapter.learn_identity(app)
        try:
            await adapter.register_commands(app)
        except TelegramError as exc:
            log.warning("could not register the command menus: %r", exc)  # the commands still work
        await app.start()
        service.reminders.start("telegram", telegram_send(app.bot, adapter.sender))  # one at a time
        try:
            if settings.telegram.webhook_url:
                async with webhook_server(app, settings, webhook_listen, webhook_port) as port:
                    adapter.webhook_port = port
                    await stop.wait()
            else:
                await updater.start_polling(timeout=poll_timeout, allowed_updates=ALLOWED_UPDATES)
                log.info("Telegram bot @%s polling", app.bot.username)
                await stop.wait()
            log.info("stopping: finishing the updates in hand")
        finally:
            if updater.running:
                await updater.stop()
            await app.stop()


async def _initialize(app: Application, first_delay: float = 1.0, max_delay: float = 60.0) -> None:
    """getMe until Telegram answers: a network outage at start-up is waited out, a bad token is not."""
    # A BadRequest is a NetworkError to PTB, but waiting will not fix it.
    await patiently(
        app.initialize,
        what="getMe (Telegram unreachable at start-up)",
        plan=RetryPlan(budget_s=math.inf, first_s=first_delay, max_s=max_delay),
        transient=(NetworkError,),
        final=(BadRequest,),
    )
