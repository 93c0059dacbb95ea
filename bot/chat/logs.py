"""Logging for a bot in production: every record knows its chat and request, none carries a secret.

`handling(chat_key)` opens the context of one handled message (a fresh request id);
`install(secrets)` adds `bot_chat` and `bot_request` to every log record made inside it (names
no library passes in `extra`, which would clash) and
redacts the secrets (API keys, bot tokens, the memory token) from every record's text and
traceback, whichever library logged it (httpx logs Telegram URLs, which hold the bot token).
`KeyValueFormatter` and `bot.jsonlog.JsonFormatter` (the format the memory host writes too)
print them; the CLI picks one (LOG_FORMAT=json).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from bot.chat.prompt import redact
from bot.jsonlog import JsonFormatter

_CONTEXT: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("bot_request", default=("", ""))
# The record factory is process-wide by nature (logging is), so the secrets it hides are too:
# counted, so two routers in one process (tests) can come and go in any order.
_SECRETS: Counter[str] = Counter()
_installed = False


@contextlib.contextmanager
def handling(chat_key: str) -> Iterator[str]:
    """The context of one handled message; yields its request id."""
    request_id = uuid.uuid4().hex[:12]
    token = _CONTEXT.set((chat_key, request_id))
    try:
        yield request_id
    finally:
        _CONTEXT.reset(token)


def current() -> tuple[str, str]:
    """(chat key, request id) of the message being handled, or ("", "")."""
    return _CONTEXT.get()


def install(secrets: Iterable[str]) -> Callable[[], None]:
    """Redact `secrets` from every log record from now on; returns the function that stops it."""
    global _installed
    values = [s for s in secrets if s and len(s) >= 6]
    _SECRETS.update(values)
    if not _installed:
        previous = logging.getLogRecordFactory()

        def factory(*args, **kwargs) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            record.bot_chat, record.bot_request = _CONTEXT.get()
            _scrub(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True

    def uninstall() -> None:
        _SECRETS.subtract(values)
        for value in [v for v, n in _SECRETS.items() if n <= 0]:
            del _SECRETS[value]

    return uninstall


def _scrub(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it at emit time
        return
    clean = redact(message, _SECRETS)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[0] is not None:
        # Formatted now, so every handler prints this redacted text instead of its own.
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info), _SECRETS)


class KeyValueFormatter(logging.Formatter):
    """`time level logger [chat=... req=...] message`: the context only when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        """One line (plus a traceback when there is one)."""
        chat, req = getattr(record, "bot_chat", ""), getattr(record, "bot_request", "")
        record.context = f" [chat={chat} req={req}]" if req else ""
        return super().format(record)


def configure(level: int, json_lines: bool = False) -> None:
    """Root logging for the CLI: key=value lines, or JSON lines."""
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s%(context)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


# The turn line is the pipeline's: it keeps the logger name operators filter on.
_TURNS = logging.getLogger("bot.chat.pipeline")


@dataclass
class Turn:
    """One handled message, as its log line tells it (never its text)."""

    chat: str
    started: float = field(default_factory=time.monotonic)
    request_id: str = "-"
    tier: str | None = None
    ok: bool = False  # until it is answered: a cancelled or broken turn says ok=False
    with_memory: bool = False
    # how it ended: refused, recorded, notice, capped, answered, apology, cut_off, stopped (the
    # reader left), cancelled (a shutdown), broken (an error)
    exit: str = "broken"


def log_turn(turn: Turn) -> None:
    """The one line per handled message, early exits included: who, which tier, how long, how
    it went and how it ended. No text, no secrets."""
    latency_ms = round((time.monotonic() - turn.started) * 1000.0)
    _TURNS.info(
        "turn chat=%s req=%s tier=%s latency_ms=%d ok=%s memory=%s exit=%s",
        turn.chat,
        turn.request_id,
        turn.tier or "-",
        latency_ms,
        turn.ok,
        turn.with_memory,
        turn.exit,
        extra={
            # Named fields of the JSON line; the line is logged after its context closed,
            # so it names its own chat and request.
            "fields": {
                "chat": turn.chat,
                "request_id": turn.request_id,
                "tier": turn.tier,
                "latency_ms": latency_ms,
                "ok": turn.ok,
                "with_memory": turn.with_memory,
                "exit": turn.exit,
            },
        },
    )
