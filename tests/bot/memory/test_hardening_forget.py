"""Issue 40, item 11: `/forgetme` (and `/forget yes`) while the memory worker is down dropped
the person's records waiting in the outbox and answered only "try again later"."""

from __future__ import annotations

from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import TcpGate, make_settings, msg, port_of, running_pipeline

TOKEN = "memory-token-for-tests-0123456789"


async def test_forgetme_while_memory_is_down_says_what_was_dropped_and_what_is_left(tmp_path):
    async with TcpGate() as gate, FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url=gate.url, memory_token=TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            for i in range(3):  # the worker is down: 3 turns + 3 replies wait
                await pipeline.handle(msg(f"my secret number {i}", message_id=f"s{i}"))
            await pipeline.handle(msg("bob was here", author="bob", author_id="u2", message_id="b1"))
            assert len(pipeline.outbox) == 8
            answer = await pipeline.command(msg("/forgetme", message_id="f1"), "forgetme", "")
            text = answer.text
            assert "unreachable" in text
            assert "6 " in text and "dropped" in text  # what went: the 6 records of theirs waiting
            assert "not forgotten yet" in text and "/forgetme again" in text  # what is left to do
            assert len(pipeline.outbox) == 2  # bob's stay

            # Once the worker is back, a second /forgetme finishes it.
            async with EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN, port=0) as host:
                await gate.open(port_of(host.url))
                done = await pipeline.command(msg("/forgetme", message_id="f2"), "forgetme", "")
                assert done.text.startswith("Done")


async def test_forget_chat_while_memory_is_down_says_what_was_dropped(tmp_path):
    async with TcpGate() as gate, FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url=gate.url, memory_token=TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            await pipeline.handle(msg("my secret", message_id="s0"))
            admin = msg("/forget", message_id="f0")
            await pipeline.command(admin, "forget", "")
            answer = await pipeline.command(msg("/forget yes", message_id="f1"), "forget", "yes")
            assert "unreachable" in answer.text and "2 " in answer.text and "dropped" in answer.text
            assert "not erased yet" in answer.text and "/forget" in answer.text
            assert len(pipeline.outbox) == 0
