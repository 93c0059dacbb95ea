"""Commands as data: one `Command` per chat command, in one `Registry` every adapter renders.

An entry says everything a platform needs: the name (and aliases), one line of help, who may
run it (everyone or admins), its arguments, whether it is slow (Discord then acknowledges the
interaction at once) and the handler. Telegram builds its command menus and handlers from it,
Discord its slash commands, the console and /help their lists. Adding a command is one entry
and one handler; no adapter keeps a list of command names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from bot.chat.prompt import redact
from bot.chat.types import CommandResult, IncomingMessage

if TYPE_CHECKING:
    from bot.chat.chats import ChatState
    from bot.chat.memory.gateway import MemoryGateway
    from bot.chat.models.light import LightModel
    from bot.config import Settings, Tier

Who = Literal["everyone", "admin"]
HELP_LIMIT = 100  # Discord refuses longer descriptions of commands and options
REFUSED = "Sorry, /{name} is only for admins of this chat."
NOT_AVAILABLE = "Unknown command. Send /help for the list."


@dataclass(frozen=True)
class Arg:
    """One argument of a command.

    `choices`: the only values it takes (Discord offers them as a list); `rest`: it takes the
    rest of the line as free text (a note, a persona). Arguments are optional unless `required`.
    """

    name: str
    help: str
    choices: tuple[str, ...] = ()
    rest: bool = False
    required: bool = False


@dataclass(frozen=True)
class CommandContext:
    """What a handler may use: the message, its arguments, and the pipeline's parts for commands."""

    message: IncomingMessage
    args: str  # the text after the command name, stripped
    invoked_as: str  # the name as typed (an alias, say)
    memory: MemoryGateway
    chats: ChatState
    tiers: Mapping[str, Tier]
    secrets: tuple[str, ...]
    registry: Registry
    settings: Settings | None = None  # the bot's settings ([limits] for /usage, say)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # UTC now: the day of the caps
    light_model: LightModel | None = None  # one recorded call to the cheapest tier (None: none)

    @property
    def chat(self) -> str:
        """The chat key of the message."""
        return self.message.chat_key

    def redact(self, text: str) -> str:
        """`text` without any secret the bot holds."""
        return redact(text, self.secrets)


Handler = Callable[[CommandContext], Awaitable[CommandResult]]


@dataclass(frozen=True)
class Command:
    """One chat command; see the module docstring."""

    name: str
    help: str  # one line, at most HELP_LIMIT characters
    handler: Handler
    who: Who = "everyone"
    args: tuple[Arg, ...] = ()
    slow: bool = False  # a model call or a chart: Discord defers at once
    aliases: tuple[str, ...] = ()
    platforms: frozenset[str] | None = None  # None: every platform
    listed: bool = True  # False: runs when typed, shown in no list (a confirmation step, say)

    @property
    def admin(self) -> bool:
        """True when only admins may run it."""
        return self.who == "admin"

    def usage(self) -> str:
        """`/name ARG [ARG]`: how to type it."""
        parts = [f"/{self.name}"]
        for arg in self.args:
            word = "|".join(arg.choices) if arg.choices else arg.name.upper()
            parts.append(word if arg.required else f"[{word}]")
        return " ".join(parts)

    def on(self, platform: str) -> bool:
        """True when the command is offered on `platform`."""
        return self.platforms is None or platform in self.platforms


class Registry:
    """The chat commands, in the order lists show them."""

    def __init__(self, commands: Iterable[Command]) -> None:
        self._commands = list(commands)
        self._by_name: dict[str, Command] = {}
        for command in self._commands:
            if len(command.help) > HELP_LIMIT or any(len(a.help) > HELP_LIMIT for a in command.args):
                raise ValueError(f"help of /{command.name} is longer than {HELP_LIMIT} characters")
            for name in (command.name, *command.aliases):
                if name in self._by_name:
                    raise ValueError(f"two commands are called /{name}")
                self._by_name[name] = command

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands)

    def find(self, typed: str) -> Command | None:
        """The command for a typed name (`/Facts@my_bot`, an alias...), or None."""
        name = typed.strip().lower().lstrip("/").split("@", 1)[0]
        return self._by_name.get(name)

    def listed(self, platform: str, *, admin: bool) -> list[Command]:
        """The commands a user sees on `platform` (admins see every one)."""
        return [c for c in self._commands if c.listed and c.on(platform) and (admin or not c.admin)]

    def names(self, platform: str) -> list[str]:
        """Every name and alias that runs a command on `platform` (for platform handlers)."""
        return [n for c in self._commands if c.on(platform) for n in (c.name, *c.aliases)]


def refused(name: str) -> str:
    """What a non-admin reads for an admin command, on every platform: it says no, nothing more."""
    return REFUSED.format(name=name.strip().lstrip("/").split("@", 1)[0].lower())
