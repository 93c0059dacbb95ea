"""`chatbot chat --as NAME`: find a person of a chat (an imported group) by display name or id.

The memory worker knows who wrote what: the chat's export pages list every message with
its `author` and `author_id`. An id matches exactly; a name matches without regard to case
or accents ("jose" is José), the whole display name first, else a first name alone when one
person has it; a name two people share is refused (with their names and ids, to pick one).
"""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bot.errors import SpeakerNotFound
from memory_engine.api.wire import ExportPage

SHOWN = 20  # people listed when the name matches no one


@dataclass(frozen=True)
class Speaker:
    """Who the console user speaks as: the name shown and the id facts are kept under."""

    author: str
    author_id: str


async def find_speaker(pages: AsyncIterator[ExportPage], chat: str, name: str) -> Speaker:
    """The person of the chat called `name` (display name or id); raises SpeakerNotFound."""
    wanted = name.strip()
    people: dict[str, str] = {}  # author_id -> the display name last seen
    async for page in pages:
        for message in page["messages"]:
            if message.get("role") != "user":
                continue
            author_id = str(message.get("author_id") or "")
            if not author_id:
                continue
            author = str(message.get("author") or author_id)
            if author_id == wanted:
                return Speaker(author, author_id)
            people[author_id] = author
    key = _folded(wanted)
    named = sorted(i for i, a in people.items() if _folded(a) == key)
    if not named:  # "ana" for Ana Lima, when she is the only Ana
        named = sorted(i for i, a in people.items() if _folded(a).split()[:1] == key.split())
    if len(named) == 1:
        return Speaker(people[named[0]], named[0])
    if named:
        listed = ", ".join(f"{people[i]} ({i})" for i in named)
        raise SpeakerNotFound(
            f"{len(named)} people in {chat} are called {wanted!r}: {listed}; "
            "use --as with the whole name or the id of the one you mean"
        )
    if not people:
        raise SpeakerNotFound(f"no one has written in {chat} yet: import its history first (chatbot import)")
    listed = ", ".join(f"{a} ({i})" for i, a in sorted(people.items(), key=lambda p: p[1].casefold())[:SHOWN])
    more = " ..." if len(people) > SHOWN else ""
    raise SpeakerNotFound(f"no one called {wanted!r} in {chat}; people there: {listed}{more}")


def _folded(name: str) -> str:
    """`name` for matching: case and accents folded, spaces normalised ("Zoë  Lima" -> "zoe lima")."""
    decomposed = unicodedata.normalize("NFKD", name.casefold())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())
