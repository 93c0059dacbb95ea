"""End to end: fake Discord <-> discord.py <-> adapter <-> real Pipeline + embedded memory <-> fake OpenAI."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import replace

import pytest

from bot.adapters.discord import adapter
from bot.adapters.discord import send as discord_send
from bot.app import build_pipeline
from bot.chat.pipeline import CUT_OFF
from tests.fakes.discord_server import EPHEMERAL
from tests.fakes.openai_server import Answer, StreamBreak
from tests.support import (
    ADMIN_NAMES,
    EVERYONE_NAMES,
    answered,
    discord_e2e_settings,
    forget_clicked_by,
    running_client,
    slash,
)


async def test_dm_round_trip_with_typing_and_memory(fake_discord, openai, world, discord_bot):
    await fake_discord.user_says(world.dm, world.member, "My name is Ada and I live in Paris.")
    # The pipeline tells the model who speaks ("Bob: ..."); the echo shows the words arrived.
    await answered(fake_discord, world.dm, "My name is Ada and I live in Paris.")
    order = [c.path for c in fake_discord.calls if c.path.startswith(f"/channels/{world.dm['id']}/")]
    assert order[0].endswith("/typing") and "/messages" in order[-1]
    facts = await slash(fake_discord, "facts", world.member, world.dm)  # in a DM the user is admin
    assert "Ada" in facts["content"] and facts["flags"] & EPHEMERAL


async def test_guild_gating_records_chatter_and_answers_mentions_with_it(
    fake_discord, openai, world, discord_bot
):
    ch = world.general
    await fake_discord.user_says(ch, world.admin, "The secret launch code word is pineapple.")
    await fake_discord.user_says(
        ch,
        world.member,
        f"{fake_discord.mention(fake_discord.bot)} what is the code word?",
        mentions=[fake_discord.bot],
    )
    await answered(fake_discord, ch, "what is the code word?")
    assert len(openai.requests) == 1  # the chatter was recorded, not answered
    prompt = "\n".join(str(m.get("content")) for m in openai.requests[0].messages)
    assert "pineapple" in prompt  # the recorded chatter is in the memory the model saw
    answer = next(
        m
        for m in reversed(list(fake_discord.messages.values()))
        if m["author"]["id"] == fake_discord.bot["id"]
    )
    await fake_discord.user_says(ch, world.member, "thanks, and again?", reply_to=answer)
    await answered(fake_discord, ch, "thanks, and again?", count=2)
    stats = await slash(fake_discord, "memory", world.admin, ch)
    assert "messages kept: 5" in stats["content"]  # chatter + 2 questions + 2 answers


async def test_a_5000_character_answer_arrives_in_three_parts(fake_discord, openai, world, discord_bot):
    long = "\n\n".join(["Memory keeps the chat coherent over many days. " * 10] * 11).strip()
    openai.script(Answer(long))
    await fake_discord.user_says(world.dm, world.member, "Tell me everything about memory please.")
    parts = await answered(fake_discord, world.dm, long[-40:], count=3)
    assert len(long) > 5000 and all(len(p) <= 2000 for p in parts)
    assert " ".join(parts).split() == long.split()  # nothing lost, nothing added but whitespace


@pytest.mark.parametrize("name", ADMIN_NAMES)
async def test_admin_commands_as_admin_and_as_member(fake_discord, openai, world, discord_bot, name):
    await fake_discord.user_says(world.general, world.admin, "My name is Alice.")
    await fake_discord.user_says(
        world.general,
        world.admin,
        f"{fake_discord.mention(fake_discord.bot)} hello",
        mentions=[fake_discord.bot],
    )
    await answered(fake_discord, world.general, "hello")
    refused = await slash(fake_discord, name, world.member, world.general)
    assert (
        refused["flags"] & EPHEMERAL
        and refused["content"] == f"Sorry, /{name} is only for admins of this chat."
    )
    shown = await slash(fake_discord, name, world.admin, world.general)
    assert shown["flags"] & EPHEMERAL and "only for admins" not in shown["content"].lower()
    assert "Unknown command" not in shown["content"]


async def test_admin_command_answers_carry_the_real_content(fake_discord, openai, world, discord_bot):
    await fake_discord.user_says(world.general, world.admin, "My name is Alice and I live in Lyon.")
    await fake_discord.user_says(
        world.general,
        world.admin,
        f"{fake_discord.mention(fake_discord.bot)} hello there",
        mentions=[fake_discord.bot],
    )
    await answered(fake_discord, world.general, "hello there")
    facts = await slash(fake_discord, "facts", world.admin, world.general)
    assert "Alice" in facts["content"] and "Lyon" in facts["content"]
    usage = await slash(fake_discord, "usage", world.admin, world.general)
    assert fake_discord.responses(usage["iid"])[0].json["type"] == 5  # deferred before the chart is drawn
    (edit,) = fake_discord.interactions[usage["iid"]]["edits"]
    assert edit.files[0][0] == "usage.png" and edit.files[0][1].startswith(b"\x89PNG")
    assert usage["content"].count("```") == 2 and re.search(r"total +1 ", usage["content"])
    mode = await slash(fake_discord, "mode", world.admin, world.general, mode="full")
    assert "full" in mode["content"]
    memory = await slash(fake_discord, "memory", world.admin, world.general)
    assert "mode: full" in memory["content"]
    compact = await slash(fake_discord, "compact", world.admin, world.general)
    assert fake_discord.responses(compact["iid"])[0].json["type"] == 5 and "ompact" in compact["content"]


@pytest.mark.parametrize("name", EVERYONE_NAMES)
async def test_everyone_commands_as_member(fake_discord, openai, world, discord_bot, name):
    shown = await slash(fake_discord, name, world.member, world.general)
    assert shown["flags"] & EPHEMERAL and shown["content"]
    assert "only for admins" not in shown["content"].lower() and "Unknown command" not in shown["content"]


async def test_help_lists_admin_commands_only_to_admins(fake_discord, openai, world, discord_bot):
    member = await slash(fake_discord, "help", world.member, world.general)
    admin = await slash(fake_discord, "help", world.admin, world.general)
    assert "/facts" not in member["content"] and "/forgetme" in member["content"]
    assert "/facts" in admin["content"]


async def test_forgetme_forgets_only_the_caller(fake_discord, openai, world, discord_bot):
    ch = world.general
    await fake_discord.user_says(ch, world.member, "My name is Bob and I live in Oslo.")
    await fake_discord.user_says(ch, world.admin, "My name is Alice and I live in Lyon.")
    await fake_discord.user_says(
        ch, world.admin, f"{fake_discord.mention(fake_discord.bot)} hi", mentions=[fake_discord.bot]
    )
    await answered(fake_discord, ch, "hi")
    before = await slash(fake_discord, "facts", world.admin, ch)
    assert "Oslo" in before["content"] and "Lyon" in before["content"]
    done = await slash(fake_discord, "forgetme", world.member, ch)
    assert done["flags"] & EPHEMERAL and "forgot" in done["content"]
    after = await slash(fake_discord, "facts", world.admin, ch)
    assert "Oslo" not in after["content"] and "Lyon" in after["content"]


async def test_forget_button_erases_the_chat(fake_discord, openai, world, discord_bot):
    question, _ = await forget_clicked_by(fake_discord, world, world.admin)
    assert "erased" in fake_discord.final_message(question["iid"])["content"]
    memory = await slash(fake_discord, "memory", world.admin, world.general)
    assert "messages kept: 0" in memory["content"]


async def test_the_answer_streams_into_one_growing_message(
    fake_discord, openai, world, discord_bot, monkeypatch
):
    monkeypatch.setattr(discord_send, "EDIT_INTERVAL_S", 0.05)
    text = "Streaming works. " * 20
    openai.script(Answer(text.strip(), chunk_size=16, delay=0.02))
    await fake_discord.user_says(world.dm, world.member, "Please stream something to me.")
    await fake_discord.wait_for(lambda: fake_discord.shown(world.dm) == [text.strip()], timeout=15)
    assert len(fake_discord.sent_to(world.dm)) == 1 and fake_discord.calls_to(
        "PATCH", rf"/channels/{world.dm['id']}/messages/\d+"
    )
    assert openai.requests[0].body.get("stream") is True


async def test_a_broken_stream_keeps_the_text_and_says_it_was_cut_off(
    fake_discord, openai, world, discord_bot
):
    openai.script(StreamBreak("The answer starts well and then", after_chunks=2, chunk_size=8))
    await fake_discord.user_says(world.dm, world.member, "Tell me a story please.")
    await fake_discord.wait_for(
        lambda: fake_discord.shown(world.dm) and "cut off" in fake_discord.shown(world.dm)[-1], timeout=15
    )
    assert fake_discord.shown(world.dm) == ["The answer start" + CUT_OFF]  # two 8-character chunks arrived


async def test_streaming_off_answers_in_whole_messages(fake_discord, openai, world, tmp_path):
    on = discord_e2e_settings(fake_discord, openai, world)
    settings = replace(on, discord=replace(on.discord, streaming=False))
    async with build_pipeline(settings, tmp_path) as pipeline, running_client(pipeline, settings):
        await fake_discord.user_says(world.dm, world.member, "One whole message please.")
        await answered(fake_discord, world.dm, "One whole message please.")
    assert not fake_discord.calls_to("PATCH", rf"/channels/{world.dm['id']}/messages/\d+")
    assert openai.requests[0].body.get("stream") in (None, False)


async def test_commands_are_synced_at_start_up(fake_discord, openai, world, discord_bot):
    (put,) = fake_discord.calls_to("PUT", r"/applications/\d+/commands")
    assert sorted(c["name"] for c in put.json) == sorted([*ADMIN_NAMES, *EVERYONE_NAMES])


async def test_reconnect_after_the_gateway_drops(fake_discord, openai, world, discord_bot):
    await fake_discord.drop_gateway(abort=True)
    await fake_discord.user_says(world.dm, world.member, "Are you back online?")
    await answered(fake_discord, world.dm, "Are you back online?")
    assert fake_discord.resumes and len(fake_discord.identifies) == 1


async def test_app_serve_path_runs_the_bot(fake_discord, openai, world, tmp_path):
    settings = discord_e2e_settings(fake_discord, openai, world)

    async def main() -> None:  # what bot.app.run_discord does, minus the process-level loop
        async with build_pipeline(settings, tmp_path) as pipeline:
            await adapter.serve(pipeline, settings)

    task = asyncio.create_task(main())
    try:
        await fake_discord.wait_for(lambda: fake_discord.identifies, timeout=15)
        await fake_discord.user_says(world.dm, world.member, "Hello from serve!")
        await answered(fake_discord, world.dm, "Hello from serve!")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_forgetme_then_why_at_once_shows_nothing_of_the_forgotten_person(
    fake_discord, openai, world, discord_bot
):
    ch = world.general
    bot_mention = fake_discord.mention(fake_discord.bot)
    await fake_discord.user_says(ch, world.member, "my dog Biscuit loves the beach at Nazaré")  # recorded
    await fake_discord.user_says(
        ch, world.member, f"{bot_mention} tell me about the beach", mentions=[fake_discord.bot]
    )
    await answered(fake_discord, ch, "tell me about the beach")
    before = await slash(fake_discord, "why", world.admin, ch)
    await slash(fake_discord, "forgetme", world.member, ch)
    after = await slash(fake_discord, "why", world.admin, ch)
    assert "Biscuit" in before["content"]
    assert "Biscuit" not in after["content"] and "Nazaré" not in after["content"]
    assert after["content"] == "No answer yet in this chat, so no memory prompt to show."
