"""Issue 24, finding 8: one person cannot fill a chat's notes; a secret a user types is not kept."""

from __future__ import annotations

import json

import pytest

from memory_engine.notes import MAX_NOTES_PER_AUTHOR, asks_about_the_past
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import local_memory, make_settings, msg, running_pipeline

mem = pytest.fixture(local_memory, name="mem")
KEY = "plain-configured-secret-4242-abcdefgh"  # like no known token shape: only the config knows it


async def test_one_person_cannot_fill_every_note_slot(mem):
    path = "/v1/chats/telegram:-5/notes"
    for i in range(MAX_NOTES_PER_AUTHOR):
        await mem.ok("POST", path, {"text": f"note {i}", "author": "Eve", "author_id": "66"})
    status, data = await mem.call("POST", path, {"text": "one more", "author": "Eve", "author_id": "66"})
    assert status == 400 and f"you already keep {MAX_NOTES_PER_AUTHOR} notes" in data["error"]
    await mem.ok("POST", path, {"text": "mine", "author": "Ann", "author_id": "7"})  # others still can
    assert len((await mem.ok("GET", path))["notes"]) == MAX_NOTES_PER_AUTHOR + 1


async def test_a_configured_secret_a_user_types_is_neither_stored_nor_sent(tmp_path):
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url, api_key=KEY), tmp_path) as pipeline,
    ):
        await pipeline.handle(msg(f"oops, our key is {KEY} do not tell", message_id="m1"))
        await pipeline.record(msg(f"and again {KEY}", message_id="m2", addressed=False))
        await pipeline.command(msg("/remember", message_id="m3"), "remember", f"the key is {KEY}")
        await pipeline.handle(msg("what is our key?", message_id="m4"))
        sent = "\n".join(r.text() for r in fake.requests)
        assert "[redacted]" in sent and KEY not in sent
        stored = await pipeline.memory.search("test:chat", "key oops again", k=20)
        notes = await pipeline.memory.notes("test:chat")
        kept = json.dumps([stored, notes])
        assert "[redacted]" in kept and KEY not in kept


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Where did I live BEFORE Lisbon?", True),
        ("what did I do previously", True),
        ("I Used To paint", True),
        ("I used  to paint", False),  # the pattern's one space
        ("beforehand, I was in Oslo", False),  # a whole word only
        ("Prior to that?", True),
        ("we met earlier-ish", True),
        ("just chatting", False),
        ("uſed to live in Kraków?", True),  # outside ASCII: re's case folding (ſ is s)
    ],
)
def test_which_messages_ask_about_the_past(text, asks):
    # Only these turns carry the fact history: the bot's offline model answers "before X" from it.
    assert asks_about_the_past(text) is asks
