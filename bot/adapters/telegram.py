"""Telegram adapter (python-telegram-bot 22): updates in, neutral messages to the router, answers out.

Private chats: every text is answered. Groups: the bot answers when mentioned by @username,
replied to, or given one of its commands; other messages are recorded into memory
(`record_group_messages`) so it knows the conversation when asked. Answers are split to
Telegram's 4096 characters, sent as HTML converted from the model's Markdown, and sent again
as plain text when Telegram rejects the formatting. Flood limits and RetryAfter are handled by
PTB's AIORateLimiter. Updates of one chat are handled in order, chats in parallel.

All translation between Telegram objects and the neutral types lives in `Translator`;
handlers stay small.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from telegram import (
    BotCommand,
    BotCommandScopeAllChatAdministrators,
    BotCommandScopeAllPrivateChats,
    BotCommandScopeDefault,
    Chat,
    ChatMember,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    ReplyParameters,
    Update,
    User,
)
from telegram.constants import ChatAction, MessageLimit, ParseMode
from telegram.error import BadRequest, Forbidden, NetworkError, TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    ApplicationBuilder,
    BaseUpdateProcessor,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from bot.adapters.split import split_text
from bot.adapters.streaming import GrowingText
from bot.chat_keys import telegram_chat_key
from bot.config import Settings
from bot.router.commands import refused
from bot.router.types import ChatService, CommandResult, IncomingMessage

T = TypeVar("T")

log = logging.getLogger(__name__)

TEXT_LIMIT = MessageLimit.MAX_TEXT_LENGTH  # 4096
CAPTION_LIMIT = MessageLimit.CAPTION_LENGTH  # 1024
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
ADMIN_CACHE_S = 60.0
# Streaming: Telegram allows about one message (edits included) per second in a chat and 20 a
# minute in a group.
EDIT_INTERVAL_PRIVATE_S = 1.0
EDIT_INTERVAL_GROUP_S = 3.0
FINAL_RENDER_TRIES = 5

EVERYONE_COMMANDS = {
    "start": "what I am and how to talk to me",
    "help": "the commands",
    "why": "the memory used for my last answer here",
    "forgetme": "forget what you said here and what I know about you",
    "tier": "show the model tier, or choose one: /tier NAME, /tier auto",
}
ADMIN_COMMANDS = {
    "facts": "what I know about the people here (admins)",
    "summary": "the rolling summary of this chat (admins)",
    "usage": "model calls and cost per tier, with a chart (admins)",
    "memory": "memory statistics (admins)",
    "mode": "memory mode: /mode auto or /mode full (admins)",
    "compact": "summarize older messages now (admins)",
    "forget": "forget this whole chat, after confirmation (admins)",
}

GREETING = (
    "Hi! I'm a chat bot with a memory: I remember what is said here and use it when I answer. "
    "In groups, mention me or reply to me to ask something."
)
NOT_TEXT = "Sorry, I can only read text for now. Please write your message (a caption works too)."
BROKEN = "Sorry, something went wrong while answering. Please try again."
ONLY_ASKER = "Only the person who asked can confirm this."


# ----------------------------------------------------------------------------- translation


@dataclass
class Translator:
    """Telegram objects <-> neutral types, in one place: chat keys, gating, text, attachments."""

    settings: Settings
    bot_id: int = 0
    bot_username: str = ""

    def chat_key(self, chat: Chat, user: User | None) -> str:
        """`telegram:<chat id>`, or `telegram:<chat id>:<user id>` for per-user memory in groups."""
        return telegram_chat_key(
            chat.id,
            private=chat.type == Chat.PRIVATE,
            user_id=user.id if user is not None else None,
            memory_scope=self.settings.memory_scope,
        )

    def addressed(self, message: Message) -> bool:
        """Private chats always; groups when the bot is @mentioned, replied to, or commanded."""
        if message.chat.type == Chat.PRIVATE:
            return True
        reply = message.reply_to_message
        if reply is not None and reply.from_user is not None and reply.from_user.id == self.bot_id:
            return True
        return self._mentions_bot(message)

    def _mentions_bot(self, message: Message) -> bool:
        mention = "@" + self.bot_username.lower()
        entities = message.parse_entities() or message.parse_caption_entities()
        for entity, value in entities.items():
            if entity.type == MessageEntity.MENTION and value.lower() == mention:
                return True
            if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == self.bot_id:
                return True
            if entity.type == MessageEntity.BOT_COMMAND and value.lower().endswith(mention):
                return True
        return False

    def text(self, message: Message) -> str:
        """The message's words (a caption counts), without the @mention of the bot."""
        raw = message.text or message.caption or ""
        if self.bot_username:
            raw = re.sub(rf"@{re.escape(self.bot_username)}\b", "", raw, flags=re.IGNORECASE)
        return re.sub(r"[ \t]{2,}", " ", raw).strip()

    @staticmethod
    def attachments(message: Message) -> tuple[str, ...]:
        """Kinds of non-text parts ("photo", "voice", ...)."""
        kinds = (
            "photo",
            "sticker",
            "voice",
            "audio",
            "video",
            "video_note",
            "animation",
            "document",
            "location",
            "contact",
            "poll",
            "dice",
        )
        return tuple(k for k in kinds if getattr(message, k, None))

    def incoming(
        self, message: Message, *, text: str, is_admin: bool, addressed: bool = True
    ) -> IncomingMessage:
        """The neutral message for one Telegram message."""
        user = message.from_user
        # Anonymous admins and channels speak as a chat, not as a person.
        speaker = message.sender_chat
        return IncomingMessage(
            chat_key=self.chat_key(message.chat, user),
            author=speaker.title or str(speaker.id) if speaker else _display_name(user, message.chat),
            author_id=str(speaker.id if speaker else user.id if user else message.chat.id),
            text=text,
            message_id=str(message.message_id),
            is_admin=is_admin,
            addressed=addressed,
            attachments=self.attachments(message),
            platform="telegram",
        )

    def from_button(self, message: Message, user: User, text: str, is_admin: bool) -> IncomingMessage:
        """The neutral message for a button press under a bot message."""
        return IncomingMessage(
            chat_key=self.chat_key(message.chat, user),
            author=_display_name(user, message.chat),
            author_id=str(user.id),
            text=text,
            is_admin=is_admin,
            platform="telegram",
        )


