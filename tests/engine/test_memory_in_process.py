"""The in-process memory of the pipeline tests answers as the real host does (same engine,
same checks, same refusals), so a pipeline test on it shows what it would over HTTP."""

from __future__ import annotations

import pytest

from bot.chat.memory.client import MemoryRefused
from memory_engine.api import routes
from tests.support import local_memory
from tests.support.memory import InProcessMemory

mem = pytest.fixture(local_memory, name="mem")


async def test_the_same_calls_get_the_same_answers_as_the_real_host(mem):
    from bot.chat.memory.client import HttpMemoryClient

    async with HttpMemoryClient(mem.host.url, mem.token) as http, InProcessMemory() as fake:
        answers = []
        for client in (http, fake):
            first = await client.turn(
                "c:1", "My name is Ada and I live in Lisbon", author="Ada", author_id="u1"
            )
            await client.reply(
                "c:1", {"text": "Hello Ada", "tier": "light", "model": "m", "message_id": "r1"}
            )
            second = await client.turn("c:1", "where do I live?", author="Ada", author_id="u1")
            facts = await client.facts("c:1")
            answers.append(
                (
                    first["prompt"],
                    [m["text"] for m in second["recent"]],
                    sorted((f["key"], f["value"]) for f in facts),
                    (await client.stats("c:1"))["total_messages"],
                    await client.forget_chat("c:1"),
                    await client.forget_chat("c:1"),
                )
            )
    assert answers[0] == answers[1]
    assert answers[1][2] == [("location", "Lisbon"), ("name", "Ada")] and answers[1][4:] == (
        {"deleted": True},
        {"deleted": False},
    )


async def test_a_refusal_raises_as_over_http():
    async with InProcessMemory() as fake:
        with pytest.raises(MemoryRefused) as refused:
            await fake.turn("c:1", "   ")
        assert refused.value.status == 400 and "text" in refused.value.error
        with pytest.raises(MemoryRefused):
            await fake.call(routes.SEARCH, "bad key with spaces", query={"q": "x"})
        assert fake.calls == []  # refused before anything ran
