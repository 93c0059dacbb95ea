"""Issue 15 in Discord, end to end: /export as an attachment of an ephemeral answer (deferred
while it is built), then /forgetme, then an empty /export; /remember and /forgetfact options."""

from __future__ import annotations

import json

import pytest

from bot.chat.commands import own_data
from tests.fakes.discord_server import EPHEMERAL
from tests.support import World, answered, slash


@pytest.fixture
def world(fake_discord) -> World:
    return World(fake_discord)


def attachment(fake_discord, shown: dict) -> dict:
    """The JSON of the export attached to the answer of an interaction."""
    (edit,) = [e for e in fake_discord.interactions[shown["iid"]]["edits"] if e.files]
    ((name, data),) = edit.files
    assert name == "export.json"
    return json.loads(data)


async def test_export_is_an_ephemeral_attachment_and_empty_after_forgetme(
    fake_discord, openai, world, discord_bot
):
    ch = world.general
    await fake_discord.user_says(ch, world.member, "My name is Bob and I like sailing.")
    await fake_discord.user_says(
        ch, world.admin, f"{fake_discord.mention(fake_discord.bot)} hi", mentions=[fake_discord.bot]
    )
    await answered(fake_discord, ch, "hi")
    first = await slash(fake_discord, "export", world.member, ch)
    assert first["flags"] & EPHEMERAL and first["content"].startswith("Your data in this chat: 1 message")
    assert fake_discord.responses(first["iid"])[0].json["type"] == 5  # deferred: slow
    data = attachment(fake_discord, first)
    assert (
        data["export"]["chat_key"] == f"discord:{ch['id']}"
        and data["export"]["author_id"] == world.member["id"]
    )
    assert [m["text"] for m in data["messages"]] == ["My name is Bob and I like sailing."]
    refused = await slash(fake_discord, "export", world.member, ch, scope="all")
    assert refused["flags"] & EPHEMERAL and refused["content"].startswith(
        "Sorry, /export all is only for admins"
    )
    assert not any(e.files for e in fake_discord.interactions[refused["iid"]].get("edits", []))
    await slash(fake_discord, "forgetme", world.member, ch)
    second = await slash(fake_discord, "export", world.member, ch)
    assert second["content"] == own_data.NOTHING_OF_YOURS
    empty = attachment(fake_discord, second)
    assert empty["messages"] == [] and empty["facts"] == [] and "sailing" not in json.dumps(empty)


async def test_remember_and_forgetfact_take_their_options(fake_discord, openai, world, discord_bot):
    ch = world.general
    await fake_discord.user_says(ch, world.member, "My name is Bob.")
    noted = await slash(fake_discord, "remember", world.member, ch, text="Bob is on call this week")
    listed = await slash(fake_discord, "remember", world.member, ch)
    bad = await slash(fake_discord, "forgetfact", world.member, ch, number="Bob")
    mine = await slash(fake_discord, "forgetfact", world.member, ch)
    assert (
        noted["content"].startswith("Noted (#") and "Bob is on call this week (from Bob)" in listed["content"]
    )
    assert bad["content"].startswith("Which fact? Send /forgetfact N")
    fact_id = mine["content"].split("#")[1].split()[0]
    removed = await slash(fake_discord, "forgetfact", world.member, ch, number=fact_id)
    assert removed["content"].startswith(f"Removed #{fact_id} name: Bob") and removed["flags"] & EPHEMERAL
    new = await slash(fake_discord, "new", world.member, ch)
    assert new["content"].startswith("New topic")
