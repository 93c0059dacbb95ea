"""What each API operation does to a chat, read from the route table for every host.

`http.parse` turns a request into an `Operation` whose `kind` is its route's `Kind` (an
import batch's says whether it leaves rows to index later). The hosts (the Durable Object
shell in `entry.py`, the local host) decide from it alone whether a call needs the chat's
database, may call for a compaction, must leave nothing on disk, waits on the summarizer,
moves the chat's alarm or continues an import. Each route states its `Kind` in `routes.py`;
this table gives them by operation name.
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
