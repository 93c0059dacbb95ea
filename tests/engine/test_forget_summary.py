"""Forgetting stays forgotten (issue 38): a fact or note removed is never back through the summary.

Over real HTTP against the local host and the Worker on Pyodide: the summary loses the value
when the fact goes, and a later /compact (the offline summarizer reading the messages that said
it again) does not bring it back. In process: a model's summary and fact block that repeat the
value are scrubbed before they are stored.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memory_engine import ChatMemory
from memory_engine.compaction.compact import compact_once
from memory_engine.compaction.scrub import scrub
from memory_engine.notes import forget_fact
from memory_worker.local import SqliteStorage
from tests.support import backend_for

BACKENDS = ["local", "pyodide"]


@pytest.fixture(params=BACKENDS)
async def mem(request, tmp_path):
    async with backend_for(request, tmp_path / request.param) as backend:
        yield backend


async def test_a_forgotten_fact_and_note_stay_out_of_the_summary_after_compact(mem):
    chat = "/v1/chats/fs"
    await mem.turn("fs", "My name is Ola and I live in Bergen with my dog Rex.", author="Ola", author_id="o1")
    for i in range(30):
        await mem.turn("fs", f"the trip to Tromso was great, day {i}", author="Kai", author_id="k1")
    note = await mem.ok(
        "POST", chat + "/notes", {"text": "the spare key is under the Bergen mat", "author_id": "k1"}
    )
    await mem.ok("POST", chat + "/compact")
    before = (await mem.ok("GET", chat + "/summary"))["summary"]
    assert "Bergen" in before  # the offline summary holds the fact before it is forgotten

    facts = (await mem.ok("GET", chat + "/facts"))["facts"]
    bergen = next(f for f in facts if f["value"] == "Bergen")
    await mem.ok("DELETE", chat + f"/facts/{bergen['id']}?author_id=o1")
    await mem.ok("DELETE", chat + f"/facts/{note['note']['id']}")
    now = (await mem.ok("GET", chat + "/summary"))["summary"]
    assert "bergen" not in now.casefold() and "## Important Details" in now and "Rex" in now

    # The message that said it is still there: the next compactions read it and more again.
    await mem.turn("fs", "Ola here again, I live in Bergen, remember?", author="Ola", author_id="o1")
    for i in range(30):
        await mem.turn("fs", f"more about Tromso, part {i}", author="Kai", author_id="k1")
    await mem.ok("POST", chat + "/compact")
    after = (await mem.ok("GET", chat + "/summary"))["summary"]
    assert "Tromso" in after and "bergen" not in after.casefold()


def test_a_models_summary_and_facts_cannot_bring_a_forgotten_value_back(tmp_path):
    memory = ChatMemory(SqliteStorage(str(tmp_path / "m.sqlite")))
    memory.turn("I live in Bergen.", author="Ola", author_id="o1")
    fact = next(f for f in memory.facts()["facts"] if f["value"] == "Bergen")
    forget_fact(memory.sql, int(fact["id"]), memory.now())
    for i in range(30):
        memory.turn(f"sailing on day {i}", author="Kai", author_id="k1")

    async def model(previous: str, messages: list[dict[str, Any]]) -> str:
        return (
            "## Objective\n- Conversation with Ola, Kai about: Bergen; sailing.\n\n"
            "## Important Details\n- Ola lives in Bergen.\n- Kai sails a lot.\n\n"
            "## Work State (Completed / Active / Blocked)\n- Completed: sailing.\n\n"
            "## Next Move\n- ask Ola about Bergen\n\n## Relevant Files\n- none\n\n"
            '```facts\n[{"author_id": "o1", "key": "location", "value": "Bergen"}]\n```'
        )

    assert asyncio.run(compact_once(memory, model, force=True))
    text = memory.summary()["summary"]
    assert "Bergen" not in text and "Kai sails a lot." in text and "about: sailing." in text
    assert "## Next Move\n- none" in text
    assert not [f for f in memory.facts()["facts"] if f["value"] == "Bergen"]


def test_scrub_keeps_the_sections_and_other_lines():
    summary = (
        "## Objective\n- Conversation with A about: Lisbon; Rex (dog).\n\n"
        "## Important Details\n- A: pets = Rex (dog)\n- B: job = nurse"
    )
    out = scrub(summary, ["Rex (dog)"])
    assert (
        out == "## Objective\n- Conversation with A about: Lisbon.\n\n## Important Details\n- B: job = nurse"
    )
    assert scrub(summary, []) == summary and scrub(summary, ["Rexford"]) == summary
