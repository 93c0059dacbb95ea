"""The size of a message the bot takes: at most what the memory stores of one (64 KiB of UTF-8).

A longer message is cut at the edge, before the model and memory see it, and the reader is
told: sent whole, it went to the model but the memory refused it, and nobody said so.
"""

from __future__ import annotations

from dataclasses import replace

from bot.chat.types import IncomingMessage
from memory_engine.api.validation import MAX_TEXT_BYTES

# Room within the memory's limit for what the pipeline adds to a message's text (a photo's
# mark, a redaction's placeholder, the cut's own "…").
MAX_MESSAGE_BYTES = MAX_TEXT_BYTES - 2048
ELLIPSIS = "…"


def bounded(text: str, max_bytes: int = MAX_MESSAGE_BYTES) -> tuple[str, str]:
    """(text within `max_bytes` of UTF-8, the notice that says it was cut, or "" when it fits)."""
    if len(text) <= max_bytes // 4:  # a fast path: fits whatever its characters
        return text, ""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, ""
    kept = data[:max_bytes].decode("utf-8", "ignore")  # never half a character
    space = kept.rfind(" ", len(kept) - 200)  # end at a word when one ends near the cut
    if space > 0:
        kept = kept[:space]
    notice = (
        f"(Your message is {_kb(len(data))}, more than the {_kb(max_bytes)} I take at once: "
        f"I read and remember its first {_kb(len(kept.encode('utf-8', 'surrogatepass')))} only.)"
    )
    return kept.rstrip() + ELLIPSIS, notice


def bounded_message(message: IncomingMessage) -> tuple[IncomingMessage, str]:
    """The message with its text within the memory's limit, and the notice when it was cut."""
    text, notice = bounded(message.text)
    return (replace(message, text=text) if notice else message), notice


def _kb(size: int) -> str:
    return f"{size / 1024:.0f} KB"
