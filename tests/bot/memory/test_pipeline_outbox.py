"""The memory worker out of reach, then back: answers keep coming, the outbox replays, nothing doubles."""

from __future__ import annotations

from bot.chat.memory.client import HttpMemoryClient, MemoryUnavailable
from bot.chat.memory.outbox import Outbox
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import TcpGate, make_settings, msg, port_of, running_pipeline, tier_totals, wait_until

TOKEN = "memory-token-for-tests-0123456789"


async def test_worker_down_then_back_replays_outbox_without_doubles(tmp_path):
    mem_dir = tmp_path / "memory"
    # The worker's address, with nothing behind it yet: connections are refused.
    async with TcpGate() as gate, FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url=gate.url, memory_token=TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            # The worker is down: every message is still answered, without memory.
            replies = [
                await pipeline.handle(msg(f"note {i}: the sky is blue", message_id=f"m{i}")) for i in range(5)
            ]
            assert all(r.ok and not r.with_memory for r in replies)
            assert [r.text for r in replies] == [f"echo: note {i}: the sky is blue" for i in range(5)]
            assert len(pipeline.outbox) == 10  # 5 turns + 5 replies
            await pipeline.record(msg("group chatter while down", message_id="g1", addressed=False))
            assert len(pipeline.outbox) == 11

            # The worker comes back: the background replay empties the outbox.
            async with EmbeddedMemoryHost(mem_dir, token=TOKEN, port=0) as host:
                await gate.open(port_of(host.url))
                await wait_until(lambda: len(pipeline.outbox) == 0, what="outbox replay")
                stats = await pipeline.memory.stats("test:chat")
                assert stats["total_messages"] == 11  # 6 user + 5 assistant, once each
                assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (5, 0)}

                # Each record landed once, in order: user, answer, user, answer ... then the chatter.
                results = await pipeline.memory.search("test:chat", "sky blue note chatter", k=20)
                texts = [r["text"] for r in sorted(results, key=lambda r: r["id"])]
                expected = []
                for i in range(5):
                    expected += [f"note {i}: the sky is blue", f"echo: note {i}: the sky is blue"]
                assert texts == [*expected, "group chatter while down"]

                # A replay of records already delivered (answer lost on the way back) is a no-op.
                for i in range(5):
                    pipeline.outbox.add(
                        "test:chat",
                        "turn",
                        {
                            "text": f"note {i}: the sky is blue",
                            "author": "ada",
                            "author_id": "u1",
                            "message_id": f"m{i}",
                        },
                    )
                pipeline.outbox.add(
                    "test:chat",
                    "reply",
                    {
                        "text": "echo: note 0: the sky is blue",
                        "tier": "standard",
                        "model": "m-standard",
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                        "ok": True,
                        "message_id": "m0:reply",
                    },
                )
                assert await pipeline.flush_outbox() == 6
                stats = await pipeline.memory.stats("test:chat")
                assert stats["total_messages"] == 11
                assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (5, 0)}

                # With the worker up, answers use memory again.
                later = await pipeline.handle(msg("what colour is the sky?", message_id="m9"))
                assert later.with_memory
                memory_block = fake.requests[-1].messages[1]["content"]
                assert "the sky is blue" in memory_block


async def test_outbox_survives_a_restart_of_the_bot(tmp_path):
    mem_dir = tmp_path / "memory"
    async with TcpGate() as gate, FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url=gate.url, memory_token=TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            await pipeline.handle(msg("remember: I live in Oslo", message_id="a1"))
            assert len(pipeline.outbox) == 2
        # The bot stopped with records pending; they are on disk.
        with Outbox(tmp_path / "bot" / "outbox.sqlite3") as box:
            assert len(box) == 2
        async with EmbeddedMemoryHost(mem_dir, token=TOKEN, port=0) as host:
            await gate.open(port_of(host.url))
            async with running_pipeline(settings, tmp_path / "bot") as pipeline:
                await wait_until(lambda: len(pipeline.outbox) == 0, what="replay after restart")
                facts = await pipeline.memory.facts("test:chat")
                assert {(f["key"], f["value"]) for f in facts} >= {("location", "Oslo")}


