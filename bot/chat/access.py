"""Who may use the bot: ALLOWED_USER_IDS / ALLOWED_CHAT_IDS (or [access] in bot.toml), ADMIN_USER_IDS.

Both lists empty: everyone may (the default, and the risk the README states). Otherwise a
person listed may use the bot anywhere, and anyone may in a chat listed; the owners in
ADMIN_USER_IDS always may (a platform admin of some chat is not enough: anyone can make a
group of their own). The pipeline asks `check` before it records or sends anything, so
nothing of a stranger reaches the memory or a model. A stranger's messages get one short
refusal at most once per `refusal_interval_s` per person; their commands, which ask the
bot directly (and on Discord must be answered), are refused every time. The console
(`chatbot chat`) is always allowed: its user is whoever runs the bot.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from bot.chat.types import IncomingMessage
from bot.config import AccessSettings

REFUSAL = "Sorry, this bot is private: its owner has not allowed you to use it here."
REMEMBERED_STRANGERS = 10000  # refusal times kept; the oldest go first


@dataclass(frozen=True)
class Verdict:
    """May this message be handled, and what (if anything) to answer a stranger."""

    allowed: bool
    refusal: str = ""  # "" for a stranger refused recently: say nothing


ALLOWED = Verdict(True)


def _platform_chat_id(chat_key: str) -> str:
    """The platform's chat id in a chat key: "telegram:-100123:42" -> "-100123"."""
    parts = chat_key.split(":")
    return parts[1] if len(parts) > 1 else chat_key


class AccessPolicy:
    """Decides, per message, whether the bot may take it (see the module docstring)."""

    def __init__(
        self,
        settings: AccessSettings,
        owners: frozenset[str] = frozenset(),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.users = settings.allowed_user_ids
        self.chats = settings.allowed_chat_ids
        self.owners = owners
        self.interval_s = settings.refusal_interval_s
        self._clock = clock
        self._refused_at: OrderedDict[tuple[str, str], float] = OrderedDict()

    @property
    def open_to_everyone(self) -> bool:
        """True when no list restricts the bot."""
        return not self.users and not self.chats

    def allows(self, message: IncomingMessage) -> bool:
        """True when the author may use the bot in this chat."""
        if self.open_to_everyone or message.platform == "console":
            return True  # the console's user is whoever runs the bot
        # Ids may be written bare ("42") or with their platform ("telegram:42").
        platform = message.platform
        author = message.author_id
        if {author, f"{platform}:{author}"} & (self.users | self.owners):
            return True
        chat = _platform_chat_id(message.chat_key)
        return bool({chat, f"{platform}:{chat}", message.chat_key} & self.chats)

    def check(self, message: IncomingMessage, *, command: bool = False) -> Verdict:
        """The verdict for one message; a stranger's refusal text at most once an interval."""
        if self.allows(message):
            return ALLOWED
        if command or not message.addressed:
            # Commands are refused each time; chatter the bot was not asked about, never.
            return Verdict(False, REFUSAL if command else "")
        key = (message.platform, message.author_id)
        now = self._clock()
        last = self._refused_at.get(key)
        if last is not None and now - last < self.interval_s:
            return Verdict(False)
        self._refused_at[key] = now
        self._refused_at.move_to_end(key)
        while len(self._refused_at) > REMEMBERED_STRANGERS:
            self._refused_at.popitem(last=False)
        return Verdict(False, REFUSAL)
