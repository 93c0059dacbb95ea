"""What each API operation does to a chat, named once for every host.

`http_api.parse` turns a request into an `Operation` whose `name` is a key of `OPERATIONS`.
The hosts (the Durable Object shell in `entry.py`, the local host) decide from its `Kind`
alone whether a call needs the chat's database, may call for a compaction, must leave
nothing on disk, or waits on the summarizer. A new route adds its name here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """The effects of one operation on its chat."""

    read_only: bool = False  # changes nothing: a chat with no database answers as an empty one
    grows: bool = False  # may leave the un-summarized history past the threshold: check for compaction
    forgets: bool = False  # removes what someone asked to forget: nothing of it may stay in the files
    erases_chat: bool = False  # removes the whole chat: its storage can be dropped entirely
    summarizes: bool = False  # waits on the summarizer: must not hold up the chat's other calls


READ = Kind(read_only=True)
WRITE = Kind()

OPERATIONS: dict[str, Kind] = {
    "turn": Kind(grows=True),
    "reply": Kind(grows=True),
    "import": Kind(grows=True),
    "search": READ,
    "facts": READ,
    "summary": READ,
    "usage": READ,
    "stats": READ,
    "settings": READ,
    "update_settings": WRITE,
    "export": READ,
    "notes": READ,
    "add_note": WRITE,
    "forget_fact": WRITE,  # supersedes, keeps the history: not a forgetting
    "start_topic": WRITE,
    "compact": Kind(summarizes=True),
    # Forgetting someone resets the summary mark: all that remains is un-summarized again.
    "forget_author": Kind(grows=True, forgets=True),
    "forget_chat": Kind(forgets=True, erases_chat=True),
}


def kind(name: str) -> Kind:
    """The effects of the operation `name` (an unlisted one is treated as a plain write)."""
    return OPERATIONS.get(name, WRITE)


def names(where: Callable[[Kind], bool]) -> frozenset[str]:
    """The operations whose kind satisfies `where`, e.g. `names(lambda k: k.grows)`."""
    return frozenset(n for n, k in OPERATIONS.items() if where(k))
