"""Chat commands through the pipeline, against the real local memory host."""

from __future__ import annotations

import asyncio

import pytest

from bot.chat.chats import ChatState, LastPrompt
from bot.chat.commands.handlers import COMMANDS, GREETING
from bot.chat.commands.registry import NOT_AVAILABLE, Arg, Command, Registry, refused
from bot.chat.types import CommandResult
from tests.fakes.openai_server import Answer, Echo, FakeOpenAI, ServerError
from tests.support import API_KEY, make_settings, msg, running_pipeline

ADMIN_COMMANDS = {c.name for c in COMMANDS if c.admin}


@pytest.fixture
async def pipeline(openai, tmp_path):
    """A running pipeline on the real local memory host, its models the `openai` fake (echoes)."""
    async with running_pipeline(make_settings(openai.url), tmp_path) as running:
        yield running


async def test_admin_commands_refuse_members_and_reveal_nothing(pipeline):
    await pipeline.handle(msg("my name is Ada and I live in Lisbon", author_id="u1"))
    member = msg("/x", author="bob", author_id="u2", admin=False)
    unknown = await pipeline.command(member, "nosuchcommand", "")
    assert unknown.text == NOT_AVAILABLE
    assert {
        "facts",
        "summary",
        "usage",
        "memory",
        "mode",
        "compact",
        "forget",
        "persona",
        "dashboard",
    } == ADMIN_COMMANDS
    for name in sorted(ADMIN_COMMANDS):
        result = await pipeline.command(member, f"{name}@memo_bot", "yes")
        # One wording on every platform: it says no, and nothing of the chat.
        assert result.text == refused(name) == f"Sorry, /{name} is only for admins of this chat."
        assert result.image_png is None and result.confirm is None
    # nothing happened: the memory is intact
    stats = await pipeline.memory.stats("test:chat")
    assert stats["total_messages"] == 2 and stats["facts"] >= 2
    help_text = (await pipeline.command(member, "help", "")).text
    assert "/facts" not in help_text and "/forgetme" in help_text
    start = (await pipeline.command(member, "start", "")).text  # Telegram's /start
    assert start == f"{GREETING}\n\n{help_text}"
    assert (await pipeline.command(member, "stats", "")).text == refused("stats")  # alias of memory
    admin_help = (await pipeline.command(msg("/help"), "help", "")).text
    assert "/facts" in admin_help and "/forget " in admin_help


async def test_facts_summary_memory_mode_for_admins(pipeline):
    await pipeline.handle(msg("my name is Ada and I live in Lisbon", author="ada", author_id="u1"))
    await pipeline.handle(msg("I live in Porto", author="bob", author_id="u2", admin=False))
    admin = msg("/facts")
    facts = (await pipeline.command(admin, "facts", "")).text
    assert "Ada" in facts and "Lisbon" in facts and "Porto" in facts  # every author, for admins
    assert "No summary" in (await pipeline.command(admin, "summary", "")).text
    mem = (await pipeline.command(admin, "memory", "")).text
    assert "messages kept: 4" in mem
    assert "now full" in (await pipeline.command(admin, "mode", "full")).text
    assert (await pipeline.memory.stats("test:chat"))["mode"] == "full"
    assert "Use /mode auto or /mode full" in (await pipeline.command(admin, "mode", "bogus")).text


