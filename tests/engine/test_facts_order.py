"""`GET /v1/chats/{chat}/facts` lists facts oldest first, in the order each value was set, as
docs/api.md and docs/memory-api.md say: on the local host over HTTP and on the Worker alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Backend, start_backend

CHAT = "telegram:-100777"


@pytest.fixture(params=["local", "worker"])
async def mem(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    backend = await start_backend(request.param, tmp_path / request.param)
    try:
        yield backend
    finally:
        await backend.close()


async def said(mem: Backend, *lines: tuple[str, str]) -> None:
    for author, text in lines:
        await mem.turn(CHAT, text, author=author, author_id=author.lower())


def shown(facts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(f["author"], f["key"], f["value"]) for f in facts]


async def facts(mem: Backend, query: str = "") -> list[dict[str, Any]]:
    return (await mem.ok("GET", f"/v1/chats/{CHAT}/facts{query}"))["facts"]


async def test_facts_come_oldest_first_and_a_changed_one_moves_last(mem: Backend) -> None:
    await said(mem, ("Ana", "my name is Ana"), ("Ben", "I live in Porto"), ("Ana", "I live in Lisbon"))
    assert shown(await facts(mem)) == [
        ("Ana", "name", "Ana"),
        ("Ben", "location", "Porto"),
        ("Ana", "location", "Lisbon"),
    ]
    await mem.ok(
        "POST",
        f"/v1/chats/{CHAT}/notes",
        {"text": "bring snacks on Friday", "author": "Ben", "author_id": "ben"},
    )
    await said(mem, ("Ana", "I moved to Braga"), ("Ben", "I love hiking"))
    current = await facts(mem)
    assert shown(current) == [
        ("Ana", "name", "Ana"),
        ("Ben", "location", "Porto"),
        ("Ben", "note", "bring snacks on Friday"),
        ("Ana", "location", "Braga"),  # changed: set after the note, so after it
        ("Ben", "likes", "hiking"),
    ]
    ids, times = [f["id"] for f in current], [f["updated_at"] for f in current]
    assert ids == sorted(ids) and times == sorted(times)
    # One kind alone keeps the order.
    assert shown(await facts(mem, "?kind=fact")) == [row for row in shown(current) if row[1] != "note"]


async def test_the_history_lists_each_value_where_it_was_set(mem: Backend) -> None:
    await said(mem, ("Ana", "I live in Lisbon"), ("Ben", "I live in Porto"), ("Ana", "I moved to Braga"))
    history = await facts(mem, "?history=1")
    assert [(f["author"], f["value"], f["superseded_at"] is not None) for f in history] == [
        ("Ana", "Lisbon", True),
        ("Ben", "Porto", False),
        ("Ana", "Braga", False),
    ]
    assert [f["id"] for f in history] == sorted(f["id"] for f in history)
