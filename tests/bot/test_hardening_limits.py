"""Issue 40, item 10: a message over the memory's limit (64 KiB of UTF-8) went whole to the
model, was refused by memory, and the user was not told. It is bounded at the edge now."""

from __future__ import annotations

from memory_engine.api.validation import MAX_TEXT_BYTES
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import make_settings, msg, running_pipeline, stored_messages


async def test_a_message_over_the_memorys_limit_is_cut_said_and_remembered(tmp_path):
    said = "🙂 big words " * 12000  # 180 KB of UTF-8, 4-byte characters among them
    assert len(said.encode()) > 2 * MAX_TEXT_BYTES
    async with FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url)
        async with running_pipeline(settings, tmp_path / "bot", host=True) as pipeline:
            reply = await pipeline.handle(msg(said, message_id="big"))
            assert reply.ok and reply.with_memory
            first = reply.text.splitlines()[0]
            assert "KB" in first and "first" in first  # the user is told what was kept
            sent = fake.requests[-1].messages[-1]["content"]
            assert isinstance(sent, str) and len(sent.encode()) <= MAX_TEXT_BYTES
            assert said.startswith(sent.rstrip("…").rstrip())
            rows = stored_messages(tmp_path / "bot" / "memory", "test:chat")
            assert [r["role"] for r in rows] == ["user", "assistant"]  # memory took it, cut
            assert len(rows[0]["text"].encode()) <= MAX_TEXT_BYTES
            assert said.startswith(rows[0]["text"].rstrip("…").rstrip())


async def test_a_message_within_the_limit_is_untouched(tmp_path):
    said = "é" * (MAX_TEXT_BYTES // 2 - 2048)  # two bytes each: within the limit
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path / "bot") as pipeline,
    ):
        reply = await pipeline.handle(msg(said, message_id="ok"))
        assert reply.text == f"echo: {said}"
        assert fake.requests[-1].messages[-1]["content"] == said
