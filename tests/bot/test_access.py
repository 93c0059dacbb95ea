"""Who may use the bot: ALLOWED_USER_IDS / ALLOWED_CHAT_IDS, ADMIN_USER_IDS; a stranger is refused
at most once an hour (injected clock), and nothing of theirs is recorded or sent to a model."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from bot.app import build_pipeline
from bot.chat.access import REFUSAL, AccessPolicy
from bot.chat.pipeline import Pipeline
from bot.config import AccessSettings, settings_from
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import FAST, default_config_settings, make_settings, msg, running_bot

HOUR = 3600.0


@contextlib.asynccontextmanager
async def guarded(
    tmp_path, users=(), chats=(), owners=()
) -> AsyncIterator[tuple[Pipeline, FakeOpenAI, list[float]]]:
    """A pipeline whose access lists are given, on a clock the test moves."""
    now = [1000.0]
    async with FakeOpenAI(default=Echo()) as fake:
        settings = replace(
            make_settings(fake.url),
            access=AccessSettings(frozenset(users), frozenset(chats)),
            admin_user_ids=frozenset(owners),
        )
        async with build_pipeline(settings, tmp_path, options=FAST) as pipeline:
            pipeline.access = AccessPolicy(settings.access, settings.admin_user_ids, clock=lambda: now[0])
            yield pipeline, fake, now


async def kept(pipeline: Pipeline, chat: str) -> int:
    return int((await pipeline.memory.stats(chat))["total_messages"])


async def test_a_stranger_gets_one_refusal_an_hour_and_nothing_of_theirs_is_kept(tmp_path):
    async with guarded(tmp_path, users={"u1"}) as (pipeline, fake, now):
        eve = dict(
            chat="telegram:999", author="eve", author_id="u9", admin=True, platform="telegram"
        )  # her DM
        first = await pipeline.handle(msg("My name is Eve and I live in Oslo.", **eve))
        again = await pipeline.handle(msg("hello? anyone?", **eve))
        streamed = [p async for p in pipeline.stream(msg("still nothing?", **eve))]
        command = await pipeline.command(msg("/facts", **eve), "facts", "")
        now[0] += HOUR + 1
        next_hour = await pipeline.handle(msg("and now?", **eve))
        allowed = await pipeline.handle(msg("hi, it's Ada", author_id="u1"))
        assert await kept(pipeline, "telegram:999") == 0
        assert await pipeline.memory.facts("telegram:999") == []
    assert first.text == REFUSAL and again.text == "" and streamed == []
    assert command.text == REFUSAL  # a command asks directly: refused each time, and runs nothing
    assert next_hour.text == REFUSAL
    assert allowed.text == "echo: hi, it's Ada"
    assert [r.text() for r in fake.requests] and all("Eve" not in r.text() for r in fake.requests)
    assert len(fake.requests) == 1


async def test_in_a_group_only_allowed_people_are_recorded_and_strangers_chatter_gets_no_refusal(tmp_path):
    async with guarded(tmp_path, users={"u1"}) as (pipeline, fake, _):
        group = dict(chat="telegram:-100777", platform="telegram")
        await pipeline.record(msg("Ada's chatter", author_id="u1", addressed=False, **group))
        await pipeline.record(msg("Eve's chatter", author_id="u9", addressed=False, **group))
        quiet = await pipeline.handle(msg("Eve again", author_id="u9", addressed=False, **group))
        asked = await pipeline.handle(msg("@bot who am I?", author_id="u9", **group))
        found = await pipeline.memory.search("telegram:-100777", "chatter", k=5)
    assert [m["text"] for m in found] == ["Ada's chatter"]
    assert quiet.text == "" and asked.text == REFUSAL and not fake.requests


async def test_a_listed_chat_lets_everyone_in_it_and_owners_are_allowed_everywhere(tmp_path):
    async with guarded(tmp_path, chats={"-100777"}, owners={"42"}) as (pipeline, fake, _):
        in_group = await pipeline.handle(
            msg("hello group", chat="telegram:-100777", author_id="u9", platform="telegram")
        )
        per_user_scope = await pipeline.handle(
            msg("hi", chat="telegram:-100777:u9", author_id="u9", platform="telegram")
        )
        dm = await pipeline.handle(msg("hello me", chat="telegram:u9", author_id="u9", platform="telegram"))
        owner = await pipeline.handle(
            msg("owner here", chat="telegram:42", author_id="42", platform="telegram")
        )
        # A platform admin of some other group is not an owner: anyone can make a group.
        group_admin = await pipeline.handle(
            msg(
                "I run my own group", chat="telegram:-100888", author_id="u8", admin=True, platform="telegram"
            )
        )
    assert in_group.text.startswith("echo:") and per_user_scope.text.startswith("echo:")
    assert dm.text == REFUSAL and owner.text.startswith("echo:") and group_admin.text == REFUSAL
    assert len(fake.requests) == 3


async def test_no_lists_means_everyone_and_the_console_is_always_allowed(tmp_path):
    async with guarded(tmp_path) as (pipeline, fake, _):
        answer = await pipeline.handle(msg("anyone may talk", author_id="whoever", platform="telegram"))
    async with guarded(tmp_path, users={"u1"}) as (pipeline, _, _):
        console = await pipeline.handle(
            msg("the operator at the terminal", author_id="ops", platform="console")
        )
    assert answer.text == "echo: ada: anyone may talk" and len(fake.requests) == 1
    assert console.text == "echo: the operator at the terminal"


def test_lists_come_from_the_config_and_the_environment_replaces_them():
    data = {"access": {"allowed_user_ids": [111, "222"], "allowed_chat_ids": ["-100777"]}}
    from_config = settings_from(data, {})
    from_env = settings_from(data, {"ALLOWED_USER_IDS": " 333, 444 ,", "ALLOWED_CHAT_IDS": "-1001"})
    shipped = settings_from({}, {})
    assert from_config.access.allowed_user_ids == {"111", "222"}
    assert from_config.access.allowed_chat_ids == {"-100777"}
    assert from_env.access.allowed_user_ids == {"333", "444"} and from_env.access.allowed_chat_ids == {
        "-1001"
    }
    assert not shipped.access.allowed_user_ids and not shipped.access.allowed_chat_ids  # open by default
    assert shipped.access.refusal_interval_s == HOUR


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_over_telegram_a_stranger_reads_one_refusal_and_the_owner_is_answered(tg, tmp_path):
    alice, eve = tg.user(111, "Alice", "alice"), tg.user(999, "Eve", "eve")
    alice_dm, eve_dm = tg.private_chat(alice), tg.private_chat(eve)
    async with FakeOpenAI(default=Echo()) as openai:
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": openai.url,
            "TELEGRAM_BOT_TOKEN": tg.token,
            "TELEGRAM_API_BASE_URL": tg.base_url,
            "ALLOWED_USER_IDS": "111",
        }
        settings = default_config_settings(env)
        async with (
            build_pipeline(settings, tmp_path, options=FAST) as pipeline,
            running_bot(pipeline, settings, tg),
        ):
            tg.send(eve_dm, eve, "hi, I found your bot")
            tg.send(eve_dm, eve, "hello??")
            tg.send(eve_dm, eve, "/start")
            tg.send(alice_dm, alice, "hi, it's me")
            await tg.wait_for_message(alice_dm["id"])
            [refusal, start] = await tg.wait_for_message(eve_dm["id"], count=2)
            eve_kept = await pipeline.memory.stats(f"telegram:{eve['id']}")
    # One chat's updates are handled in order: the /start answer means "hello??" was handled, silently.
    assert refusal["text"] == REFUSAL and start["text"] == REFUSAL and len(tg.bot_messages(eve_dm["id"])) == 2
    assert eve_kept["total_messages"] == 0
    assert len(openai.requests) == 1 and "Eve" not in openai.requests[0].text()