def _display_name(user: User | None, chat: Chat) -> str:
    if user is None:
        return chat.title or str(chat.id)  # anonymous admins and channel posts
    return user.full_name or user.username or str(user.id)


# ----------------------------------------------------------------------------- formatting

_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)(?:\n)?```|```(.*?)```", re.S)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_EMPHASIS = [
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S), r"<b>\1</b>"),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)", re.S), r"<b>\1</b>"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S), r"<s>\1</s>"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"<i>\1</i>"),
    (re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"), r"<i>\1</i>"),
    (re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.M), r"<b>\1</b>"),
]
_KEPT = re.compile("\x00(\\d+)\x00")
_TAG = re.compile(r"<(/?)([a-z]+)[^>]*>")


def markdown_to_html(text: str) -> str:
    """Convert the Markdown models write into Telegram HTML (code kept verbatim, the rest escaped).

    Emphasis that would nest badly (`**a *b** c*`) is left as literal characters, so the
    result always parses; Telegram refusing it anyway is handled by the caller.
    """
    text = text.replace("\x00", "")  # the placeholder mark below
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.append(_inline_html(text[pos : m.start()]))
        if m.group(3) is not None:
            out.append(f"<pre>{_esc(m.group(3))}</pre>")
        else:
            lang, body = m.group(1), _esc(m.group(2))
            out.append(
                f'<pre><code class="language-{lang}">{body}</code></pre>' if lang else f"<pre>{body}</pre>"
            )
        pos = m.end()
    out.append(_inline_html(text[pos:]))
    return "".join(out)


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _inline_html(text: str) -> str:
    """Code spans and links are set aside first, so emphasis never reaches into them."""
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return f"\x00{len(kept) - 1}\x00"

    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{_esc(m.group(1))}</code>"), text)
    # A URL holding a code span is no link (the span would become a tag inside href).
    text = _LINK.sub(
        lambda m: (
            m.group(0)
            if "\x00" in m.group(2)
            else keep(f'<a href="{html.escape(m.group(2))}">{_emphasis(m.group(1))}</a>')
        ),
        text,
    )
    text = _emphasis(text)
    while "\x00" in text:  # a link's text may hold a code span: restore until none is left
        text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return text


def _emphasis(text: str) -> str:
    escaped = _esc(text)
    converted = escaped
    for pattern, repl in _EMPHASIS:
        converted = pattern.sub(repl, converted)
    return converted if _well_nested(converted) else escaped


def _well_nested(fragment: str) -> bool:
    """True when the tags in `fragment` open and close in a proper nesting."""
    stack: list[str] = []
    for closing, name in _TAG.findall(fragment):
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def has_formatting(text: str) -> bool:
    """True when the Markdown in `text` would show differently from the plain text."""
    return markdown_to_html(text) != _esc(text.replace("\x00", ""))


def split_for_telegram(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """Split an answer into parts Telegram accepts (at most `limit` characters each)."""
    return split_text(text, limit) or ["…"]


def is_format_error(exc: TelegramError) -> bool:
    """True when Telegram refused a message because of its entities (HTML/Markdown)."""
    text = str(exc).lower()
    return isinstance(exc, BadRequest) and ("parse entities" in text or "can't find end" in text)


# ----------------------------------------------------------------------------- the bot


class ChatOrder(BaseUpdateProcessor):
    """Handle the updates of one chat in arrival order, different chats concurrently."""

    def __init__(self, max_concurrent_updates: int = 256) -> None:
        super().__init__(max_concurrent_updates)
        self._locks: dict[int, tuple[asyncio.Lock, list[int]]] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Run `coroutine` once the earlier updates of the same chat are done."""
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None:
            await coroutine
            return
        lock, users = self._locks.setdefault(chat.id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                await coroutine
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._locks.pop(chat.id, None)  # idle chats cost nothing

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to tear down."""


@dataclass
class AdminCheck:
    """Who is admin of a chat: ADMIN_USER_IDS, the user of a private chat, or a chat admin/owner."""

    owners: frozenset[str]
    ttl: float = ADMIN_CACHE_S
    _cache: dict[tuple[int, int], tuple[float, bool]] = field(default_factory=dict)

    def quick(self, chat: Chat, user: User | None, sender_chat: Chat | None = None) -> bool | None:
        """The answer without asking Telegram, or None when Telegram must be asked."""
        if sender_chat is not None and sender_chat.id == chat.id:
            return True  # an anonymous admin, posting as the group itself
        if user is None:
            return False
        if str(user.id) in self.owners or chat.type == Chat.PRIVATE:
            return True
        hit = self._cache.get((chat.id, user.id))
        if hit and hit[0] > time.monotonic():
            return hit[1]
        return None

    async def __call__(self, chat: Chat, user: User | None, sender_chat: Chat | None = None) -> bool:
        """Decide, asking Telegram (get_chat_member, cached briefly) for group members."""
        known = self.quick(chat, user, sender_chat)
        if known is not None:
            return known
        try:
            member = await chat.get_member(user.id)
            admin = member.status in (ChatMember.ADMINISTRATOR, ChatMember.OWNER)
        except TelegramError as exc:
            # Unknown means not admin: refusing is safe, granting is not.
            log.warning("get_chat_member(%s, %s) failed: %r", chat.id, user.id, exc)
            return False
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[(chat.id, user.id)] = (time.monotonic() + self.ttl, admin)
        return admin


class TelegramBot:
    """The handlers: each one translates, calls the router once, and sends what comes back."""

    def __init__(
        self,
        router: ChatService,
        settings: Settings,
        typing_interval: float = 4.0,
        edit_intervals: tuple[float, float] = (EDIT_INTERVAL_PRIVATE_S, EDIT_INTERVAL_GROUP_S),
    ) -> None:
        self.router = router
        self.settings = settings
        self.translate = Translator(settings)
        self.admin = AdminCheck(settings.admin_user_ids)
        self.typing_interval = typing_interval  # Telegram shows "typing" for about 5 s
        self.edit_intervals = edit_intervals

    def edit_interval(self, chat: Chat) -> float:
        """Seconds between two renders of a streamed answer in this chat."""
        return self.edit_intervals[0] if chat.type == Chat.PRIVATE else self.edit_intervals[1]

    def install(self, app: Application) -> None:
        """Register the handlers on `app` (new messages only: edits are ignored on purpose)."""
        new = filters.UpdateType.MESSAGE
        for name in (*EVERYONE_COMMANDS, *ADMIN_COMMANDS):
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
        everyone = [BotCommand(n, d) for n, d in EVERYONE_COMMANDS.items()]
        admins = everyone + [BotCommand(n, d) for n, d in ADMIN_COMMANDS.items()]
        await app.bot.set_my_commands(everyone, scope=BotCommandScopeDefault())
        await app.bot.set_my_commands(admins, scope=BotCommandScopeAllChatAdministrators())
        await app.bot.set_my_commands(admins, scope=BotCommandScopeAllPrivateChats())

    # --- handlers

    async def on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A text message: answer it when addressed, else record it (groups)."""
        message = update.effective_message
        await self._converse(message, self.translate.text(message), update.update_id)

    async def on_other(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A sticker, photo, voice...: a caption counts as text; otherwise a polite word in private."""
        message = update.effective_message
        text = self.translate.text(message)
        if text:
            await self._converse(message, text, update.update_id)
        elif message.chat.type == Chat.PRIVATE:
            await message.reply_text(NOT_TEXT)

    async def on_edited(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """Edits are neither answered nor recorded again: the original already was."""
        log.debug(
            "ignoring edit of message %s in chat %s",
            update.effective_message.message_id,
            update.effective_chat.id,
        )

    async def on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """One of the bot's commands: admin ones are refused plainly to others."""
        message = update.effective_message
        name = message.text.split()[0][1:].split("@")[0].lower()
        args = " ".join(context.args or [])
        is_admin = await self.admin(message.chat, message.from_user, message.sender_chat)
        if name in ADMIN_COMMANDS and not is_admin:
            await message.reply_text(refused(name))
            return
        incoming = self.translate.incoming(message, text=message.text, is_admin=is_admin)
        async with self.typing(message.chat):
            result = await self._command(incoming, name, args)
        await self.deliver(message, result, incoming.author_id)

    async def on_unknown_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A command that is not ours: say so when it was meant for us, else let it pass."""
        message = update.effective_message
        if self.translate.addressed(message):
            name = message.text.split()[0][1:].split("@")[0].lower()
            is_admin = await self.admin(
                message.chat, message.from_user, message.sender_chat
            )  # aliases (/stats)
            incoming = self.translate.incoming(message, text=message.text, is_admin=is_admin)
            await self.deliver(message, await self.router.command(incoming, name, ""), incoming.author_id)

    async def on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        """A confirmation button: only the person who asked may press it."""
        query = update.callback_query
        action, asker, command = _parse_button(query.data)
        if str(query.from_user.id) != asker:
            await query.answer(ONLY_ASKER, show_alert=True)
            return
        name, _, args = command.lstrip("/").partition(" ")
        is_admin = await self.admin(query.message.chat, query.from_user)
        if action == "confirm" and name in ADMIN_COMMANDS and not is_admin:
            # Callback data comes from the client: a forged button must not touch the question.
            await query.answer(refused(name), show_alert=True)
            return
        await query.answer()
        if action == "cancel":
            await query.edit_message_text("Cancelled: nothing was forgotten.")
            return
        incoming = self.translate.from_button(query.message, query.from_user, command, is_admin)
        result = await self.router.command(incoming, name, args)
        # A late press (the question expired) gets the question again, with its buttons.
        markup = self.confirm_buttons(asker, result.confirm) if result.confirm else None
        with _unless_not_modified():
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

    async def _converse(self, message: Message, text: str, update_id: int) -> None:
        """Answer an addressed message; record an unaddressed one (when allowed)."""
        if not text:
            return
        if not self.translate.addressed(message):
            if self.settings.record_group_messages:
                await self.router.record(
                    self.translate.incoming(message, text=text, is_admin=False, addressed=False)
                )
            return
        is_admin = await self.admin(message.chat, message.from_user, message.sender_chat)
        incoming = self.translate.incoming(message, text=text, is_admin=is_admin)
        if self.settings.telegram.streaming:
            async with self.typing(message.chat) as stop_typing:
                await GrowingAnswer(self, message, update_id, before_first=stop_typing).show(
                    self.router.stream(incoming)
                )
            return
        async with self.typing(message.chat):
            reply = await self.router.handle(incoming)
        try:
            await self.send_text(message.chat, reply.text, reply_to=message.message_id)
        except NetworkError as exc:  # BadRequest included: the retry budget is spent or it is final
            log.error(
                "error handling update %s: the answer was not delivered to chat %s (kept in memory): %r",
                update_id,
                message.chat.id,
                exc,
            )

    async def _command(self, incoming: IncomingMessage, name: str, args: str) -> CommandResult:
        if name == "start":
            help_text = (await self.router.command(incoming, "help", "")).text
            return CommandResult(f"{GREETING}\n\n{help_text}")
        return await self.router.command(incoming, name, args)

    async def deliver(self, message: Message, result: CommandResult, asker: str) -> None:
        """Send a command's answer: a photo when there is a chart, a button when it needs confirming."""
        if result.image_png:
            # The caption is a table: monospaced, so its columns line up.
            fits = len(result.text) <= CAPTION_LIMIT
            caption = f"<pre>{html.escape(result.text, quote=False)}</pre>" if fits else None
            await message.reply_photo(result.image_png, caption=caption, parse_mode=ParseMode.HTML)
            if not fits:
                await self.send_text(message.chat, result.text, reply_to=message.message_id, markdown=False)
        elif result.confirm:
            await message.reply_text(
                self.confirm_text(result), reply_markup=self.confirm_buttons(asker, result.confirm)
            )
        else:
            await self.send_text(message.chat, result.text, reply_to=message.message_id, markdown=False)

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
        """The router asks to send the confirming command; here a button does it."""
        if not result.confirm:
            return result.text
        return result.text.replace(f"Send {result.confirm}", f"Press the button (or send {result.confirm})")

    async def send_text(
        self, chat: Chat, text: str, *, reply_to: int | None = None, markdown: bool = True
    ) -> list[Message]:
        """Send a long text in parts; formatted as HTML, again as plain text if Telegram refuses it."""
        sent = []
        for n, part in enumerate(split_for_telegram(text)):
            sent.append(
                await self.send_part(chat, part, reply_to=reply_to if n == 0 else None, markdown=markdown)
            )
        return sent

    async def send_part(
        self, chat: Chat, part: str, *, reply_to: int | None = None, markdown: bool = True
    ) -> Message:
        """Send one part (<= 4096 chars), formatted when `markdown`, plain if refused; retried through outages."""
        return await self.patiently(
            f"sending to chat {chat.id}", lambda: self._send_part_once(chat, part, reply_to, markdown)
        )

    async def patiently(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run one Bot API call, retrying 5xx, refused connections and timeouts until the send budget is spent."""
        # An outage must not lose an answer; a final refusal (BadRequest) raises at once.
        deadline = time.monotonic() + self.settings.telegram.send_budget_s
        delay = 0.25
        while True:
            try:
                return await call()
            except BadRequest:
                raise  # a NetworkError to PTB, but final: the same call would be refused again
            except NetworkError as exc:  # 5xx, connection refused or reset, TimedOut
                if time.monotonic() + delay > deadline:
                    raise
                log.warning("%s failed (%r); retrying in %.2f s", what, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _send_part_once(self, chat: Chat, part: str, reply_to: int | None, markdown: bool) -> Message:
        reply = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
        if markdown:
            try:
                return await chat.send_message(
                    markdown_to_html(part), parse_mode=ParseMode.HTML, reply_parameters=reply
                )
            except BadRequest as exc:
                if not is_format_error(exc):
                    raise
                log.info("Telegram refused the formatting (%s); sending plain text", exc)
        return await chat.send_message(part, reply_parameters=reply)

    async def edit_part(self, message: Message, part: str, *, markdown: bool) -> None:
        """Replace the text of a sent part (formatted or plain, like `send_part`), retried like it."""
        await self.patiently(
            f"editing message {message.message_id}", lambda: self._edit_part_once(message, part, markdown)
        )

    @staticmethod
    async def _edit_part_once(message: Message, part: str, markdown: bool) -> None:
        with _unless_not_modified():
            if markdown:
                try:
                    await message.edit_text(markdown_to_html(part), parse_mode=ParseMode.HTML)
                    return
                except BadRequest as exc:
                    if not is_format_error(exc):
                        raise
                    log.info("Telegram refused the formatting (%s); editing as plain text", exc)
            await message.edit_text(part)

    @contextlib.asynccontextmanager
    async def typing(self, chat: Chat) -> AsyncIterator[Callable[[], Awaitable[None]]]:
        """Show "typing..." now and renew it until the block ends or the yielded `stop()` returns."""
        stopping = asyncio.Event()

        async def keep_typing() -> None:
            while True:
                try:
                    await chat.send_action(ChatAction.TYPING)
                except TelegramError as exc:
                    log.debug("typing action failed in %s: %r", chat.id, exc)  # cosmetic only
                # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow a cancellation.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.typing_interval):
                        await stopping.wait()
                if stopping.is_set():
                    return

        task = asyncio.create_task(keep_typing())

        async def stop() -> None:
            # No action may land after the answer (it would show "typing" under it): let the
            # one in flight finish rather than cancel it after it may have reached Telegram.
            stopping.set()
            await asyncio.wait({task}, timeout=5.0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        try:
            yield stop
        finally:
            await stop()


class GrowingAnswer(GrowingText):
    """An answer shown while the model writes it: sent after about a sentence, then edited in
    place at a paced rate; past 4096 characters it continues in a new message.

    Intermediate versions are plain text (half-written Markdown rarely parses); the last
    render carries the final formatting, plain if Telegram refuses it, and is retried until
    it lands, so the final text is never lost. Each render shows `split_for_telegram(text)`,
    so the final messages are the ones a non-streamed answer would have been.
    """

    def __init__(
        self,
        bot: TelegramBot,
        question: Message,
        update_id: int,
        before_first: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__()
        self.bot, self.question, self.update_id = bot, question, update_id
        self.interval = bot.edit_interval(question.chat)
        self.before_first = before_first  # stops "typing..." before the answer shows
        self.messages: list[Message] = []
        self.shown: list[tuple[str, bool]] = []  # (text, formatted) of each message
        self.refused = False  # Telegram refused for good: stop rendering

    def _stream_failed(self) -> None:
        log.exception("error handling update %s: the answer stream failed", self.update_id)
        self.text = (self.text.rstrip() + "\n\n" + BROKEN).lstrip()

    async def _render_loop(self) -> None:
        final_tries = 0
        final_deadline = 0.0
        while True:
            text, done = await self._next_version()
            complete = await self._render(text, final=done)
            if done:
                final_tries += 1
                # Each call is already retried through an outage; this bounds the whole ending.
                final_deadline = final_deadline or time.monotonic() + self.bot.settings.telegram.send_budget_s
                if complete or final_tries >= FINAL_RENDER_TRIES or time.monotonic() > final_deadline:
                    if not complete:
                        log.error("gave up showing the end of the answer to %s", self.question.message_id)
                    return
                self.changed.set()  # the final text must land: try again after the pause
            # Pacing: Telegram's flood limits count edits too.
            await asyncio.sleep(self.interval)

    async def _render(self, text: str, final: bool) -> bool:
        """Bring the messages to `text`; True when every part shows what it should (or never can)."""
        if self.refused:
            return True
        # Telegram trims each message: compare trimmed parts, or a new trailing newline would
        # cost an edit that Telegram refuses as "not modified".
        parts = [p.strip() or "…" for p in split_for_telegram(text)]
        complete = True
        for i, part in enumerate(parts):
            want = (part, final)
            try:
                if i >= len(self.messages):
                    reply_to = self.question.message_id if i == 0 else None
                    if i == 0 and self.before_first:
                        await self.before_first()
                    self.messages.append(
                        await self.bot.send_part(self.question.chat, part, reply_to=reply_to, markdown=final)
                    )
                    self.shown.append(want)
                elif self.shown[i] == (part, False) and final and not has_formatting(part):
                    self.shown[i] = want  # formatting would change nothing: spare the edit
                elif self.shown[i] != want:
                    await self.bot.edit_part(self.messages[i], part, markdown=final)
                    self.shown[i] = want
            except (BadRequest, Forbidden) as exc:
                # Final (blocked, chat gone, message deleted): trying again would not help.
                log.error("error handling update %s: Telegram refused the answer: %r", self.update_id, exc)
                self.refused = True
                return True
            except TelegramError as exc:
                log.warning(
                    "showing part %d of the answer to %s failed: %r", i, self.question.message_id, exc
                )
                complete = False
                break  # parts go in order: the next render continues from here
        for extra in self.messages[len(parts) :]:  # the split moved back (a late code block)
            with contextlib.suppress(TelegramError):
                await extra.delete()
        del self.messages[len(parts) :], self.shown[len(parts) :]
        return complete


@contextlib.contextmanager
def _unless_not_modified() -> Iterator[None]:
    """An edit Telegram refuses as "not modified" already shows what we wanted: not an error."""
    try:
        yield
    except BadRequest as exc:
        if "not modified" not in str(exc).lower():
            raise


def _button(action: str, asker: str, command: str) -> str:
    data = f"{action}:{asker}:{command}"
    return data.encode()[:64].decode(errors="ignore")  # Telegram allows 64 bytes of callback data


def _parse_button(data: str | None) -> tuple[str, str, str]:
    action, _, rest = (data or "").partition(":")
    asker, _, command = rest.partition(":")
    return action, asker, command


# ----------------------------------------------------------------------------- wiring


def build_application(
    router: ChatService,
    settings: Settings,
    *,
    typing_interval: float = 4.0,
    edit_intervals: tuple[float, float] = (EDIT_INTERVAL_PRIVATE_S, EDIT_INTERVAL_GROUP_S),
    rate_limiter: AIORateLimiter | None = None,
) -> Application:
    """The PTB Application for `router`, with handlers, rate limiter and per-chat ordering."""
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
    bot = TelegramBot(router, settings, typing_interval=typing_interval, edit_intervals=edit_intervals)
    bot.install(app)
    app.bot_data["adapter"] = bot
    return app


def _file_url(base: str) -> str:
    """The file URL that goes with a Bot API URL: .../bot -> .../file/bot."""
    head, sep, tail = base.rpartition("/bot")
    return f"{head}/file/bot{tail}" if sep else base + "/file/bot"


def webhook_secret(token: str) -> str:
    """The secret Telegram sends with each webhook call: derived from the token, never configured."""
    return hashlib.sha256(b"webhook:" + token.encode()).hexdigest()[:48]


async def serve(
    router: ChatService,
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
    webhook_port = webhook_port or settings.telegram.webhook_port
    stop = stop or asyncio.Event()
    app = app or build_application(router, settings)
    adapter: TelegramBot = app.bot_data["adapter"]
    await _initialize(app)
    async with app:  # initialized above; shut down on the way out
        await adapter.learn_identity(app)
        try:
            await adapter.register_commands(app)
        except TelegramError as exc:
            log.warning("could not register the command menus: %r", exc)  # the commands still work
        await app.start()
        try:
            if settings.telegram.webhook_url:
                async with _webhook_server(app, settings, webhook_listen, webhook_port):
                    await stop.wait()
            else:
                await app.updater.start_polling(timeout=poll_timeout, allowed_updates=ALLOWED_UPDATES)
                log.info("Telegram bot @%s polling", app.bot.username)
                await stop.wait()
            log.info("stopping: finishing the updates in hand")
        finally:
            if app.updater.running:
                await app.updater.stop()
            await app.stop()


async def _initialize(app: Application, first_delay: float = 1.0, max_delay: float = 60.0) -> None:
    """getMe until Telegram answers: a network outage at start-up is waited out, a bad token is not."""
    delay = first_delay
    while True:
        try:
            await app.initialize()
            return
        except BadRequest:
            raise  # a BadRequest is a NetworkError to PTB, but waiting will not fix it
        except NetworkError as exc:
            log.warning("Telegram unreachable at start-up (%r); retrying in %.0f s", exc, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay)


@contextlib.asynccontextmanager
async def _webhook_server(app: Application, settings: Settings, host: str, port: int) -> AsyncIterator[None]:
    """An aiohttp server receiving Telegram's webhook calls (checked by secret) into the update queue."""
    from aiohttp import web

    url = settings.telegram.webhook_url or ""
    secret = webhook_secret(settings.telegram.token or "")

    async def receive(request: web.Request) -> web.Response:
        if request.headers.get("X-Telegram-Bot-Api-Secret-Token") != secret:
            return web.Response(status=403)
        try:
            update = Update.de_json(await request.json(), app.bot)
        except Exception:  # malformed body: Telegram would not send one; refuse it
            log.warning("refused a malformed webhook body")
            return web.Response(status=400)
        await app.update_queue.put(update)
        return web.Response(text="ok")

    web_app = web.Application()
    web_app.router.add_post(urlsplit(url).path or "/", receive)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        await app.bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)
        log.info("Telegram bot @%s receiving updates at %s", app.bot.username, url)
        yield
    finally:
        await runner.cleanup()