async def test_wrong_token_keeps_records_for_later(tmp_path):
    async with EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN, port=0) as host:
        async with HttpMemoryClient(host.url, "not-the-token") as bad:
            try:
                await bad.stats("test:chat")
            except MemoryUnavailable as exc:
                assert "401" in str(exc)
            else:
                raise AssertionError("a wrong token must not pass")
        async with FakeOpenAI(default=Echo()) as fake:
            settings = make_settings(fake.url, memory_url=host.url, memory_token="not-the-token")
            async with running_pipeline(settings, tmp_path / "bot") as pipeline:
                reply = await pipeline.handle(msg("hello there my friend", message_id="t1"))
                assert reply.ok and not reply.with_memory
                assert len(pipeline.outbox) == 2


async def test_a_message_the_worker_refuses_is_still_answered_and_not_queued(tmp_path):
    async with (
        FakeOpenAI(default=Echo(prefix="")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        refused = "c" * 200  # a chat key over the worker's 128 characters (400); a long text is cut before
        reply = await pipeline.handle(msg("hello there", chat=refused, message_id="big"))
        assert reply.ok and not reply.with_memory
        assert len(pipeline.outbox) == 0 and pipeline.outbox.dead() == []
        later = await pipeline.handle(msg("a normal message again", message_id="small"))
        assert later.with_memory


async def test_forgetme_covers_the_records_still_in_the_outbox(tmp_path):
    """Issue 24, finding 2: /forgetme said "Done", then the replay put everything back."""
    async with TcpGate() as gate, FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url=gate.url, memory_token=TOKEN)
        async with running_pipeline(settings, tmp_path / "bot") as pipeline:
            for i in range(20):  # the worker is down: 20 turns + 20 replies wait
                await pipeline.handle(msg(f"my secret number {i}", message_id=f"s{i}"))
            await pipeline.handle(msg("bob was here", author="bob", author_id="u2", message_id="b1"))
            assert len(pipeline.outbox) == 42
            async with EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN, port=0) as host:
                await gate.open(port_of(host.url))
                done = await pipeline.command(msg("/forgetme", message_id="f1"), "forgetme", "")
                assert done.text.startswith("Done")
                await pipeline.flush_outbox()
                await wait_until(lambda: len(pipeline.outbox) == 0, what="outbox replay")
                found = await pipeline.memory.search("test:chat", "secret number bob", k=50)
                assert [r["text"] for r in found] == ["bob was here", "echo: bob was here"]
                assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 2


async def test_a_forgotten_record_never_comes_back_after_a_restart(tmp_path):
    body = {"text": "my secret", "author": "ada", "author_id": "u1", "message_id": "s1"}
    reply = {
        "text": "echo: my secret",
        "author_id": "u1",
        "reply_to_author_id": "u1",
        "message_id": "s1:reply",
    }
    path = tmp_path / "outbox.sqlite3"
    with Outbox(path) as box:
        box.add("test:chat", "turn", body)
        box.add("test:chat", "reply", reply)
        box.add("test:chat", "turn", dict(body, author_id="u2", message_id="b1"))
        box.add("other:chat", "turn", body)
        box.add("gone:chat", "turn", dict(body, author_id="u3"))
        assert (await box.forget("test:chat", "u1"), await box.forget("gone:chat")) == (2, 1)
    with Outbox(path) as box:  # the bot restarts
        assert len(box) == 2
        assert box.pending_for("test:chat") == 1 and box.pending_for("gone:chat") == 0
        # a record made before the forget that reaches the outbox late is still dropped
        box.add("test:chat", "turn", dict(body, message_id="s0"), made=box.clock() - 60)
        assert len(box) == 2
    # and nothing of them is left in the file's bytes (secure_delete, WAL checkpointed)
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("outbox"))
    assert raw.count(b"my secret") == 2  # bob's and other:chat's