async def test_usage_is_a_table_and_a_png_chart(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake:
        fake.script(ServerError(500), model="m-standard")
        async with running_pipeline(make_settings(fake.url), tmp_path) as pipeline:
            await pipeline.handle(msg("first question of the day for you"))
            result = await pipeline.command(msg("/usage"), "usage", "")
            assert result.image_png is not None and result.image_png.startswith(b"\x89PNG\r\n\x1a\n")
            assert len(result.image_png) > 2000 and [f.name for f in result.files] == ["usage.png"]
            lines = result.table.splitlines()
            standard = next(line for line in lines if line.startswith("standard"))
            assert standard.split()[1:3] == ["2", "1"]  # two calls, one error
            assert next(line for line in lines if line.startswith("total")).split()[1] == "2"


async def test_forget_needs_confirmation(pipeline):
    await pipeline.handle(msg("my name is Ada"))
    admin = msg("/forget")
    # "/forget yes" without being asked first does not erase anything
    early = await pipeline.command(admin, "forget", "yes")
    assert early.confirm == "/forget yes"
    assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 2
    asked = await pipeline.command(admin, "forget", "")
    assert asked.confirm == "/forget yes" and "/forget yes" in asked.text
    assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 2
    done = await pipeline.command(admin, "forget", "yes")
    assert done.confirm is None and "erased" in done.text
    assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 0


async def test_forgetme_forgets_only_the_speaker(pipeline):
    await pipeline.handle(msg("my name is Ada", author="ada", author_id="u1"))
    await pipeline.handle(msg("my name is Bob", author="bob", author_id="u2", admin=False))
    result = await pipeline.command(
        msg("/forgetme", author="bob", author_id="u2", admin=False), "forgetme", ""
    )
    assert "forgot" in result.text
    facts = await pipeline.memory.facts("test:chat")
    assert {f["value"] for f in facts if f["key"] == "name"} == {"Ada"}


async def test_an_answer_being_made_when_its_asker_says_forgetme_is_not_kept(openai, pipeline):
    held = asyncio.Event()
    await pipeline.handle(msg("my name is Ada", author="ada", author_id="u1"))
    openai.script(Answer(text="Noted, Bob: your locker code is 4711", until=held))
    bob = {"author": "bob", "author_id": "u2", "admin": False}
    answering = asyncio.create_task(pipeline.handle(msg("my locker code is 4711", **bob)))
    await openai.wait_requests(2)  # Bob's answer is being made
    await pipeline.command(msg("/forgetme", **bob), "forgetme", "")
    held.set()
    reply = await answering
    assert "4711" in reply.text  # Bob still gets his answer
    assert await pipeline.memory.search("test:chat", "locker 4711") == []
    assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 2  # Ada's and its answer
    usage = await pipeline.memory.usage("test:chat")
    assert sum(t["calls"] for t in usage["tiers"].values()) == 2  # the call still counts


async def test_why_shows_the_last_memory_prompt_without_secrets(pipeline):
    assert "No answer yet" in (await pipeline.command(msg("/why"), "why", "")).text
    await pipeline.handle(msg(f"my api key is {API_KEY} keep it safe"))
    await pipeline.handle(msg("I live in Lisbon, near the river"))
    why = (await pipeline.command(msg("/why", admin=False), "why", "")).text
    assert why.startswith("Memory prompt used for the last answer (tier standard")
    assert "Relevant chat memory." in why and "keep it safe" in why
    assert API_KEY not in why and "[redacted]" in why


async def test_tier_command_forces_and_resets(openai, pipeline):
    user = msg("/tier", admin=False)
    assert "automatic" in (await pipeline.command(user, "tier", "")).text
    assert "heavy" in (await pipeline.command(user, "tier", "heavy")).text
    assert (await pipeline.handle(msg("hello there, how are you doing today"))).tier == "heavy"
    assert "No tier called" in (await pipeline.command(user, "tier", "gigantic")).text
    await pipeline.command(user, "tier", "auto")
    assert (await pipeline.handle(msg("hello there, how are you doing today"))).tier == "standard"
    assert openai.models_called() == ["m-heavy", "m-standard"]


async def test_commands_when_memory_is_down_say_so(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url, memory_url="http://127.0.0.1:9", memory_token="x" * 20)
        async with running_pipeline(settings, tmp_path) as pipeline:
            result = await pipeline.command(msg("/facts"), "facts", "")
            assert "unreachable" in result.text


async def test_forgetme_then_why_shows_nothing_of_the_forgotten_person(pipeline):
    await pipeline.handle(msg("my dog Biscuit loves the beach at Nazaré", author="bob", author_id="u2"))
    await pipeline.handle(msg("tell me about the beach", author="bob", author_id="u2"))
    bob = msg("/x", author="bob", author_id="u2", admin=False)
    assert "Biscuit" in (await pipeline.command(bob, "why", "")).text
    await pipeline.command(bob, "forgetme", "")
    why = (await pipeline.command(msg("/why", admin=False), "why", "")).text
    assert "Biscuit" not in why and "Nazaré" not in why
    assert why == "No answer yet in this chat, so no memory prompt to show."


class _RecordingClient:
    """The real memory client, with the reply bodies it sent kept for the assertions."""

    def __init__(self, inner):
        self.inner, self.replies = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def reply(self, chat, body):
        self.replies.append(dict(body))
        return await self.inner.reply(chat, body)


async def test_reply_records_say_whose_message_they_answer(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake:
        fake.script(ServerError(500), model="m-standard")
        async with running_pipeline(make_settings(fake.url), tmp_path) as pipeline:
            pipeline.memory.client = recording = _RecordingClient(pipeline.memory.client)
            await pipeline.handle(msg("hello there", author_id="u7", message_id="m-42"))
    assert [r["ok"] for r in recording.replies] == [False, True]  # each attempt says it
    for body in recording.replies:
        assert body["reply_to_message_id"] == "m-42" and body["reply_to_author_id"] == "u7"


def test_chat_state_forgetting_drops_every_cache_and_stale_prompts():
    now = [100.0]
    chats = ChatState(clock=lambda: now[0])
    before = chats.generation("c")
    chats.remember_prompt("c", LastPrompt("Bob said: my dog is Biscuit", "standard"), before)
    chats.force_tier("c", "heavy")
    chats.ask("c", "forget")
    chats.forget_author("c", "u2")
    assert chats.last_prompt("c") is None
    assert chats.forced_tier("c") == "heavy"  # a chat setting, not the person's
    # An answer prepared before the forgetting cannot put the forgotten words back.
    chats.remember_prompt("c", LastPrompt("Bob said: Biscuit again", "standard"), before)
    assert chats.last_prompt("c") is None
    chats.remember_prompt("c", LastPrompt("fresh", "standard"), chats.generation("c"))
    assert chats.last_prompt("c") == LastPrompt("fresh", "standard", at=chats.last_prompt("c").at)
    chats.forget_chat("c")
    assert chats.last_prompt("c") is None and chats.forced_tier("c") is None
    assert not chats.confirm("c", "forget", 300.0)  # the open question went with the chat
    chats.ask("c", "forget")
    now[0] += 301.0
    assert not chats.confirm("c", "forget", 300.0)  # too late
    chats.ask("c", "forget")
    assert chats.confirm("c", "forget", 300.0) and not chats.confirm("c", "forget", 300.0)  # once


async def _noop(ctx):
    return CommandResult("ok")


def test_registry_finds_names_aliases_and_lists_per_platform_and_role():
    registry = Registry(
        [
            Command("alpha", "everyone's", _noop, aliases=("a",)),
            Command("beta", "admins'", _noop, who="admin", args=(Arg("mode", "m", choices=("x", "y")),)),
            Command("gamma", "telegram only", _noop, platforms=frozenset({"telegram"})),
        ]
    )
    assert registry.find("/A@some_bot").name == "alpha" and registry.find("nope") is None
    assert [c.name for c in registry.listed("console", admin=False)] == ["alpha"]
    assert [c.name for c in registry.listed("telegram", admin=True)] == ["alpha", "beta", "gamma"]
    assert registry.names("discord") == ["alpha", "a", "beta"]
    assert registry.find("beta").usage() == "/beta [x|y]"
    with pytest.raises(ValueError, match="two commands"):
        Registry([Command("a", "x", _noop), Command("b", "y", _noop, aliases=("a",))])
    with pytest.raises(ValueError, match="longer than 100"):
        Registry([Command("a", "x" * 101, _noop)])


def test_every_command_of_the_registry_has_a_short_help_and_valid_name():
    import re

    for command in COMMANDS:
        assert re.fullmatch(r"[a-z][a-z0-9_]{0,31}", command.name)  # Telegram's and Discord's rule
        assert 0 < len(command.help) <= 100
