"""`/catchup` and "what did I miss?" on the fake Telegram: a busy group, an empty one, imported history."""

from __future__ import annotations

import pytest

from bot.chat.proactive.catchup import asks_what_i_missed
from tests.support import default_config_settings
from tests.support.core import running_pipeline, wait_until
from tests.support.telegram import ask, running_bot

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

BOT = "@memo_test_bot"


def settings_for(tg):
    # No model: the digest is the offline, extractive one.
    return default_config_settings({"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_API_BASE_URL": tg.base_url})


async def test_catchup_on_a_busy_group_says_who_decided_asked_and_when(tg, tmp_path):
    alice, bob, carol = tg.user(1, "Alice"), tg.user(2, "Bob"), tg.user(3, "Carol")
    group = tg.group(-100500)
    settings = settings_for(tg)
    async with running_pipeline(settings, tmp_path) as pipeline, running_bot(pipeline, settings, tg):
        tg.send(group, alice, "I'll be offline for a bit, see you later")
        said = [
            (bob, "The weather is nice today"),
            (carol, "Should we go camping this weekend at the lake?"),
            (bob, "I think the lake campsite near the old mill is lovely and quiet"),
            (carol, "OK, decided: we'll go camping at the lake on Saturday at 9:00"),
            (bob, "Alice, can you bring the tent?"),
            (carol, "haha"),
        ]
        for who, text in said:
            tg.send(group, who, text)

        async def recorded() -> bool:
            return (await pipeline.memory.stats("telegram:-100500"))["total_messages"] == 7

        await wait_until(recorded, timeout=30, what="the 7 group messages recorded")
        digest = (await ask(tg, group, alice, f"{BOT} what did I miss?"))["text"]
        bob_view = (await ask(tg, group, bob, "/catchup"))["text"]
    lines = digest.splitlines()
    assert lines[0].startswith("6 messages from 2 people since your last message (")
    assert lines[1:6] == [
        "Who said what:",
        '- Bob (3): "I think the lake campsite near the old mill is lovely and quiet"',
        '  latest: "Alice, can you bring the tent?"',
        '- Carol (3): "OK, decided: we\'ll go camping at the lake on Saturday at 9:00"',
        '  latest: "haha"',
    ]
    decided = '- Carol: "OK, decided: we\'ll go camping at the lake on Saturday at 9:00"'
    assert lines[lines.index("Decided:") + 1] == decided
    asked = lines[lines.index("Questions to you and mentions:") + 1]
    assert asked == '- Bob: "Alice, can you bring the tent?"'
    dates = lines[lines.index("Dates mentioned:") + 1 :]
    assert '- Bob: "The weather is nice today"' in dates
    assert bob_view.startswith("1 message from 1 person since your last message")
    assert '- Carol (1): "haha"' in bob_view.splitlines()


async def test_catchup_on_an_empty_group_says_nothing_new(tg, tmp_path):
    alice = tg.user(1, "Alice")
    group = tg.group(-100501)
    settings = settings_for(tg)
    async with running_pipeline(settings, tmp_path) as pipeline, running_bot(pipeline, settings, tg):
        answer = (await ask(tg, group, alice, "/catchup"))["text"]
    assert answer == "Nothing new here in the last day."


async def test_catchup_works_on_imported_history(tg, tmp_path):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    settings = settings_for(tg)
    async with running_pipeline(settings, tmp_path) as pipeline, running_bot(pipeline, settings, tg):
        await pipeline.memory.client.import_messages(
            "telegram:1",
            [
                {"text": "I'm off to bed", "author": "Alice", "author_id": "1", "message_id": "i1"},
                {"text": "We agreed to meet on Friday at 18:00", "author": "Dan", "author_id": "9",
                 "message_id": "i2"},
            ],
        )  # fmt: skip
        answer = (await ask(tg, chat, alice, "/catchup"))["text"]
    assert answer.startswith("1 message from 1 person since your last message")
    assert '- Dan: "We agreed to meet on Friday at 18:00"' in answer.splitlines()


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("what did I miss?", True),
        ("So what have I missed", True),
        ("catch me up", True),
        ("I missed you", False),
        ("what did I miss while I was away?", True),
        ("What's new in Python 3.12?", False),
    ],
)
def test_the_question_in_words(text, asks):
    assert asks_what_i_missed(text) is asks
