"""The fake Bot API server behaves like the real one where the adapter depends on it,
and the adapter's Markdown -> Telegram HTML conversion produces what the server accepts.

Driven with a plain PTB `Bot` (no Application, no rate limiter) over real HTTP.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeAllChatAdministrators,
    ChatMemberAdministrator,
    ChatMemberOwner,
)
from telegram.constants import ParseMode
from telegram.error import BadRequest, Conflict, InvalidToken, RetryAfter

from bot.adapters.telegram.html import markdown_to_html, split_for_telegram
from tests.fakes.telegram_server import parse_html, parse_markdown, parse_markdown_v2

# PTB itself reads RetryAfter.retry_after (deprecated as an int in 22.2) when it retries a 429.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def bot(tg):
    async with Bot(tg.token, base_url=tg.base_url) as b:
        yield b


@pytest.fixture
def chat(tg):
    return tg.private_chat(tg.user(5, "Eve"))


async def test_get_me_and_wrong_token(tg, bot):
    assert bot.username == "memo_test_bot" and tg.calls[0].method == "getMe"
    with pytest.raises(InvalidToken):
        async with Bot("1:wrong", base_url=tg.base_url):
            pass


async def test_text_limit_is_checked_after_entity_parsing(tg, bot, chat):
    await bot.send_message(chat["id"], "x" * 4096)
    # 4096 characters of text inside tags: more than 4096 raw characters, accepted.
    await bot.send_message(chat["id"], "<b>" + "y" * 4096 + "</b>", parse_mode=ParseMode.HTML)
    with pytest.raises(BadRequest, match="Message is too long"):
        await bot.send_message(chat["id"], "z" * 4097)
    assert [len(m["text"]) for m in tg.bot_messages(chat["id"])] == [4096, 4096]


@pytest.mark.parametrize(
    "text, mode",
    [
        ("<b>open", ParseMode.HTML),
        ("<b>x</i>", ParseMode.HTML),
        ("<blink>x</blink>", ParseMode.HTML),
        ("a < b", ParseMode.HTML),
        ("*never closed", ParseMode.MARKDOWN),
        ("[link](", ParseMode.MARKDOWN),
        ("End.", ParseMode.MARKDOWN_V2),
        ("*bold", ParseMode.MARKDOWN_V2),
    ],
)
async def test_bad_entities_are_refused(bot, chat, text, mode):
    with pytest.raises(BadRequest, match="Can't parse entities"):
        await bot.send_message(chat["id"], text, parse_mode=mode)


def test_good_entities_are_parsed_to_plain_text():
    assert (
        parse_html(
            '<b>bold</b> <a href="https://x.y">link</a> &lt;3 &amp; '
            '<pre><code class="language-py">x</code></pre>'
        )
        == "bold link <3 & x"
    )
    assert parse_markdown("*b* _i_ `c` [t](https://u) ```py\ncode```") == "b i c t code"
    assert parse_markdown_v2(r"*bold* \. _it_ ||sp|| [t](https://u\)x)") == "bold . it sp t"


async def test_unknown_chat_and_empty_text(bot):
    with pytest.raises(BadRequest, match="Chat not found"):
        await bot.send_message(12345, "hi")


async def test_long_poll_wakes_at_once_for_a_new_update_and_keeps_it_until_confirmed(tg, bot, chat):
    started = time.monotonic()
    poll = asyncio.create_task(bot.get_updates(timeout=20))
    await tg.wait_until(lambda: tg.calls_to("getUpdates"))
    tg.send(chat, tg.user(5, "Eve"), "wake up")
    [update] = await poll
    assert time.monotonic() - started < 5 and update.message.text == "wake up"
    assert (
        isinstance(update.message.date.timestamp(), float)
        and abs(update.message.date.timestamp() - time.time()) < 5
    )
    # Not confirmed yet: delivered again; confirmed by offset: gone.
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [update.update_id]
    assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()
    assert tg.pending_updates() == 0


async def test_a_newer_poll_ends_the_older_one(tg, bot):
    older = asyncio.create_task(bot.get_updates(timeout=20))
    await tg.wait_until(lambda: tg.calls_to("getUpdates"))
    async with Bot(tg.token, base_url=tg.base_url) as second_instance:
        assert await second_instance.get_updates(timeout=0) == ()
    with pytest.raises(Conflict, match="terminated by other getUpdates"):
        await older


async def test_get_updates_is_refused_while_a_webhook_is_set(tg, bot):
    await bot.set_webhook("https://bot.example.com/hook", secret_token="s3cret")
    with pytest.raises(Conflict, match="webhook is active"):
        await bot.get_updates(timeout=0)
    await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()


async def test_commands_per_scope(tg, bot):
    admins = BotCommandScopeAllChatAdministrators()
    await bot.set_my_commands([BotCommand("help", "the commands")])
    await bot.set_my_commands([BotCommand("facts", "facts")], scope=admins)
    assert [c.command for c in await bot.get_my_commands(scope=admins)] == ["facts"]
    assert [c.command for c in await bot.get_my_commands()] == ["help"]
    await bot.delete_my_commands(scope=admins)
    assert await bot.get_my_commands(scope=admins) == ()
    with pytest.raises(BadRequest, match=r"(?i)BOT_COMMAND_INVALID"):
        await bot.set_my_commands([BotCommand("Bad-Name", "x")])


async def test_chat_member_roles(tg, bot):
    group = tg.group(-1001, "G")
    tg.set_role(group, 7, "administrator")
    tg.set_role(group, 8, "creator")
    assert isinstance(await bot.get_chat_member(-1001, 7), ChatMemberAdministrator)
    assert isinstance(await bot.get_chat_member(-1001, 8), ChatMemberOwner)
    assert (await bot.get_chat_member(-1001, 9)).status == "member"


async def test_429_carries_retry_after(tg, bot, chat):
    tg.fail_next("sendMessage", 429, retry_after=3)
    with pytest.raises(RetryAfter) as err:
        await bot.send_message(chat["id"], "hi")
    assert "Retry in 3 seconds" in str(err.value)
    await bot.send_message(chat["id"], "hi")  # only the next call failed
    assert [c.status for c in tg.calls_to("sendMessage")] == [429, 200]


async def test_edit_photo_and_callback_answers(tg, bot, chat):
    msg = await bot.send_message(chat["id"], "v1")
    await bot.edit_message_text("v2", chat["id"], msg.message_id)
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_text("v2", chat["id"], msg.message_id)
    png = b"\x89PNG\r\n\x1a\n" + b"1" * 10
    photo = await bot.send_photo(chat["id"], png, caption="chart")
    assert tg.photos == [png] and photo.caption == "chart"
    with pytest.raises(BadRequest, match=r"(?i)IMAGE_PROCESS_FAILED"):
        await bot.send_photo(chat["id"], b"not an image")
    with pytest.raises(BadRequest, match="query id is invalid"):
        await bot.answer_callback_query("nope")
    assert tg.bot_messages(chat["id"])[0]["text"] == "v2"


# ----------------------------------------------------------------------------- Markdown -> HTML


@pytest.mark.parametrize(
    "markdown, plain",
    [
        ("**Bold** and *italic* and __strong__", "Bold and italic and strong"),
        ("a < b && c > d", "a < b && c > d"),
        ("use `x<y>` here", "use x<y> here"),
        ("snake_case_name and 2*3*4 stay", "snake_case_name and 2*3*4 stay"),
        ("# Title\n\ntext", "Title\n\ntext"),
        ("see [docs](https://example.com/a_b)", "see docs"),
        ("```python\nif a < b and **c**:\n    pass\n```", "if a < b and **c**:\n    pass"),
        ("~~gone~~ kept", "gone kept"),
        ("```\nplain code\n```\nafter", "plain code\nafter"),
    ],
)
def test_markdown_to_html_is_accepted_by_telegram(markdown, plain):
    html = markdown_to_html(markdown)
    assert parse_html(html) == plain


def test_badly_nested_emphasis_stays_literal_and_valid():
    assert parse_html(markdown_to_html("**a *b** c* d")) == "**a *b** c* d"


def test_link_urls_are_not_touched_by_emphasis():
    html = markdown_to_html('see [**docs** `x`](https://e.com/*a*_b_?q="1")')
    assert html == 'see <a href="https://e.com/*a*_b_?q=&quot;1&quot;"><b>docs</b> <code>x</code></a>'
    assert parse_html(html) == "see docs x"


markdownish = st.lists(
    st.sampled_from([*list("ab *_~`#[]()<>&\n"), "**", "__", "~~", "```", "](https://x.y/", "```py\n"]),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(markdownish, max_size=6).map("".join))
def test_property_markdown_to_html_always_parses(text):
    parse_html(markdown_to_html(text))  # raises like the server when it would be refused


def test_code_block_keeps_its_language():
    assert (
        markdown_to_html("```js\nlet a = 1;\n```") == '<pre><code class="language-js">let a = 1;</code></pre>'
    )


def test_split_parts_with_reopened_code_fences_stay_valid_html():
    code = "```python\n" + "\n".join(f"print('line {i} < {i + 1}')" for i in range(400)) + "\n```"
    parts = split_for_telegram("Here you go:\n\n" + code)
    assert len(parts) > 1
    for part in parts:
        assert len(parse_html(markdown_to_html(part))) <= 4096
        assert markdown_to_html(part).count("<pre>") == 1
