"""Every exception the memory engine raises, under one base class.

A caller that wants any of the engine's own failures catches `MemoryEngineError`; one that
wants a kind catches its class. The modules that raise them re-export their names
(`compaction.compact.SummarizerError`, `notes.FactNotFound`, ...). The standard class
beside the base (ValueError, LookupError, PermissionError) says what kind of failure it is
to code that knows nothing of the engine.
"""

from __future__ import annotations

__all__ = [
    "ApiError",
    "FactNotFound",
    "MemoryEngineError",
    "NotTheirFact",
    "NotTheirReminder",
    "NoteLimitError",
    "ReminderNotFound",
    "SummarizerError",
    "TooManyReminders",
]


class MemoryEngineError(Exception):
    """The base of every exception the memory engine raises."""


class ApiError(MemoryEngineError):
    """A refusal with its HTTP status and a message saying what is wrong."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}  # the answer's own headers (a 405's Allow)


class SummarizerError(MemoryEngineError):
    """The summarizer failed or answered something unusable; nothing was changed."""

    def __init__(self, message: str, retry_after_ms: int | None = None):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class NoteLimitError(MemoryEngineError, ValueError):
    """The chat already keeps the most notes it may."""


class FactNotFound(MemoryEngineError, LookupError):
    """No current fact or note has that id."""


class NotTheirFact(MemoryEngineError, PermissionError):
    """The fact exists but belongs to someone other than the caller named."""


class ReminderNotFound(MemoryEngineError, LookupError):
    """No pending reminder with that id in this chat."""


class NotTheirReminder(MemoryEngineError, PermissionError):
    """The reminder belongs to someone else (and the caller is not an admin)."""


class TooManyReminders(MemoryEngineError, ValueError):
    """The chat has MAX_PENDING pending reminders already, or the person MAX_PENDING_PER_PERSON."""
