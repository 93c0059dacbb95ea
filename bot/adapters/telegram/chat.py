"""Telegram objects <-> the chat service's neutral types, and who may do what in a Telegram chat.

`Translator` turns PTB messages into `IncomingMessage` values (chat keys, mention gating,
text, attachments); `AdminCheck` decides admin rights (cached briefly); `ChatOrder` handles
the updates of one chat in arrival order while different chats proceed concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from telegram import Chat, ChatMember, Message, MessageEntity, PhotoSize, Update, User
from telegram.error import TelegramError
from telegram.ext import BaseUpdateProcessor

from bot.chat.types import IncomingMessage, MediaPart
from bot.chat_keys import telegram_chat_key
from bot.config import Settings

log = logging.getLogger(__name__)

ADMIN_CACHE_S = 60.0


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
        parts = (
            ("photo", message.photo),
            ("sticker", message.sticker),
            ("voice", message.voice),
            ("audio", message.audio),
            ("video", message.video),
            ("video_note", message.video_note),
            ("animation", message.animation),
            ("document", message.document),
            ("location", message.location),
            ("contact", message.contact),
            ("poll", message.poll),
            ("dice", message.dice),
        )
        return tuple(kind for kind, part in parts if part)

    def media(self, message: Message) -> tuple[MediaPart, ...]:
        """The parts the chat service can read: voice, audio, video notes, photos, image or audio files.

        Each is fetched only when the chat service asks (getFile, then the download under
        base_file_url); sizes and durations come from the message itself.
        """
        parts: list[MediaPart] = []
        voice, audio = message.voice, message.audio
        audio_name = (audio and audio.file_name) or "audio.mp3"
        for kind, item, mime, name in (  # what the platform says of the file first, else ours
            ("voice", voice, (voice and voice.mime_type) or "audio/ogg", "voice.ogg"),
            ("voice", audio, (audio and audio.mime_type) or "audio/mpeg", audio_name),
            ("voice", message.video_note, "video/mp4", "video_note.mp4"),
        ):
            if item is not None:
                parts.append(
                    MediaPart(
                        kind,
                        _fetcher(message, item.file_id),
                        mime=mime,
                        name=name,
                        size=item.file_size,
                        duration_s=_seconds(item.duration),
                    )
                )
        if message.photo:
            size = _photo_size(message.photo, self.settings.photos.max_side_px)
            parts.append(
                MediaPart(
                    "photo",
                    _fetcher(message, size.file_id),
                    mime="image/jpeg",
                    name="photo.jpg",
                    size=size.file_size,
                    width=size.width,
                    height=size.height,
                )
            )
        doc = message.document
        mime = (doc.mime_type or "") if doc else ""
        if doc is not None and mime.startswith(("image/", "audio/")):  # a picture or sound sent as a file
            kind = "photo" if mime.startswith("image/") else "voice"
            parts.append(
                MediaPart(
                    kind,
                    _fetcher(message, doc.file_id),
                    mime=mime,
                    name=doc.file_name or "",
                    size=doc.file_size,
                )
            )
        return tuple(parts)

    def incoming(
        self,
        message: Message,
        *,
        text: str,
        is_admin: bool,
        addressed: bool = True,
        media: tuple[MediaPart, ...] = (),
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
            media=media,
            chat_title=message.chat.title or message.chat.full_name or None,
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


def _fetcher(message: Message, file_id: str) -> Callable[[], Awaitable[bytes]]:
    """Download one file of a message: getFile, then its bytes (from base_file_url)."""

    async def fetch() -> bytes:
        file = await message.get_bot().get_file(file_id)
        return bytes(await file.download_as_bytearray())

    return fetch


def _seconds(duration: int | timedelta) -> float:
    """A duration as PTB gives it (seconds, or a timedelta with PTB_TIMEDELTA set) in seconds."""
    return duration.total_seconds() if isinstance(duration, timedelta) else float(duration)


def _photo_size(sizes: Sequence[PhotoSize], max_side: int) -> PhotoSize:
    """The largest size whose longer side is at most `max_side` (else the smallest)."""
    fitting = [s for s in sizes if max(s.width, s.height) <= max_side]
    if fitting:
        return max(fitting, key=lambda s: s.width * s.height)
    return min(sizes, key=lambda s: s.width * s.height)


def _display_name(user: User | None, chat: Chat) -> str:
    if user is None:
        return chat.title or str(chat.id)  # anonymous admins and channel posts
    return user.full_name or user.username or str(user.id)


class _Turns:
    """One chat's waiting updates: one handled at a time, each person's in their order, the
    people with updates waiting served in turn (round robin)."""

    def __init__(self) -> None:
        self.waiting: dict[int | None, deque[asyncio.Event]] = {}
        self.order: deque[int | None] = deque()  # whose turn comes next, each person once
        self.busy = False
        self.last: int | None = None  # whose update is in hand (or was last)

    def join(self, who: int | None) -> asyncio.Event:
        """A place in `who`'s line; its event is set when it is that update's turn."""
        turn = asyncio.Event()
        if who not in self.waiting:
            self.waiting[who] = deque()
            self.order.append(who)
        self.waiting[who].append(turn)
        if not self.busy:
            self.next()
        return turn

    def leave(self, who: int | None, turn: asyncio.Event) -> None:
        """A wait given up before its turn came."""
        line = self.waiting.get(who)
        if line is not None and turn in line:
            line.remove(turn)
            if not line:
                del self.waiting[who]
                self.order.remove(who)

    def next(self) -> None:
        """The update in hand is done: start the next person's next one."""
        if not self.order:
            self.busy = False
            return
        if self.order[0] == self.last and len(self.order) > 1:
            self.order.rotate(-1)  # who was just served waits for the others' turns
        who = self.last = self.order.popleft()
        line = self.waiting[who]
        turn = line.popleft()
        if line:
            self.order.append(who)  # their next one after everyone else's waiting one
        else:
            del self.waiting[who]
        self.busy = True
        turn.set()


class ChatOrder(BaseUpdateProcessor):
    """Handle one chat's updates one at a time, each person's in arrival order, and the people
    with updates waiting in turn: a burst from one member (30 quick /reminders) does not hold
    another's message behind all of it. Different chats run concurrently."""

    def __init__(self, max_concurrent_updates: int = 256) -> None:
        super().__init__(max_concurrent_updates)
        self._chats: dict[int, _Turns] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        """Run `coroutine` when its turn in its chat comes."""
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None or not isinstance(update, Update):
            await coroutine
            return
        sender = update.effective_sender
        who = sender.id if sender is not None else None
        turns = self._chats.setdefault(chat.id, _Turns())
        turn = turns.join(who)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():
                self._done(chat.id, turns)
            else:
                turns.leave(who, turn)
                self._forget_if_idle(chat.id, turns)
            if asyncio.iscoroutine(coroutine):
                coroutine.close()  # never awaited: no warning
            raise
        try:
            await coroutine
        finally:
            self._done(chat.id, turns)

    def _done(self, chat_id: int, turns: _Turns) -> None:
        turns.next()
        self._forget_if_idle(chat_id, turns)

    def _forget_if_idle(self, chat_id: int, turns: _Turns) -> None:
        if not turns.busy and not turns.order:
            self._chats.pop(chat_id, None)  # idle chats cost nothing

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
        if user is None:  # quick() answers every message without a user; kept for the type checker
            return False
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
