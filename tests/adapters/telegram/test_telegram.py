"""The Telegram adapter against the fake Bot API server, with a small recording ChatService.

Everything goes over real HTTP on 127.0.0.1: python-telegram-bot's Application polls the fake
server (`base_url`), and the fake records each Bot API call for the assertions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest
from telegram.error import InvalidToken

from bot.adapters.telegram import adapter as tgad
from bot.chat.types import CommandResult, File
from bot.config import TelegramSettings
from tests.fakes.telegram_server import FakeTelegram
from tests.support import (
    ADMIN_ONLY,
    RecordingService,
    TcpGate,
    running_bot,
    telegram_settings_for,
    wait_until,
)
from tests.support.telegram import PNG

# PTB itself reads RetryAfter.retry_after (deprecated as an int in 22.2) when it retries a 429.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture(params=[True, False], ids=["streaming", "whole"])
def streaming(request) -> bool:
    """Run a test with the answer streamed (edited in place) and sent whole."""
    return request.param


@pytest.fixture
def alice(tg):
    return tg.user(111, "Alice", "alice")


@pytest.fixture
def bob(tg):
    return tg.user(222, "Bob", "bob")


@pytest.fixture
def group(tg):
    return tg.group(-100500, "Friends")


def texts(tg: FakeTelegram, chat_id: int) -> list[str]:
    return [m["text"] for m in tg.bot_messages(chat_id) if "text" in m]


# ----------------------------------------------------------------------------- start-up


async def test_start_up_registers_commands_for_default_and_admin_scopes(tg):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg), tg):
        assert tg.calls[0].method == "getMe"
        scopes = {
            c.params["scope"]["type"]: [x["command"] for x in c.params["commands"]]
            for c in tg.calls_to("setMyCommands")
        }
    assert set(scopes) == {"default", "all_chat_administrators", "all_private_chats"}
    assert "facts" not in scopes["default"] and "forgetme" in scopes["default"]
    assert {"facts", "usage", "forget", "mode", "compact", "summary", "memory"} <= set(
        scopes["all_chat_administrators"]
    )
    # Polling removed any old webhook first, and asked only for the update kinds the bot handles.
    assert tg.calls_to("deleteWebhook") and tg.webhook_url == ""
    assert tg.calls_to("getUpdates")[-1].params["allowed_updates"] == tgad.ALLOWED_UPDATES


async def test_missing_token_is_a_clear_error(tg):
    settings = replace(telegram_settings_for(tg), telegram=TelegramSettings(token=None))
    with pytest.raises(RuntimeError, match="TELEGRAM_BOT_TOKEN"):
        tgad.build_application(RecordingService(), settings)


# ----------------------------------------------------------------------------- private chats


async def test_private_text_is_answered_with_typing_first(tg, alice, streaming):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        sent = tg.send(chat, alice, "hello there")
        [answer] = await tg.wait_for_message(chat["id"])
    assert answer["text"] == "You said: hello there"
    assert answer["reply_to_message"]["message_id"] == sent["message_id"]
    [msg] = service.handled
    assert (msg.chat_key, msg.author, msg.author_id, msg.message_id) == (
        "telegram:111",
        "Alice",
        "111",
        str(sent["message_id"]),
    )
    assert msg.is_admin and msg.addressed and msg.platform == "telegram"
    methods = [c.method for c in tg.calls if c.method in ("sendChatAction", "sendMessage")]
    assert methods[0] == "sendChatAction" and tg.calls_to("sendChatAction")[0].params["action"] == "typing"


async def test_typing_is_renewed_while_the_answer_is_made(tg, alice, streaming):
    service = RecordingService()
    service.hold = asyncio.Event()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg, streaming), tg, typing_interval=0.05):
        tg.send(chat, alice, "think hard")
        await tg.wait_until(lambda: len(tg.calls_to("sendChatAction", chat["id"])) >= 3)
        assert not tg.calls_to("sendMessage"), "answered before the pipeline returned"
        service.hold.set()
        await tg.wait_for_message(chat["id"])
        typing_calls = len(tg.calls_to("sendChatAction", chat["id"]))
        # Another round trip, long enough for several renewals: none comes for the answered chat.
        bob = tg.user(222, "Bob")
        other = tg.private_chat(bob)
        service.hold = asyncio.Event()
        tg.send(other, bob, "next")
        await tg.wait_until(lambda: len(tg.calls_to("sendChatAction", other["id"])) >= 3)
        service.hold.set()
        await tg.wait_for_message(other["id"])
    assert len(tg.calls_to("sendChatAction", chat["id"])) == typing_calls


async def test_markdown_answer_is_sent_as_html(tg, alice, streaming):
    service = RecordingService()
    service.answer = lambda m: "**Bold** and `x < y` and a [link](https://example.com)"
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "format please")
        [answer] = await tg.wait_for_message(chat["id"])
    call = tg.calls_to("sendMessage")[-1]
    assert call.params["parse_mode"] == "HTML"
    assert "<b>Bold</b>" in call.params["text"] and "<code>x &lt; y</code>" in call.params["text"]
    assert answer["text"] == "Bold and x < y and a link"


async def test_rejected_formatting_is_sent_again_as_plain_text(tg, alice, streaming):
    service = RecordingService()
    answer_text = "**Bold** claim with `code`"
    service.answer = lambda m: answer_text
    chat = tg.private_chat(alice)
    # The converter always emits parseable HTML, so the refusal is injected as the server words it.
    tg.fail_next(
        "sendMessage",
        400,
        description='Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 0',
    )
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "hi")
        [answer] = await tg.wait_for_message(chat["id"])
    first, second = tg.calls_to("sendMessage")
    assert first.status == 400 and first.params["parse_mode"] == "HTML"
    assert second.status == 200 and "parse_mode" not in second.params
    assert answer["text"] == answer_text


async def test_other_bad_requests_are_not_retried_as_plain_text(tg, alice, streaming):
    service = RecordingService()
    chat = tg.private_chat(alice)
    tg.fail_next("sendMessage", 403, description="Forbidden: bot was blocked by the user")
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "hi")
        await tg.wait_until(lambda: tg.calls_to("sendMessage"))
        tg.send(chat, alice, "again")
        await tg.wait_until(lambda: any(m["text"] == "You said: again" for m in tg.bot_messages(chat["id"])))
    # A refusal that is not about formatting is not "fixed" by resending as plain text.
    first = tg.calls_to("sendMessage")[0]
    assert first.status == 403 and first.params["parse_mode"] == "HTML"
    assert all(
        c.params.get("parse_mode") == "HTML"
        for c in tg.calls_to("sendMessage", ok=True)
        if "You said" in c.params["text"]
    )
    # Permanent refusals are not retried: "hi" was never delivered.
    assert not any("You said: hi" in m["text"] for m in tg.bot_messages(chat["id"]))


async def test_long_answer_is_split_into_valid_parts(tg, alice, streaming):
    service = RecordingService()
    paragraph = "This sentence is part of a very long answer about memory. " * 15
    long_answer = "\n\n".join([paragraph.strip()] * 11)[:9000]
    service.answer = lambda m: long_answer
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "tell me everything")
        parts = await tg.wait_for_message(chat["id"], count=3)
    assert len(tg.calls_to("sendMessage", ok=False)) == 0
    assert len(parts) == 3 and all(len(p["text"]) <= 4096 for p in parts)
    assert "".join(p["text"] for p in parts).replace(" ", "").replace("\n", "") == long_answer.replace(
        " ", ""
    ).replace("\n", "")
    # Only the first part replies to the question.
    assert "reply_to_message" in parts[0] and all("reply_to_message" not in p for p in parts[1:])


async def test_non_text_gets_a_polite_answer_in_private_and_captions_count(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, kind="sticker")
        [polite] = await tg.wait_for_message(chat["id"])
        tg.send(chat, alice, kind="photo", caption="what is in this picture?")
        await tg.wait_for_message(chat["id"], count=2)
    assert polite["text"] == tgad.NOT_TEXT
    [msg] = service.handled
    assert msg.text == "what is in this picture?" and msg.attachments == ("photo",)


async def test_edited_message_is_neither_answered_nor_recorded_again(tg, alice, bob, group):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        original = tg.send(chat, alice, "first version")
        await tg.wait_for_message(chat["id"])
        chatter = tg.send(group, bob, "group chatter")
        await tg.wait_until(lambda: service.recorded)
        tg.edit(original, "second version")
        tg.edit(chatter, "edited chatter")
        # Updates of a chat are handled in order: once these are answered, the edits were seen.
        tg.send(chat, alice, "after")
        tg.send(group, alice, "@memo_test_bot after")
        await tg.wait_for_message(chat["id"], count=2)
        await tg.wait_for_message(group["id"])
    assert [m.text for m in service.handled] == ["first version", "after", "after"]
    assert [m.text for m in service.recorded] == ["group chatter"]
    assert len(tg.calls_to("sendMessage")) == 3


async def test_a_failing_handler_is_logged_with_the_update_id_and_the_loop_goes_on(
    tg, alice, caplog, streaming
):
    service = RecordingService()
    service.fail_on = "explode"
    chat = tg.private_chat(alice)
    caplog.set_level(logging.ERROR, logger="bot.adapters.telegram.adapter")
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "explode")
        await tg.wait_for_message(chat["id"])
        tg.send(chat, alice, "still there?")
        msgs = await tg.wait_for_message(chat["id"], count=2)
    assert msgs[0]["text"] == tgad.BROKEN
    assert msgs[1]["text"] == "You said: still there?"
    assert any("error handling update 1000" in r.getMessage() for r in caplog.records), caplog.text


async def test_bot_api_429_is_retried_after_retry_after(tg, alice, streaming):
    service = RecordingService()
    chat = tg.private_chat(alice)
    tg.fail_next("sendMessage", 429, retry_after=1)
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(chat, alice, "are you there?")
        [answer] = await tg.wait_for_message(chat["id"])
    first, second = tg.calls_to("sendMessage")
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 1.0  # waited as Telegram asked
    assert answer["text"] == "You said: are you there?"


# ----------------------------------------------------------------------------- groups


async def test_group_answers_only_mentions_replies_and_commands_and_records_the_rest(
    tg, alice, bob, group, streaming
):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg, streaming), tg):
        tg.send(group, bob, "I like sailing")
        tg.send(group, alice, "@memo_test_bot what does Bob like?")
        [answer] = await tg.wait_for_message(group["id"])
        tg.send(group, bob, "thanks", reply_to=answer)
        await tg.wait_for_message(group["id"], count=2)
        tg.send(group, alice, "replying to Bob, not the bot", reply_to=tg.messages[(group["id"], 1)])
        tg.send(group, alice, "/help")
        await tg.wait_for_message(group["id"], count=3)
        await tg.wait_until(lambda: len(service.recorded) == 2)
    assert [m.text for m in service.handled] == ["what does Bob like?", "thanks"]
    assert [(m.text, m.addressed) for m in service.recorded] == [
        ("I like sailing", False),
        ("replying to Bob, not the bot", False),
    ]
    assert all(m.chat_key == "telegram:-100500" for m in service.handled + service.recorded)
    assert [c[1] for c in service.commands] == ["help"]


async def test_group_recording_can_be_turned_off(tg, alice, bob, group):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg, record_group_messages=False), tg):
        tg.send(group, bob, "private thoughts")
        tg.send(group, alice, "@memo_test_bot hi")
        await tg.wait_for_message(group["id"])
    assert service.recorded == [] and [m.text for m in service.handled] == ["hi"]


async def test_per_user_memory_scope_in_groups(tg, alice, bob, group):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg, memory_scope="user"), tg):
        tg.send(group, bob, "chatter")
        tg.send(group, alice, "@memo_test_bot hi")
        tg.send(tg.private_chat(alice), alice, "private")
        await tg.wait_until(lambda: len(service.handled) == 2 and service.recorded)
    keys = {m.text: m.chat_key for m in service.handled + service.recorded}
    assert keys == {
        "chatter": "telegram:-100500:222",
        "hi": "telegram:-100500:111",
        "private": "telegram:111",
    }


async def test_non_text_in_groups_is_ignored_quietly(tg, alice, group):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(group, alice, kind="voice")
        tg.send(group, alice, kind="sticker")
        tg.send(group, alice, "@memo_test_bot ping")
        await tg.wait_for_message(group["id"])
    assert len(tg.calls_to("sendMessage")) == 1
    # The voice goes to the pipeline (which records nothing of a bare voice); the sticker is dropped.
    assert [(m.text, [p.kind for p in m.media]) for m in service.recorded] == [("", ["voice"])]


# ----------------------------------------------------------------------------- commands and admins


@pytest.mark.parametrize("name", sorted(ADMIN_ONLY - {"forget", "usage"}))
async def test_admin_commands_for_a_group_admin_and_refused_for_a_member(tg, alice, bob, group, name):
    service = RecordingService()
    tg.set_role(group, alice, "administrator")
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(group, alice, f"/{name}@memo_test_bot auto")
        [ok] = await tg.wait_for_message(group["id"])
        tg.send(group, bob, f"/{name}")
        refused = (await tg.wait_for_message(group["id"], count=2))[1]
    assert ok["text"] == f"{name} for telegram:-100500 (auto)"
    assert refused["text"] == f"Sorry, /{name} is only for admins of this chat."
    assert [c[1] for c in service.commands] == [name]  # the member's command never reached the pipeline
    assert {c.params["user_id"] for c in tg.calls_to("getChatMember")} == {111, 222}


async def test_admin_status_comes_from_owner_private_chat_or_admin_list(tg, alice, bob, group):
    service = RecordingService()
    carol = tg.user(999, "Carol")
    tg.set_role(group, bob, "creator")
    settings = telegram_settings_for(tg, admin_user_ids=frozenset({"999"}))
    async with running_bot(service, settings, tg):
        tg.send(group, bob, "/memory")
        tg.send(group, carol, "/memory")
        tg.send(tg.private_chat(alice), alice, "/memory")
        tg.send(group, alice, "/memory")
        await tg.wait_until(lambda: len(tg.calls_to("sendMessage")) == 4)
        tg.send(group, alice, "/summary")  # cached: no second getChatMember for Alice
        await tg.wait_until(lambda: len(tg.calls_to("sendMessage")) == 5)
    admins = {(m.author, m.chat_key) for m, name, _ in service.commands if name == "memory"}
    assert admins == {("Bob", "telegram:-100500"), ("Carol", "telegram:-100500"), ("Alice", "telegram:111")}
    assert [c.params["user_id"] for c in tg.calls_to("getChatMember")] == [222, 111]


async def test_usage_sends_the_chart_as_a_photo(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/usage")
        [photo] = await tg.wait_for_message(chat["id"])
    assert tg.photos == [PNG]
    assert photo["caption"] == "Usage:\ntier calls\nstandard 3" and photo["photo"][0]["file_size"] == len(PNG)
    assert tg.calls_to("sendPhoto")[0].params["caption"] == "Usage:\n<pre>tier calls\nstandard 3</pre>"


async def test_a_command_result_with_a_file_is_sent_as_a_document(tg, alice):
    service = RecordingService()
    export = File("export.json", b'{"messages": []}', "application/json")
    service.results["summary"] = CommandResult("Your data:", files=(export,))
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/summary")
        text, document = await tg.wait_for_message(chat["id"], count=2)
    assert text["text"] == "Your data:"
    assert document["document"]["file_name"] == "export.json"
    assert [(d.name, d.data) for d in tg.documents] == [("export.json", b'{"messages": []}')]


async def test_forget_asks_with_a_button_and_only_the_asker_can_confirm(tg, alice, bob, group):
    service = RecordingService()
    tg.set_role(group, alice, "administrator")
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(group, alice, "/forget")
        [question] = await tg.wait_for_message(group["id"])
        markup = question["reply_markup"]["inline_keyboard"][0]
        assert [b["text"] for b in markup] == ["Yes, forget", "Cancel"]
        assert "Press the button" in question["text"]
        tg.press(question, bob, markup[0]["callback_data"])  # not the asker
        await tg.wait_until(lambda: tg.calls_to("answerCallbackQuery"))
        assert tg.calls_to("answerCallbackQuery")[0].params["text"] == tgad.ONLY_ASKER
        tg.press(question, alice, markup[0]["callback_data"])
        await tg.wait_until(lambda: tg.calls_to("editMessageText"))
    assert [(c[1], c[2]) for c in service.commands] == [("forget", ""), ("forget", "yes")]
    [done] = tg.bot_messages(group["id"])
    assert done["text"] == "Done: this chat's memory is erased." and "reply_markup" not in done
    assert all(c.status == 200 for c in tg.calls_to("answerCallbackQuery"))


async def test_forget_cancel_button(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/forget")
        [question] = await tg.wait_for_message(chat["id"])
        tg.press(question, alice, question["reply_markup"]["inline_keyboard"][0][1]["callback_data"])
        await tg.wait_until(lambda: tg.calls_to("editMessageText"))
    assert [c[2] for c in service.commands] == [""]
    assert tg.bot_messages(chat["id"])[0]["text"].startswith("Cancelled")


async def test_start_greets_and_lists_commands(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/start")
        [hello] = await tg.wait_for_message(chat["id"])
    assert hello["text"].startswith("Hi!") and "/help" in hello["text"]


async def test_unknown_command_in_private_says_so(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/teleport now")
        [answer] = await tg.wait_for_message(chat["id"])
    assert answer["text"].startswith("Unknown command") and service.handled == []


# ----------------------------------------------------------------------------- ordering, webhook


async def test_messages_of_one_chat_are_handled_in_order_while_other_chats_proceed(tg, alice, bob):
    service = RecordingService()
    service.hold = asyncio.Event()
    a_chat, b_chat = tg.private_chat(alice), tg.private_chat(bob)
    async with running_bot(service, telegram_settings_for(tg), tg):
        for n in range(3):
            tg.send(a_chat, alice, f"a{n}")
        await tg.wait_until(lambda: len(service.handled) == 1)
        service.answer = lambda m: f"You said: {m.text}"
        # Alice's first message is held; Bob's chat is not blocked by it.
        b_service_hold, service.hold = service.hold, None
        tg.send(b_chat, bob, "b0")
        await tg.wait_for_message(b_chat["id"])
        assert [m.text for m in service.handled] == ["a0", "b0"]
        b_service_hold.set()
        msgs = await tg.wait_for_message(a_chat["id"], count=3)
    assert [m["text"] for m in msgs] == ["You said: a0", "You said: a1", "You said: a2"]


async def test_webhook_mode_receives_updates_checked_by_secret(tg, alice):
    service = RecordingService()
    gate = TcpGate()  # the public address: a port of its own, in front of the webhook server
    url = f"{gate.url}/telegram/hook"
    settings = telegram_settings_for(tg)
    settings = replace(settings, telegram=replace(settings.telegram, webhook_url=url))
    chat = tg.private_chat(alice)
    async with gate, running_bot(service, settings, tg, webhook_listen="127.0.0.1", webhook_port=0) as bot:
        # The server bound a free port and says which.
        await gate.open(await wait_until(lambda: bot.webhook_port, what="the webhook port"))
        assert tg.webhook_url == url and tg.webhook_secret == tgad.webhook_secret(tg.token)
        assert not tg.calls_to("getUpdates")
        tg.send(chat, alice, "via webhook")
        [answer] = await tg.wait_for_message(chat["id"])
        # A caller without the secret is refused.
        import aiohttp

        async with aiohttp.ClientSession() as session, session.post(url, json={"update_id": 1}) as resp:
            assert resp.status == 403
    assert answer["text"] == "You said: via webhook"


async def test_start_up_waits_out_an_unreachable_telegram(tg, alice, caplog):
    service = RecordingService()
    tg.fail_next("getMe", 502)
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "up at last?")
        [answer] = await tg.wait_for_message(chat["id"])
    assert [c.status for c in tg.calls_to("getMe")][:2] == [502, 200]
    assert answer["text"] == "You said: up at last?"
    assert "unreachable at start-up" in caplog.text


async def test_a_wrong_token_fails_at_once(tg):
    settings = telegram_settings_for(tg)
    settings = replace(settings, telegram=replace(settings.telegram, token="1:wrong"))
    with pytest.raises(InvalidToken):
        async with running_bot(RecordingService(), settings, tg):
            pass
    assert len(tg.calls) == 1


async def test_a_failing_command_menu_does_not_stop_the_bot(tg, alice):
    service = RecordingService()
    tg.fail_next("setMyCommands", 400, description="Bad Request: BOT_COMMAND_INVALID", times=3)
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "hello")
        [answer] = await tg.wait_for_message(chat["id"])
    assert answer["text"] == "You said: hello"


async def test_a_late_confirmation_asks_again_with_the_buttons(tg, alice):
    service = RecordingService()
    chat = tg.private_chat(alice)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "/forget")
        [question] = await tg.wait_for_message(chat["id"])
        service.forget_asked.clear()  # as if the pipeline's 5 minutes had passed
        tg.press(question, alice, question["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
        await tg.wait_until(lambda: tg.calls_to("editMessageText"))
        tg.send(chat, alice, "ping")  # handled after the press (one chat, in order)
        again, pong = await tg.wait_for_message(chat["id"], count=2)
    # The same question stands, buttons included; "not modified" is no error for the user.
    assert pong["text"] == "You said: ping"
    assert (
        "Press the button" in again["text"]
        and again["reply_markup"]["inline_keyboard"][0][0]["text"] == "Yes, forget"
    )
    assert [c[2] for c in service.commands] == ["", "yes"]


async def test_tier_is_a_command_for_everyone(tg, alice, bob, group):
    service = RecordingService()
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(group, bob, "/tier")
        [answer] = await tg.wait_for_message(group["id"])
        scopes = {
            c.params["scope"]["type"]: [x["command"] for x in c.params["commands"]]
            for c in tg.calls_to("setMyCommands")
        }
    assert answer["text"] == "tier for telegram:-100500 (no args)"
    assert "tier" in scopes["default"]


async def test_webhook_listen_address_and_port_are_settings(tg, alice):
    from bot.config import settings_from

    gate = TcpGate()
    url = f"{gate.url}/hook"
    settings = settings_from(
        {},
        {
            "TELEGRAM_BOT_TOKEN": tg.token,
            "TELEGRAM_API_BASE_URL": tg.base_url,
            "TELEGRAM_WEBHOOK_URL": url,
            "TELEGRAM_WEBHOOK_LISTEN": "127.0.0.1",
            "TELEGRAM_WEBHOOK_PORT": "0",  # any free port: the server says which
        },
    )
    assert (settings.telegram.webhook_listen, settings.telegram.webhook_port) == ("127.0.0.1", 0)
    chat = tg.private_chat(alice)
    # No listen/port given to serve(): the settings'.
    async with gate, running_bot(RecordingService(), settings, tg) as bot:
        await gate.open(await wait_until(lambda: bot.webhook_port, what="the webhook port"))
        tg.send(chat, alice, "via the configured port")
        [answer] = await tg.wait_for_message(chat["id"])
    assert answer["text"] == "You said: via the configured port" and tg.webhook_url == url
