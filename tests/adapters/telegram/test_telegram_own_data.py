"""Issue 15 in Telegram, end to end (fake Bot API <-> PTB <-> adapter <-> pipeline + embedded memory):
/export as a document (in a group: to the asker's private chat only), /forgetme in between,
/remember, /forgetfact and /new seen through /why, refusals and bad arguments."""

from __future__ import annotations

import json

import pytest

from bot.adapters.telegram import adapter as tgad
from bot.chat.commands import own_data
from tests.support import People, ask, bot_on_pipeline, numbered, prompt_section

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
def people(tg) -> People:
    return People(tg)


async def exported_to(tg, user: dict, count: int) -> dict:
    """The `count`-th document sent to `user`'s private chat, as JSON."""
    docs = await tg.wait_until(
        lambda: (d := [x for x in tg.documents if x.chat_id == user["id"]]) and len(d) >= count and d,
        timeout=15,
    )
    document = docs[count - 1]
    data = json.loads(document.data)
    # The whole chat's export has a name of its own (a console saves it beside yours).
    assert document.name == ("export-all.json" if data["export"]["author_id"] is None else "export.json")
    return data


async def test_export_in_a_group_goes_to_the_private_chat_and_forgetme_empties_it(
    tg, openai, people, tmp_path
):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(g, people.bob, "My name is Bob and I like sailing.")
        await ask(tg, g, people.alice, "@memo_test_bot My name is Ada.")
        said = await ask(tg, g, people.bob, "/export")
        first = await exported_to(tg, people.bob, 1)
        note = tg.bot_messages(people.bob_dm["id"])[0]
        await ask(tg, g, people.bob, "/forgetme")
        await ask(tg, g, people.bob, "/export@memo_test_bot")
        second = await exported_to(tg, people.bob, 2)
    assert said["text"] == tgad.SENT_PRIVATELY
    assert not [d for d in tg.documents if d.chat_id == g["id"]]  # nothing of Bob's data in the group
    assert note["text"].startswith("Your data in this chat: 1 message, 2 facts")
    assert first["export"]["chat_key"] == "telegram:-100777" and first["export"]["author_id"] == "222"
    assert [m["text"] for m in first["messages"]] == ["My name is Bob and I like sailing."]
    assert {f["value"] for f in first["facts"]} == {"Bob", "sailing"}
    assert second["messages"] == [] and second["facts"] == [] and second["notes"] == []
    assert "sailing" not in json.dumps(second) and "Bob" not in json.dumps(second)


async def test_export_for_someone_without_a_private_chat_sends_nothing_anywhere(tg, openai, people, tmp_path):
    carol = tg.user(333, "Carol", "carol")  # never pressed Start in a private chat with the bot
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(people.group, carol, "My name is Carol.")
        said = await ask(tg, people.group, carol, "/export")
    assert said["text"] == tgad.PRIVATE_FIRST.format(who="@memo_test_bot", command="export")
    assert tg.documents == []
    assert [c.status for c in tg.calls_to("sendMessage", chat_id=333)] == [403]


async def test_export_all_is_refused_to_members_and_sent_privately_to_admins(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(g, people.bob, "My name is Bob.")
        refused = await ask(tg, g, people.bob, "/export all")
        await ask(tg, g, people.alice, "/export all")
        whole = await exported_to(tg, people.alice, 1)
        in_private = await ask(tg, people.alice_dm, people.alice, "/export")
        own = await exported_to(tg, people.alice, 2)
    assert refused["text"].startswith("Sorry, /export all is only for admins")
    assert not [d for d in tg.documents if d.chat_id == people.bob["id"]]
    assert whole["export"]["author_id"] is None and "My name is Bob." in [
        m["text"] for m in whole["messages"]
    ]
    assert in_private["text"].startswith(own_data.NOTHING_OF_YOURS[:20])  # in a private chat: right there
    assert own["export"]["chat_key"] == "telegram:111"


async def test_remember_forgetfact_new_seen_through_why(tg, openai, people, tmp_path):
    dm, alice = people.alice_dm, people.alice
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, dm, alice, "My name is Ada and I live in Paris.")
        await ask(tg, dm, alice, "The launch review is on Friday.")
        noted = await ask(tg, dm, alice, "/remember Ada wants short answers")
        facts = numbered((await ask(tg, dm, alice, "/facts"))["text"])
        removed = await ask(tg, dm, alice, f"/forgetfact {facts['location: Paris']}")
        bad = await ask(tg, dm, alice, "/forgetfact Paris")
        await ask(tg, dm, alice, "/new")
        why_at_once = await ask(tg, dm, alice, "/why")
        await ask(tg, dm, alice, "Something else: how do plants drink?")
        why = await ask(tg, dm, alice, "/why")
    assert noted["text"].startswith("Noted (#")
    assert removed["text"].startswith(f"Removed #{facts['location: Paris']} location: Paris")
    assert bad["text"].startswith("Which fact? Send /forgetfact N")
    assert "New topic since" in why_at_once["text"]
    text = why["text"]
    assert "new topic started" in text and "launch review" not in prompt_section(text, "Recent messages")
    assert (
        '"Ada wants short answers"' in text
        and '"Ada"' in text
        and "Paris" not in prompt_section(text, "Known facts")
    )


async def test_a_member_cannot_remove_someone_elses_fact_or_note(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, g, people.alice, "@memo_test_bot My name is Ada.")
        await ask(tg, g, people.alice, "/remember the team meets on Mondays")
        facts = numbered((await ask(tg, g, people.alice, "/facts"))["text"])
        notes = numbered((await ask(tg, g, people.bob, "/remember"))["text"])
        fact_refused = await ask(tg, g, people.bob, f"/forgetfact {facts['name: Ada']}")
        note_refused = await ask(
            tg, g, people.bob, f"/unremember {notes['the team meets on Mondays (from Alice)']}"
        )
        out_of_range = await ask(tg, g, people.bob, "/unremember 999")
        after = await ask(tg, g, people.alice, "/facts")
    assert fact_refused["text"].startswith("Sorry, only admins can remove a fact of someone else")
    assert note_refused["text"].startswith("Sorry, only admins can remove a note of someone else")
    assert out_of_range["text"].startswith("There is no note #999 here.")
    assert "name: Ada" in after["text"]
