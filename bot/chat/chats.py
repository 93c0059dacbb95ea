"""What the bot process keeps per chat, in one place: the last prompt (for /why), confirmations
asked for and not yet given, the forced tier, the topic start seen (/new), and the lock that
keeps a chat's messages in order.

Everything here is a bounded cache of this process, never the truth (the memory worker holds
that). `forget_author` and `forget_chat` clear it the same way for every kind of entry, and
bump the chat's generation so an answer that was in flight during the forgetting cannot put
the forgotten words back.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

CACHE_LIMIT = 10000  # chats remembered per kind of entry; the oldest goes first
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class LastPrompt:
    """The memory prompt (already redacted) of the last answer in a chat, and its tier choice."""

    prompt: str
    tier: str
    reasons: tuple[str, ...] = ()
    at: float = field(default_factory=time.time)
    persona: str = ""  # the chat's persona when the answer was made ("" for the default)


class _Bounded(OrderedDict[K, V]):
    """An insertion-ordered map that drops its oldest entries past CACHE_LIMIT."""

    def put(self, key: K, value: V) -> None:
        """Set `key`, as the newest entry."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > CACHE_LIMIT:
            self.popitem(last=False)


class ChatState:
    """Per-chat state of this process; see the module docstring."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._prompts: _Bounded[str, LastPrompt] = _Bounded()
        self._asked: _Bounded[tuple[str, str], float] = _Bounded()  # (chat, action) -> time asked
        self._forced: _Bounded[str, str] = _Bounded()
        self._topics: _Bounded[str, str] = _Bounded()  # chat -> when /new started its topic (UTC)
        self._generations: _Bounded[str, int] = _Bounded()
        # (chat, person) -> the generation their forget made; "" stands for the whole chat.
        self._forgot: _Bounded[tuple[str, str], int] = _Bounded()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # -- order ------------------------------------------------------------------------

    def lock(self, chat: str) -> asyncio.Lock:
        """The lock that keeps one chat's records in arrival order (gone once nobody holds it)."""
        lock = self._locks.get(chat)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[chat] = lock
        return lock

    def generation(self, chat: str) -> int:
        """A number that changes whenever something of the chat is forgotten."""
        return self._generations.get(chat, 0)

    # -- /why -------------------------------------------------------------------------

    def remember_prompt(self, chat: str, last: LastPrompt, generation: int) -> None:
        """Keep the prompt of the answer being made, unless the chat forgot since `generation`."""
        if generation == self.generation(chat):
            self._prompts.put(chat, last)

    def last_prompt(self, chat: str) -> LastPrompt | None:
        """The prompt of the last answer made in this process, if any."""
        return self._prompts.get(chat)

    # -- confirmations ----------------------------------------------------------------

    def ask(self, chat: str, action: str) -> None:
        """Note that `action` was asked for in `chat` and now waits for its confirmation."""
        self._asked.put((chat, action), self._clock())

    def confirm(self, chat: str, action: str, within_s: float) -> bool:
        """True (once) when `action` was asked for in `chat` less than `within_s` seconds ago."""
        asked = self._asked.pop((chat, action), None)
        return asked is not None and self._clock() - asked <= within_s

    # -- forced tier ------------------------------------------------------------------

    def forced_tier(self, chat: str) -> str | None:
        """The tier forced for a chat with /tier, if any."""
        return self._forced.get(chat)

    def force_tier(self, chat: str, tier: str | None) -> None:
        """Force a tier for a chat (None: back to automatic)."""
        self._forced.pop(chat, None)
        if tier is not None:
            self._forced.put(chat, tier)

    # -- topic start (/new) -------------------------------------------------------------

    def topic_started(self, chat: str, at: str) -> None:
        """Note the topic start the worker just recorded, for /why before the next answer."""
        self._topics.put(chat, at)

    def topic_start(self, chat: str) -> str | None:
        """When /new last started a topic in this chat, as seen by this process (None: not seen)."""
        return self._topics.get(chat)

    # -- forgetting -------------------------------------------------------------------

    def forget_author(self, chat: str, author_id: str) -> None:
        """Drop whatever of one person this process holds for `chat`.

        The cached prompt quotes everyone of the chat mixed together, so it goes whole; the
        tier setting and open confirmations are the chat's, not the person's, and stay.
        """
        self._prompts.pop(chat, None)
        self._bump(chat)
        self._forgot.put((chat, author_id), self.generation(chat))

    def forget_chat(self, chat: str) -> None:
        """Drop everything this process holds for `chat`."""
        self._prompts.pop(chat, None)
        self._forced.pop(chat, None)
        self._topics.pop(chat, None)
        for key in [k for k in self._asked if k[0] == chat]:
            del self._asked[key]
        self._bump(chat)
        self._forgot.put((chat, ""), self.generation(chat))

    def forgot_since(self, chat: str, author_id: str, generation: int) -> bool:
        """True when `author_id` (or the whole chat) was forgotten after `generation` was read."""
        return any(self._forgot.get((chat, who), 0) > generation for who in (author_id, ""))

    def _bump(self, chat: str) -> None:
        self._generations.put(chat, self.generation(chat) + 1)
