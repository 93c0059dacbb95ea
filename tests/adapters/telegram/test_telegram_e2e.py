"""End to end: fake Bot API <-> python-telegram-bot <-> adapter <-> real Pipeline + embedded memory
<-> fake OpenAI."""

from __future__ import annotations

import asyncio

import pytest

from bot.adapters.telegram import adapter as tgad
from tests.fakes.openai_server import Answer
from tests.support import OWNER_ID, ask, bot_on_pipeline

# PTB itself reads RetryAfter.retry_after (deprecated as an int in 22.2) when it retries a 429.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def prompt_of(request) -> str:
    return "\n".join(str(m.get("content")) for m in request.messages)


async def test_private_round_trip_with_typing_and_memory(tg, openai, people, tmp_path):
    async with bot_on_pipeline(tg, openai, tmp_path):
        answer = await ask(tg, people.alice_dm, people.alice, "My name is Ada and I live in Paris.")
        facts = await ask(tg, people.alice_dm, people.alice, "/facts")
    assert answer["text"].endswith("My name is Ada and I live in Paris.")
    order = [c.method for c in tg.calls if c.method in ("sendChatAction", "sendMessage")]
    first_answer = order.index("sendMessage")
    assert first_answer >= 1 and set(order[:first_answer]) == {"sendChatAction"}  # typing shown first
    assert "Ada" in facts["text"] and "Paris" in facts["text"]


async def test_group_gating_records_chatter_and_answers_with_it(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(g, people.bob, "The secret code word is pineapple.")
        answer = await ask(tg, g, people.alice, "@memo_test_bot what is the code word?")
        assert len(openai.requests) == 1  # the chatter was recorded, not answered
        assert "pineapple" in prompt_of(openai.requests[0])
        await ask(tg, g, people.bob, "thanks, and again?", reply_to=answer)
        tg.send(g, people.bob, "not for the bot", reply_to=tg.messages[(g["id"], 1)])
        stats = await ask(tg, g, people.alice, "/memory")
    assert len(openai.requests) == 2
    assert "messages kept: 6" in stats["text"]  # 2 chatter + 2 questions + 2 answers


async def test_a_9000_character_answer_arrives_in_valid_parts(tg, openai, people, tmp_path):
    long = "\n\n".join(["Memory keeps a chat coherent over many days, **even weeks**. " * 14] * 11).strip()[
        :9000
    ]
    plain = long.replace("**", "")
    openai.script(Answer(long))
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(people.alice_dm, people.alice, "Tell me everything about memory please.")
        # Streamed: wait for the final render (formatted), not the first version of each part.
        parts = await tg.wait_until(
            lambda: (
                (ms := tg.bot_messages(people.alice_dm["id"]))
                and len(ms) == 3
                and " ".join(m["text"] for m in ms).split() == plain.split()
                and ms
            ),
            timeout=15,
        )
    assert len(long) == 9000 and len(parts) == 3
    assert all(c.status == 200 for c in tg.calls_to("sendMessage"))  # the fake refuses > 4096 and bad HTML


ADMIN_EXPECT = {
    "facts": "Ada",
    "summary": "summary",
    "memory": "messages kept",
    "mode": "Memory mode is now full",
    "compact": "Nothing to compact",  # two messages: the recent ones are never summarized
}


@pytest.mark.parametrize("name", sorted(ADMIN_EXPECT))
async def test_admin_command_as_admin_and_refused_for_member(tg, openai, people, tmp_path, name):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, g, people.alice, "@memo_test_bot My name is Ada.")
        ok = await ask(tg, g, people.alice, f"/{name} full")
        refused = await ask(tg, g, people.bob, f"/{name}@memo_test_bot full")
    assert ADMIN_EXPECT[name] in ok["text"]
    assert refused["text"] == f"Sorry, /{name} is only for admins of this chat."
    assert "Ada" not in refused["text"]


async def test_usage_as_admin_is_a_table_and_a_chart_and_refused_for_member(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, g, people.alice, "@memo_test_bot hello")
        chart = await ask(tg, g, people.alice, "/usage")
        refused = await ask(tg, g, people.bob, "/usage")
    assert chart["photo"] and tg.photos[0].startswith(b"\x89PNG")
    assert "calls" in chart["caption"] and "total" in chart["caption"]
    assert tg.calls_to("sendPhoto")[0].params["parse_mode"] == "HTML"  # the table is monospaced (<pre>)
    assert refused["text"] == "Sorry, /usage is only for admins of this chat." and len(tg.photos) == 1


