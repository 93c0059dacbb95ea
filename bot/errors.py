"""Every exception the bot raises, under one base class: `except ChatbotError` catches them all.

    ChatbotError
    ├── SettingsError (ValueError)       a settings file or variable that cannot be read
    ├── SpeakerNotFound (LookupError)    `chatbot chat --as NAME` names no one (or several)
    ├── ReminderParseError (ValueError)  words that cannot be read as a reminder
    ├── MemoryUnavailable                the memory worker cannot be reached: retry later
    ├── MemoryRefused                    the memory worker refused the request: retrying will not help
    ├── ModelFailure                     one failed model attempt, of a `FailureKind`
    ├── AllTiersFailed (ExceptionGroup)  every tier failed within the budget
    ├── TranscriptionFailed              the speech-to-text call failed
    ├── BadImage                         bytes that are not a picture
    ├── NotDelivered                     a platform did not take a due reminder
    ├── ExportError (ValueError)         a chat export that cannot be imported
    └── ImportFailed (RuntimeError)      the memory worker did not take an import batch
        └── ChatForgotten                the chat was forgotten while it was imported: it stops

The Discord adapter's `NotAdmin` derives from it too, and from discord.py's `CheckFailure`
(it lives with the adapter: only that module imports discord.py). The modules that raise
these import them from here, so each name is also found where it is used.
This module imports nothing of the bot: any module may import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from bot.chat.models.base import Attempt

# Why a model attempt failed; `retryable` on the failure says whether trying again may help.
FailureKind = Literal[
    "rate_limit",  # HTTP 429
    "server",  # HTTP 5xx, 408, 409
    "timeout",  # no answer in time
    "connection",  # the endpoint could not be reached
    "malformed",  # an answer that is not a chat completion, or has no text
    "refused",  # HTTP 400/401/403/404/422: this tier will not work however often we ask
    "unavailable",  # no tier could be asked (missing, cooling down, no budget left)
    "internal",  # a bug in a model call: never retried
]


class ChatbotError(Exception):
    """The base class of every exception the bot raises."""


class SettingsError(ChatbotError, ValueError):
    """A settings file or variable that cannot be read: names the file (or variable) and key.

    `problems`: every value found wrong (the message is them all, the first first)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class SpeakerNotFound(ChatbotError, LookupError):
    """No one (or more than one person) in the chat goes by that name; the message says who does."""


class ReminderParseError(ChatbotError, ValueError):
    """The words cannot be read as a reminder: `str(err)` says why, with an example."""


class MemoryUnavailable(ChatbotError):
    """The memory worker could not be reached or failed on its side (retry later).

    `status` is the HTTP status when it answered (401/403: a wrong token, which no retry heals).
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class MemoryRefused(ChatbotError):
    """The memory worker refused the request (4xx); `status` and `error` say why."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"memory worker refused ({status}): {error}")
        self.status = status
        self.error = error


class ModelFailure(ChatbotError):
    """One failed model attempt: its `kind`, and whether trying again could help."""

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind: FailureKind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


class AllTiersFailed(ChatbotError, ExceptionGroup):
    """Every tier failed within the budget; the exceptions are the attempts' failures, in order
    (a bug in a model call among them, when that is what ended it), `attempts` their records."""

    attempts: tuple[Attempt, ...] = ()


class TranscriptionFailed(ChatbotError):
    """The speech-to-text call failed; `why` is what the user may read."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class BadImage(ChatbotError):
    """The bytes are not a picture Pillow can decode."""


class NotDelivered(ChatbotError):
    """The platform did not take the reminder within the send budget."""


class ExportError(ChatbotError, ValueError):
    """A file that cannot be imported; the message names the file, and the line or the field at fault."""

    def __init__(self, path: Path | str, what: str, line: int | None = None, col: int | None = None):
        self.path, self.what, self.line, self.col = str(path), what, line, col
        where = f"{path}:{line}:{col}" if line is not None else str(path)
        super().__init__(f"{where}: {what}")


class ImportFailed(ChatbotError, RuntimeError):
    """The memory worker refused or did not take a batch; what was sent before it stays stored."""


class ChatForgotten(ImportFailed):
    """The chat, or someone in it, was forgotten while it was imported: its import stops."""
