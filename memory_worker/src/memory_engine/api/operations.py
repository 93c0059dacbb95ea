"""What each API operation does to a chat, read from the route table for every host.

`http_api.parse` turns a request into an `Operation` whose `name` is a route's. The hosts
(the Durable Object shell in `entry.py`, the local host) decide from its `Kind` alone
whether a call needs the chat's database, may call for a compaction, must leave nothing on
disk, or waits on the summarizer. Each route states its `Kind` in `routes.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from memory_engine.api.routes import READ, ROUTES, WRITE, Kind

__all__ = ["OPERATIONS", "READ", "WRITE", "Kind", "kind", "names"]

OPERATIONS: dict[str, Kind] = {r.name: r.effects for r in ROUTES if r.run is not None}


def kind(name: str) -> Kind:
    """The effects of the operation `name` (an unlisted one is treated as a plain write)."""
    return OPERATIONS.get(name, WRITE)


def names(where: Callable[[Kind], bool]) -> frozenset[str]:
    """The operations whose kind satisfies `where`, e.g. `names(lambda k: k.grows)`."""
    return frozenset(n for n, k in OPERATIONS.items() if where(k))