async def test_forget_as_admin_with_the_button_erases_the_chat(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, g, people.alice, "@memo_test_bot My name is Ada.")
        refused = await ask(tg, g, people.bob, "/forget")
        question = await ask(tg, g, people.alice, "/forget")
        yes = question["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        tg.press(question, people.alice, yes)
        await tg.wait_until(lambda: tg.calls_to("editMessageText"), timeout=15)
        stats = await ask(tg, g, people.alice, "/memory")
    assert refused["text"] == "Sorry, /forget is only for admins of this chat."
    assert tg.messages[(g["id"], question["message_id"])]["text"] == "Done: this chat's memory is erased."
    assert "messages kept: 0" in stats["text"], stats["text"]


async def test_owner_from_admin_user_ids_is_admin_in_any_group(tg, openai, people, tmp_path):
    owner = tg.user(OWNER_ID, "Owner")
    async with bot_on_pipeline(tg, openai, tmp_path):
        stats = await ask(tg, people.group, owner, "/memory")
    assert "messages kept" in stats["text"]
    assert not [c for c in tg.calls_to("getChatMember") if c.params["user_id"] == OWNER_ID]


async def test_forgetme_forgets_the_sender_only(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(g, people.bob, "My name is Bob and I like sailing.")
        await ask(tg, g, people.alice, "@memo_test_bot My name is Ada.")
        before = await ask(tg, g, people.alice, "/facts")
        done = await ask(tg, g, people.bob, "/forgetme")
        after = await ask(tg, g, people.alice, "/facts")
    assert "Bob" in before["text"] and "sailing" in before["text"]
    assert done["text"].startswith("Done")
    assert "sailing" not in after["text"] and "Ada" in after["text"]


async def test_a_429_from_the_bot_api_is_retried(tg, openai, people, tmp_path):
    tg.fail_next("sendMessage", 429, retry_after=1)
    async with bot_on_pipeline(tg, openai, tmp_path):
        answer = await ask(tg, people.alice_dm, people.alice, "still there?")
    first, second = tg.calls_to("sendMessage")
    assert (first.status, second.status) == (429, 200) and second.at - first.at >= 1.0
    assert answer["text"].endswith("still there?")
    assert len(openai.requests) == 1  # the model was asked once; only the delivery was retried


async def test_non_text_updates(tg, openai, people, tmp_path):
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(people.group, people.bob, kind="sticker")
        polite = await ask(tg, people.alice_dm, people.alice, None, kind="sticker")
        captioned = await ask(
            tg, people.alice_dm, people.alice, None, kind="photo", caption="Look at my cat Tom."
        )
        stats = await ask(tg, people.group, people.alice, "/memory")
    assert polite["text"] == tgad.NOT_TEXT
    assert captioned["text"].endswith("Look at my cat Tom.")
    assert len(openai.requests) == 1
    assert "messages kept: 0" in stats["text"]  # the group sticker was ignored, not recorded


async def test_restart_keeps_memory(tg, openai, people, tmp_path):
    async with bot_on_pipeline(tg, openai, tmp_path):
        await ask(tg, people.alice_dm, people.alice, "My name is Ada and my favourite colour is teal.")
    polls = len(tg.calls_to("getUpdates"))
    async with bot_on_pipeline(tg, openai, tmp_path):
        assert len(tg.calls_to("getMe")) == 2 and len(tg.calls_to("getUpdates")) > polls
        await ask(tg, people.alice_dm, people.alice, "What is my favourite colour?")
        facts = await ask(tg, people.alice_dm, people.alice, "/facts")
    assert "teal" in prompt_of(openai.requests[-1])
    assert "Ada" in facts["text"]


async def test_the_chatbot_telegram_command_runs_and_stops_on_ctrl_c(tg, openai, people, tmp_path):
    """`chatbot telegram --data DIR` as a user starts it: configured by env vars only; SIGINT ends
    it cleanly."""
    import os
    import signal
    import sys

    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TELEGRAM_", "OPENAI_", "MEMORY_", "ADMIN_"))
        },
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": openai.url,
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_BASE_URL": tg.base_url,
    }
    # cwd: an empty folder, so no developer .env is picked up.
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "telegram",
        "--data",
        str(tmp_path / "data"),
        cwd=tmp_path,
        env={**env, "PYTHONPATH": os.getcwd()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await tg.wait_until(lambda: tg.calls_to("getUpdates"), timeout=30)
        answer = await ask(tg, people.alice_dm, people.alice, "Hello from the real command.")
        assert answer["text"].endswith("Hello from the real command.")
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert b"Traceback" not in stderr, stderr.decode()[-2000:]


async def test_forgetme_then_why_at_once_shows_nothing_of_the_forgotten_person(tg, openai, people, tmp_path):
    g = people.group
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(g, people.bob, "my dog Biscuit loves the beach at Nazaré")  # recorded, not answered
        await ask(tg, g, people.bob, "@memo_test_bot tell me about the beach")
        before = await ask(tg, g, people.alice, "/why")
        await ask(tg, g, people.bob, "/forgetme")
        after = await ask(tg, g, people.alice, "/why")
    assert "Biscuit" in before["text"]
    assert "Biscuit" not in after["text"] and "Nazaré" not in after["text"]
    assert after["text"] == "No answer yet in this chat, so no memory prompt to show."
