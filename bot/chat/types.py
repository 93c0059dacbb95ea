"""Neutral types shared by every adapter and the pipeline.

Adapters translate Telegram / Discord / console payloads into these and back; the pipeline
never sees a platform type, and the adapters never see the memory worker or a model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.chat.neutral import one_line

if TYPE_CHECKING:
    from bot.chat.commands.registry import Registry


@dataclass(frozen=True)
class MediaPart:
    """A voice message or picture of a message: what the platform says of it, and how to fetch it.

    The adapter fills in what the platform tells before any download (size, duration, pixels),
    so caps are checked first; `fetch` downloads the bytes only when the pipeline wants them.
    """

    kind: str  # "voice" (voice, audio, video notes, audio files) or "photo"
    fetch: Callable[[], Awaitable[bytes]]
    mime: str = ""
    name: str = ""  # a file name with its extension ("voice.ogg"): transcription endpoints want one
    size: int | None = None  # bytes, when the platform says
    duration_s: float | None = None  # voice: seconds, when the platform says
    width: int | None = None  # photo: pixels, when the platform says
    height: int | None = None


@dataclass(frozen=True)
class IncomingMessage:
    """One user message, as every adapter hands it to the pipeline."""

    chat_key: str  # e.g. "telegram:-1001234", "discord:98765", "console:alice"
    author: str  # display name
    author_id: str  # platform user id, as text
    text: str
    message_id: str | None = None  # platform message id: the idempotency key in memory
    is_admin: bool = False  # decided by the adapter from the platform's admin rights
    addressed: bool = True  # False: record into memory only, do not answer
    attachments: tuple[str, ...] = ()  # kinds of non-text parts ("photo", "voice", ...)
    platform: str = "console"
    media: tuple[MediaPart, ...] = ()  # the voice or photo parts the pipeline can read
    chat_title: str | None = None  # the chat's name on its platform (the owner's dashboard shows it)

    def __post_init__(self) -> None:
        # A display name is one line, whatever the platform allowed: it is stored, shown in
        # /why and /facts, and put in front of the person's words in groups.
        object.__setattr__(self, "author", one_line(self.author))


@dataclass(frozen=True)
class Reply:
    """What the pipeline answers to one message."""

    text: str
    tier: str | None = None
    model: str | None = None
    ok: bool = True  # False: every tier failed and `text` is the apology
    with_memory: bool = True  # False: the memory worker was unreachable
    message_id: str | None = None  # the reply's idempotency key in memory


@dataclass(frozen=True)
class File:
    """A file a command answers with (a chart, an export): adapters attach or save it."""

    name: str  # a file name with its extension, e.g. "usage.png"
    data: bytes
    mime: str = "application/octet-stream"

    @property
    def is_image(self) -> bool:
        """True for pictures, which platforms show inline (a photo) rather than as a document."""
        return self.mime.startswith("image/")


@dataclass(frozen=True)
class CommandResult:
    """The answer to a chat command: text, an optional fixed-width table, files, a confirmation step."""

    text: str
    table: str = ""  # shown in a monospaced font under `text` (columns line up)
    files: tuple[File, ...] = ()
    confirm: str | None = None  # a command the user must send (or a button must trigger) to confirm
    ephemeral: bool = True
    private: bool = False  # one person's data (an export): delivered to the asker alone, never to a group

    @property
    def full_text(self) -> str:
        """The text and the table, for places without a monospaced font of their own."""
        return f"{self.text}\n{self.table}" if self.table else self.text

    @property
    def image_png(self) -> bytes | None:
        """The first PNG picture among the files, if any."""
        return next((f.data for f in self.files if f.mime == "image/png"), None)


# How a platform sends one due reminder: (chat key, text, occurrence key); raises if not sent.
ReminderSend = Callable[[str, str, str], Awaitable[None]]


class ReminderDeliveries(Protocol):
    """The delivery of due reminders, as an adapter starts it for its platform's chats."""

    def start(
        self, platform: str, send: ReminderSend, parallel: bool = False, prefix: str | None = None
    ) -> object:
        """Deliver the due reminders of `platform`'s chats (those starting with `prefix`, when given)
        through `send`, in the background until the service closes (`parallel`: chats at once, for a
        platform that keeps one copy of a repeated send)."""


class ChatService(Protocol):
    """What adapters may call: the pipeline's whole surface towards the platforms."""

    @property
    def registry(self) -> Registry:
        """The chat commands, which every adapter renders (menus, slash commands, /help)."""

    @property
    def reminders(self) -> ReminderDeliveries:
        """The delivery of due reminders: each adapter starts it for its platform's chats."""

    async def handle(self, message: IncomingMessage) -> Reply:
        """Record the message, answer it with memory, record the answer."""

    def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        """Like `handle`, but yields the answer's text as it grows (chunks to append)."""

    async def record(self, message: IncomingMessage) -> None:
        """Record a message into memory without answering it (group chatter)."""

    async def command(self, message: IncomingMessage, name: str, args: str) -> CommandResult:
        """Run a chat command of `commands`; admin ones refuse non-admins and reveal nothing."""
