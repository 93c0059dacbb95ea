"""The Discord adapter against the fake Discord, with an in-test ChatService that records calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import discord
import pytest

from bot.adapters.discord import adapter
from bot.chat.types import CommandResult, File
from bot.config import DiscordSettings
from tests.fakes.discord_server import EPHEMERAL, MANAGE_GUILD, FakeDiscord
from tests.support import (
    ADMIN_NAMES,
    EVERYONE_NAMES,
    RecordingDiscordService,
    World,
    discord_settings_for,
    running_client,
    wait_until,
)
from tests.support.discord import PNG


@pytest.fixture
def pipeline() -> RecordingDiscordService:
    """The in-test ChatService."""
    return RecordingDiscordService()


@pytest.fixture
async def bot(
    fake_discord: FakeDiscord, world: World, pipeline: RecordingDiscordService
) -> AsyncIterator[adapter.DiscordBot]:
    """The client running against the fake with default settings."""
    async with running_client(pipeline, discord_settings_for(fake_discord, world)) as client:
        yield client


# ---- the fake itself --------------------------------------------------------------------------


async def test_fake_answers_json_exactly_as_discord_py_needs_and_checks_the_token(fake_discord):
    async with aiohttp.ClientSession() as http:
        ok = await http.get(
            f"{fake_discord.api_base}/users/@me", headers={"Authorization": f"Bot {fake_discord.token}"}
        )
        bad = await http.get(f"{fake_discord.api_base}/users/@me", headers={"Authorization": "Bot wrong"})
        unknown = await http.get(
            f"{fake_discord.api_base}/no/such/route", headers={"Authorization": f"Bot {fake_discord.token}"}
        )
        assert ok.headers["content-type"] == "application/json"  # discord.py compares exactly
        assert (await ok.json())["id"] == fake_discord.bot["id"]
        assert (bad.status, unknown.status) == (401, 404)
    assert [c.path for c in fake_discord.calls] == ["/users/@me", "/users/@me", "/no/such/route"]


# ---- start-up --------------------------------------------------------------------------------


async def test_login_identify_asks_for_message_content_and_syncs_commands_globally(fake_discord, world, bot):
    identify = fake_discord.identifies[0]
    intents = discord.Intents._from_value(identify["intents"])
    assert identify["token"] == fake_discord.token
    assert intents.message_content and intents.guild_messages and intents.dm_messages
    assert fake_discord.calls_to("GET", "/users/@me")
    puts = fake_discord.calls_to("PUT", r"/applications/\d+/commands")
    assert len(puts) == 1 and not fake_discord.calls_to("PUT", r"/applications/\d+/guilds/\d+/commands")
    synced = {c["name"]: c for c in puts[0].json}
    assert sorted(synced) == sorted([*ADMIN_NAMES, *EVERYONE_NAMES])
    for name in ADMIN_NAMES:
        assert int(synced[name]["default_member_permissions"]) == MANAGE_GUILD, name
    for name in EVERYONE_NAMES:
        assert synced[name]["default_member_permissions"] is None, name
    assert [o["name"] for o in synced["mode"]["options"]] == ["mode"]
    assert {c["value"] for c in synced["mode"]["options"][0]["choices"]} == {"auto", "full"}
    assert bot.get_guild(int(world.guild["id"])) is not None


async def test_dev_guild_sync_goes_to_that_guild_only(fake_discord, world, pipeline):
    settings = discord_settings_for(fake_discord, world, dev_guild_id=world.guild["id"])
    async with running_client(pipeline, settings):
        puts = fake_discord.calls_to("PUT", rf"/applications/\d+/guilds/{world.guild['id']}/commands")
        assert len(puts) == 1 and len(puts[0].json) == len(ADMIN_NAMES) + len(EVERYONE_NAMES)
        assert not fake_discord.calls_to("PUT", r"/applications/\d+/commands")
        # Commands copied to the guild still run (the tree finds them by the guild id).
        iid = await fake_discord.invoke("help", world.member, world.general)
        await fake_discord.wait_for(lambda: fake_discord.responses(iid))
        assert pipeline.commands[-1][1] == "help"


async def test_failed_command_sync_is_logged_and_the_bot_still_chats(fake_discord, world, pipeline, caplog):
    fake_discord.fail_next(lambda c: c.method == "PUT", how="403")
    async with running_client(pipeline, discord_settings_for(fake_discord, world)):
        await fake_discord.user_says(world.dm, world.member, "still there?")
        await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    assert "slash command sync failed" in caplog.text


async def test_serve_runs_until_cancelled(fake_discord, world, pipeline):
    task = asyncio.create_task(adapter.serve(pipeline, discord_settings_for(fake_discord, world)))
    await fake_discord.wait_for(lambda: fake_discord.identifies)
    await fake_discord.user_says(world.dm, world.member, "hi via serve")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fake_discord.sent_to(world.dm)[0].json["content"] == "echo: hi via serve"


async def test_a_rejected_token_says_so(fake_discord, world, pipeline):
    settings = discord_settings_for(fake_discord, world)
    settings = replace(settings, discord=replace(settings.discord, token="not-the-token"))
    with pytest.raises(RuntimeError, match="rejected DISCORD_BOT_TOKEN"):
        await asyncio.wait_for(adapter.serve(pipeline, settings), 10)


async def test_a_disabled_message_content_intent_says_how_to_enable_it(fake_discord, world, pipeline):
    fake_discord.message_content_enabled = False
    with pytest.raises(RuntimeError, match="Message Content Intent"):
        await asyncio.wait_for(adapter.serve(pipeline, discord_settings_for(fake_discord, world)), 10)


async def test_serve_without_token_says_what_is_missing(fake_discord, world, pipeline):
    settings = replace(discord_settings_for(fake_discord, world), discord=DiscordSettings())
    with pytest.raises(RuntimeError, match="DISCORD_BOT_TOKEN"):
        await adapter.serve(pipeline, settings)


# ---- messages --------------------------------------------------------------------------------


async def test_dm_round_trip_shows_typing_while_answering(fake_discord, world, pipeline, bot):
    typing_path = rf"/channels/{world.dm['id']}/typing"

    async def typing_seen(_message):  # the answer is only ready once typing was shown
        await fake_discord.wait_for(lambda: fake_discord.calls_to("POST", typing_path))

    pipeline.before_answer = typing_seen
    sent = await fake_discord.user_says(world.dm, world.member, "hello bot")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    (incoming,) = pipeline.handled
    assert incoming.chat_key == f"discord:{world.dm['id']}"
    assert (incoming.text, incoming.author_id, incoming.message_id) == (
        "hello bot",
        world.member["id"],
        sent["id"],
    )
    assert incoming.is_admin and incoming.addressed and incoming.platform == "discord"
    assert incoming.author == "Bob"
    (post,) = fake_discord.sent_to(world.dm)
    assert post.json["content"] == "echo: hello bot"
    assert "message_reference" not in post.json  # in a DM the answer needs no reply arrow
    assert post.json["allowed_mentions"]["parse"] == []  # model output never pings anyone


async def test_guild_channel_answers_mentions_and_replies_and_records_the_rest(
    fake_discord, world, pipeline, bot
):
    ch = world.general
    await fake_discord.user_says(ch, world.member, "just chatting")
    await pipeline.wait_for(lambda: pipeline.recorded)
    mention = await fake_discord.user_says(
        ch, world.member, f"{fake_discord.mention(fake_discord.bot)} what is up?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_for(lambda: fake_discord.sent_to(ch))
    answer = fake_discord.messages[
        fake_discord.sent_to(ch)[0].json and _last_bot_message(fake_discord, ch)["id"]
    ]
    await fake_discord.user_says(ch, world.member, "and more?", reply_to=answer)
    await fake_discord.wait_for(lambda: len(fake_discord.sent_to(ch)) == 2)
    await fake_discord.user_says(ch, world.admin, "replying to bob", reply_to=mention)
    await pipeline.wait_for(lambda: len(pipeline.recorded) == 2)

    assert [m.text for m in pipeline.handled] == ["what is up?", "and more?"]
    assert [m.text for m in pipeline.recorded] == ["just chatting", "replying to bob"]
    assert all(not m.addressed for m in pipeline.recorded)
    assert all(m.chat_key == f"discord:{ch['id']}" for m in pipeline.handled + pipeline.recorded)
    assert [m.is_admin for m in pipeline.recorded] == [False, True]  # the Admin role has manage_guild
    first = fake_discord.sent_to(ch)[0].json
    assert first["content"] == "echo: what is up?"
    assert str(first["message_reference"]["message_id"]) == mention["id"]


def _last_bot_message(fake_discord: FakeDiscord, channel: dict) -> dict:
    return [
        m
        for m in fake_discord.messages.values()
        if m["channel_id"] == channel["id"] and m["author"]["id"] == fake_discord.bot["id"]
    ][-1]


async def test_other_mentions_become_names_and_threads_have_their_own_chat(
    fake_discord, world, pipeline, bot
):
    text = f"{fake_discord.mention(fake_discord.bot)} say hi to {fake_discord.mention(world.admin)}"
    await fake_discord.user_says(world.thread, world.member, text, mentions=[fake_discord.bot, world.admin])
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.thread))
    (incoming,) = pipeline.handled
    assert incoming.text == "say hi to @Alice"
    assert incoming.chat_key == f"discord:{world.thread['id']}"


async def test_mentioning_the_bots_role_counts_as_a_mention(fake_discord, world, pipeline, bot):
    role = fake_discord.bot_role(world.guild)
    await fake_discord.user_says(
        world.general, world.member, f"<@&{role['id']}> are you there?", mention_roles=[role]
    )
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.general))
    assert [(m.text, m.addressed) for m in pipeline.handled] == [("are you there?", True)]


async def test_recording_can_be_turned_off(fake_discord, world, pipeline):
    settings = replace(discord_settings_for(fake_discord, world), record_group_messages=False)
    async with running_client(pipeline, settings):
        await fake_discord.user_says(world.general, world.member, "chatter")
        await fake_discord.user_says(
            world.general,
            world.member,
            f"{fake_discord.mention(fake_discord.bot)} hi",
            mentions=[fake_discord.bot],
        )
        await fake_discord.wait_for(lambda: fake_discord.sent_to(world.general))
    assert pipeline.recorded == [] and [m.text for m in pipeline.handled] == ["hi"]


async def test_per_user_memory_scope_keys_chats_by_user(fake_discord, world, pipeline):
    settings = replace(discord_settings_for(fake_discord, world), memory_scope="user")
    async with running_client(pipeline, settings):
        await fake_discord.user_says(world.general, world.member, "chatter")
        await pipeline.wait_for(lambda: pipeline.recorded)
    assert pipeline.recorded[0].chat_key == f"discord:{world.general['id']}:{world.member['id']}"


async def test_admin_user_ids_make_an_admin_in_guilds(fake_discord, world, pipeline, bot):
    await fake_discord.user_says(world.general, world.owner_listed, "hi")
    await fake_discord.user_says(world.general, world.member, "hi")
    await pipeline.wait_for(lambda: len(pipeline.recorded) == 2)
    admin_by_author = {m.author_id: m.is_admin for m in pipeline.recorded}
    assert admin_by_author == {world.owner_listed["id"]: True, world.member["id"]: False}


async def test_a_5000_character_answer_is_split_into_parts_of_at_most_2000(
    fake_discord, world, pipeline, bot
):
    sentence = "This sentence is part of a very long answer. "
    paragraphs = ["".join([sentence] * 10).strip() for _ in range(11)]
    long = "\n\n".join(paragraphs)
    assert 4900 < len(long) <= 5200
    pipeline.answer = lambda m: long
    await fake_discord.user_says(
        world.general,
        world.member,
        f"{fake_discord.mention(fake_discord.bot)} tell me",
        mentions=[fake_discord.bot],
    )
    await fake_discord.wait_for(lambda: len(fake_discord.sent_to(world.general)) == 3)
    parts = [c.json["content"] for c in fake_discord.sent_to(world.general)]
    assert all(len(p) <= 2000 for p in parts)
    assert all(p.endswith(".") for p in parts)  # cut at paragraph/sentence ends, not mid-word
    assert "".join(parts).replace("\n", "").replace(" ", "") == long.replace("\n", "").replace(" ", "")
    refs = [c.json.get("message_reference") for c in fake_discord.sent_to(world.general)]
    assert refs[0] is not None and refs[1:] == [None, None]  # only the first part replies


async def test_discord_refuses_over_2000_characters(fake_discord, world, bot):
    channel = bot.get_channel(int(world.general["id"]))
    with pytest.raises(discord.HTTPException) as info:
        await channel.send("x" * 2001)
    assert info.value.status == 400 and info.value.code == 50035


async def test_a_failed_send_is_retried_once_with_the_same_nonce(fake_discord, world, pipeline, bot, caplog):
    fake_discord.fail_next(lambda c: c.method == "POST" and c.path.endswith("/messages"), how="disconnect")
    await fake_discord.user_says(world.dm, world.member, "are you there")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    posts = fake_discord.calls_to("POST", rf"/channels/{world.dm['id']}/messages")
    assert len(posts) == 2 and posts[0].json["nonce"] == posts[1].json["nonce"]
    assert posts[1].json["enforce_nonce"] is True  # Discord drops a duplicate if the first got through
    assert "failed (attempt 1)" in caplog.text


async def test_a_send_failing_past_the_budget_is_logged_and_the_bot_carries_on(
    fake_discord, world, pipeline, caplog
):
    is_post = lambda c: c.method == "POST" and c.path.endswith("/messages")  # noqa: E731
    fake_discord.fail_next(is_post, how="disconnect", times=2)
    async with running_client(
        pipeline, discord_settings_for(fake_discord, world, send_budget_s=0.0)
    ):  # no budget: one retry only
        await fake_discord.user_says(world.dm, world.member, "first")
        await fake_discord.wait_for(
            lambda: len(fake_discord.calls_to("POST", rf"/channels/{world.dm['id']}/messages")) == 2
        )
        await fake_discord.user_says(world.dm, world.member, "second")
        await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    assert [c.json["content"] for c in fake_discord.sent_to(world.dm)] == ["echo: second"]
    assert "failed 2 times in a row; giving up" in caplog.text


async def test_rate_limits_are_waited_out_by_discord_py(fake_discord, world, pipeline, bot):
    fake_discord.fail_next(lambda c: c.method == "POST" and c.path.endswith("/messages"), how="429")
    await fake_discord.user_says(world.dm, world.member, "busy?")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    statuses = [c.status for c in fake_discord.calls_to("POST", rf"/channels/{world.dm['id']}/messages")]
    assert statuses == [429, 200]


async def test_a_chat_service_failure_gets_an_apology_not_silence(fake_discord, world, pipeline, bot, caplog):
    def broken(message):
        raise RuntimeError("boom")

    pipeline.answer = broken
    await fake_discord.user_says(world.dm, world.member, "hello?")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    assert "Sorry" in fake_discord.sent_to(world.dm)[0].json["content"]
    assert "chat service failed" in caplog.text


async def test_odd_events_cause_no_errors(fake_discord, world, pipeline, bot, caplog):
    caplog.set_level(logging.ERROR)
    ch = world.general
    some = await fake_discord.user_says(ch, world.member, "a message to react to")
    await pipeline.wait_for(lambda: pipeline.recorded)
    reaction = {
        "user_id": world.member["id"],
        "channel_id": ch["id"],
        "message_id": some["id"],
        "guild_id": ch["guild_id"],
        "emoji": {"id": None, "name": "👍"},
        "type": 0,
        "burst": False,
        "member": fake_discord.members[(ch["guild_id"], world.member["id"])],
    }
    await fake_discord.dispatch("MESSAGE_REACTION_ADD", reaction)
    embed = {"type": "rich", "title": "link preview", "description": "an embed"}
    await fake_discord.user_says(ch, world.member, "", embeds=[embed], mentions=[fake_discord.bot])
    photo = {
        "id": fake_discord.snowflake(),
        "filename": "cat.png",
        "size": 10,
        "url": "http://127.0.0.1/cat.png",
        "proxy_url": "http://127.0.0.1/cat.png",
        "content_type": "image/png",
    }
    await fake_discord.user_says(world.dm, world.member, "", attachments=[photo])
    await fake_discord.user_says(ch, world.member, "", type=7)  # "bob joined the server"
    await fake_discord.user_says(world.dm, fake_discord.make_user("otherbot", bot=True), "beep")
    await fake_discord.dispatch("SOME_FUTURE_EVENT", {"x": 1})
    await fake_discord.user_says(world.dm, world.member, "still alive?")
    await fake_discord.wait_for(
        lambda: len(pipeline.handled) >= 2 and len(fake_discord.sent_to(world.dm)) >= 2
    )
    # A picture without text is for the pipeline to read (issue 14); the rest is dropped quietly.
    assert [(m.text, [p.kind for p in m.media]) for m in pipeline.handled] == [
        ("", ["photo"]),
        ("still alive?", []),
    ]
    assert len(pipeline.recorded) == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_attachments_with_text_are_passed_as_kinds(fake_discord, world, pipeline, bot):
    photo = {
        "id": fake_discord.snowflake(),
        "filename": "cat.png",
        "size": 10,
        "url": "http://127.0.0.1/cat.png",
        "proxy_url": "http://127.0.0.1/cat.png",
        "content_type": "image/png",
    }
    await fake_discord.user_says(world.dm, world.member, "look at my cat", attachments=[photo])
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    assert pipeline.handled[0].attachments == ("photo",)


# ---- reconnecting ----------------------------------------------------------------------------


@pytest.mark.parametrize("abort", [True, False], ids=["tcp-cut", "close-4000"])
async def test_reconnect_and_resume_after_the_gateway_drops(fake_discord, world, pipeline, bot, abort):
    await fake_discord.user_says(world.dm, world.member, "before")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    session = fake_discord.session_id
    await fake_discord.drop_gateway(abort=abort)
    await fake_discord.user_says(world.dm, world.member, "while you were away")  # kept for the RESUME replay
    await fake_discord.wait_for(lambda: fake_discord.resumes)
    assert fake_discord.resumes[0]["session_id"] == session and len(fake_discord.identifies) == 1
    await fake_discord.wait_for(lambda: len(fake_discord.sent_to(world.dm)) == 2)
    assert [m.text for m in pipeline.handled] == ["before", "while you were away"]


async def test_a_session_that_cannot_resume_identifies_again(fake_discord, world, pipeline, bot):
    fake_discord.session_id = "forgotten"  # the server lost the session: RESUME gets INVALID_SESSION
    await fake_discord.drop_gateway(code=4000)
    await fake_discord.wait_for(lambda: len(fake_discord.identifies) == 2, timeout=15)
    await wait_until(lambda: bot.is_ready(), timeout=15)
    await fake_discord.user_says(world.dm, world.member, "new session")
    await fake_discord.wait_for(lambda: fake_discord.sent_to(world.dm))
    assert pipeline.handled[-1].text == "new session"


# ---- slash commands --------------------------------------------------------------------------


def _answer(fake_discord: FakeDiscord, iid: str) -> tuple[dict, dict]:
    """(the callback body, what the user finally sees) of an interaction."""
    return fake_discord.responses(iid)[0].json, fake_discord.final_message(iid)


@pytest.mark.parametrize("name", ADMIN_NAMES)
async def test_admin_commands_run_for_admins_ephemerally(fake_discord, world, pipeline, bot, name):
    iid = await fake_discord.invoke(name, world.admin, world.general)
    await fake_discord.wait_for(
        lambda: fake_discord.final_message(iid) and not fake_discord.final_message(iid)["flags"] & 128
    )
    incoming, called, _ = pipeline.commands[-1]
    assert called == name and incoming.is_admin
    assert incoming.chat_key == f"discord:{world.general['id']}"
    message = fake_discord.final_message(iid)
    assert message["flags"] & EPHEMERAL
    assert message["content"]


@pytest.mark.parametrize("name", ADMIN_NAMES)
async def test_admin_commands_refuse_members_ephemerally(fake_discord, world, pipeline, bot, name):
    iid = await fake_discord.invoke(name, world.member, world.general)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    body, message = _answer(fake_discord, iid)
    assert body["type"] == 4 and body["data"]["flags"] & EPHEMERAL
    assert message["content"] == f"Sorry, /{name} is only for admins of this chat."
    assert pipeline.commands == []  # refused before the pipeline is asked: nothing revealed


@pytest.mark.parametrize("name", ["facts", "forget", "mode"])
async def test_admin_user_ids_and_dm_users_may_run_admin_commands(fake_discord, world, pipeline, bot, name):
    in_guild = await fake_discord.invoke(name, world.owner_listed, world.general)
    in_dm = await fake_discord.invoke(name, world.member, world.dm)
    await fake_discord.wait_for(
        lambda: fake_discord.final_message(in_guild) and fake_discord.final_message(in_dm)
    )
    assert [m.is_admin for m, _, _ in pipeline.commands] == [True, True]
    assert pipeline.commands[1][0].chat_key == f"discord:{world.dm['id']}"


@pytest.mark.parametrize("name", EVERYONE_NAMES)
async def test_everyone_commands_run_for_members(fake_discord, world, pipeline, bot, name):
    iid = await fake_discord.invoke(name, world.member, world.general)
    await fake_discord.wait_for(  # a slow one (/export) is deferred first: wait for its answer
        lambda: fake_discord.final_message(iid) and not fake_discord.final_message(iid)["flags"] & 128
    )
    incoming, called, _ = pipeline.commands[-1]
    assert called == name and not incoming.is_admin and incoming.author_id == world.member["id"]
    _body, message = _answer(fake_discord, iid)
    assert message["flags"] & EPHEMERAL and message["content"] == f"{name} done"


async def test_forgetme_forgets_the_caller_in_this_chat(fake_discord, world, pipeline, bot):
    iid = await fake_discord.invoke("forgetme", world.member, world.thread)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    incoming, name, args = pipeline.commands[-1]
    assert (name, args) == ("forgetme", "")
    assert incoming.author_id == world.member["id"] and incoming.chat_key == f"discord:{world.thread['id']}"


async def test_mode_passes_the_choice(fake_discord, world, pipeline, bot):
    iid = await fake_discord.invoke("mode", world.admin, world.general, {"mode": "full"})
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    assert pipeline.commands[-1][1:] == ("mode", "full")
    assert fake_discord.final_message(iid)["content"] == "mode done full"


async def test_forget_and_tier_take_their_option(fake_discord, world, pipeline, bot):
    forget = await fake_discord.invoke("forget", world.admin, world.general, {"confirm": "yes"})
    tier = await fake_discord.invoke("tier", world.member, world.general, {"name": "heavy"})
    await fake_discord.wait_for(
        lambda: fake_discord.final_message(forget) and fake_discord.final_message(tier)
    )
    assert sorted(c[1:] for c in pipeline.commands) == [("forget", "yes"), ("tier", "heavy")]


async def test_usage_defers_then_shows_the_table_and_the_png(fake_discord, world, pipeline, bot):
    iid = await fake_discord.invoke("usage", world.admin, world.general)
    await fake_discord.wait_for(lambda: fake_discord.interactions[iid].get("edits"))
    body, message = _answer(fake_discord, iid)
    assert body["type"] == 5 and body["data"]["flags"] & EPHEMERAL  # deferred, thinking, ephemeral
    (edit,) = fake_discord.interactions[iid]["edits"]
    assert edit.files == [("usage.png", PNG)]
    assert "standard 3" in message["content"] and message["attachments"][0]["filename"] == "usage.png"


async def test_a_command_result_with_a_file_attaches_it(fake_discord, world, pipeline, bot):
    export = File("export.json", b'{"messages": []}', "application/json")
    pipeline.results["summary"] = CommandResult("Your data:", files=(export,))
    iid = await fake_discord.invoke("summary", world.admin, world.general)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    message = fake_discord.final_message(iid)
    assert message["content"] == "Your data:"
    assert [a["filename"] for a in message["attachments"]] == ["export.json"]


async def test_a_slow_command_is_deferred_before_discord_gives_up(
    fake_discord, world, pipeline, bot, monkeypatch
):
    monkeypatch.setattr(adapter, "DEFER_AFTER_S", 0.05)
    pipeline.command_delay = asyncio.Event()
    iid = await fake_discord.invoke("summary", world.admin, world.general)
    await fake_discord.wait_for(lambda: fake_discord.responses(iid))
    assert fake_discord.responses(iid)[0].json["type"] == 5  # acknowledged while the pipeline still works
    pipeline.command_delay.set()
    await fake_discord.wait_for(lambda: fake_discord.interactions[iid].get("edits"))
    assert fake_discord.final_message(iid)["content"] == "summary done"


async def test_forget_asks_with_a_button_and_the_click_confirms(fake_discord, world, pipeline, bot):
    iid = await fake_discord.invoke("forget", world.admin, world.general)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    question = fake_discord.final_message(iid)
    assert question["flags"] & EPHEMERAL and "Forget" in question["content"]
    button = question["components"][0]["components"][0]
    assert button["type"] == 2 and button["style"] == 4  # a red button

    stranger = await fake_discord.click(question, button["custom_id"], world.member)
    await fake_discord.wait_for(lambda: fake_discord.responses(stranger))
    assert [n for _, n, _ in pipeline.commands] == ["forget"]  # nobody else can confirm

    click = await fake_discord.click(question, button["custom_id"], world.admin)
    await fake_discord.wait_for(lambda: fake_discord.responses(click))
    assert pipeline.commands[-1][1:] == ("forget", "yes") and pipeline.commands[-1][0].is_admin
    assert fake_discord.responses(click)[0].json["type"] == 7  # the question is replaced by the answer
    assert question["content"] == "forget done yes" and question["components"] == []


async def test_a_failing_confirmation_says_sorry(fake_discord, world, pipeline, bot, caplog):
    iid = await fake_discord.invoke("forget", world.admin, world.general)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    question = fake_discord.final_message(iid)

    async def broken(message, name, args):
        raise RuntimeError("boom")

    pipeline.command = broken
    click = await fake_discord.click(
        question, question["components"][0]["components"][0]["custom_id"], world.admin
    )
    await fake_discord.wait_for(lambda: fake_discord.responses(click))
    assert fake_discord.responses(click)[0].json["data"]["flags"] & EPHEMERAL
    assert "Sorry" in fake_discord.responses(click)[0].json["data"]["content"]
    assert "confirmation '/forget yes' failed" in caplog.text


async def test_a_long_command_answer_continues_in_followups(fake_discord, world, pipeline, bot):
    long = "\n\n".join(["word " * 300] * 3)
    pipeline.command = _fixed(pipeline.command, CommandResult(text=long))
    iid = await fake_discord.invoke("help", world.member, world.general)
    await fake_discord.wait_for(lambda: fake_discord.interactions[iid].get("followups"))
    parts = [fake_discord.final_message(iid)["content"]] + [
        m["content"] for m in fake_discord.interactions[iid]["followups"]
    ]
    assert len(parts) == 2 and all(len(p) <= 2000 for p in parts)
    assert all(m["flags"] & EPHEMERAL for m in fake_discord.interactions[iid]["followups"])


def _fixed(command, result: CommandResult):
    async def fixed(message, name, args):
        await command(message, name, args)
        return result

    return fixed


async def test_a_failing_command_says_sorry(fake_discord, world, pipeline, bot, caplog):
    async def broken(message, name, args):
        raise RuntimeError("boom")

    pipeline.command = broken
    iid = await fake_discord.invoke("help", world.member, world.general)
    await fake_discord.wait_for(lambda: fake_discord.final_message(iid))
    assert "Sorry" in fake_discord.final_message(iid)["content"]
    assert fake_discord.final_message(iid)["flags"] & EPHEMERAL
    assert "slash command failed" in caplog.text
