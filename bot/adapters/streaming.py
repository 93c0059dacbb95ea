"""What Telegram and Discord share when an answer is shown while the model writes it."""

from __future__ import annotations

import abc
import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

# The first message waits for about a sentence, so it does not flicker from a few letters.
# A colon alone is not enough ("Sure: h…"); a line break is ("Here is the list:\n").
FIRST_SHOW_CHARS = 80
_SENTENCE_END = re.compile(r"[.!?…][)\]\"'»”’]*\s|\n")


def worth_showing(text: str) -> bool:
    """True once `text` is about a sentence: enough for a first message."""
    return len(text) >= FIRST_SHOW_CHARS or _SENTENCE_END.search(text) is not None


class GrowingText(abc.ABC):
    """An answer read from the model's stream while a render loop shows it.

    `show` collects the text and signals `changed`; a platform subclass writes `_render_loop`
    (sending, editing and pacing its messages, usually driven by `_next_version`) and
    `_stream_failed`, which logs and words a stream that broke midway (called inside the
    `except`, so `log.exception` sees the error). What arrived before the break is kept.
    """

    def __init__(self) -> None:
        self.text = ""
        self.done = False
        self.changed = asyncio.Event()
        self.messages: list[Any] = []  # the platform messages showing the answer so far

    async def show(self, chunks: AsyncIterator[str]) -> None:
        """Read the stream to its end while the render loop keeps the messages up to date."""
        renderer = asyncio.create_task(self._render_loop())
        try:
            async for piece in chunks:
                self.text += piece
                self.changed.set()
        except Exception:  # a bug below us: keep what arrived and say so
            self._stream_failed()
        finally:
            self.done = True
            self.changed.set()
            await renderer

    async def _next_version(self) -> tuple[str, bool]:
        """Wait for a text worth rendering; it and whether it is the final one."""
        while True:
            await self.changed.wait()
            self.changed.clear()
            done, text = self.done, self.text
            if done or self.messages or worth_showing(text):
                return text, done

    @abc.abstractmethod
    async def _render_loop(self) -> None:
        """Keep the platform's messages up to date until the final text is shown."""

    @abc.abstractmethod
    def _stream_failed(self) -> None:
        """Log the stream's error and add the platform's note that the answer was cut."""
