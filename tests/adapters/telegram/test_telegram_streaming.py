"""Streamed answers on Telegram: shown after about a sentence, edited in place at a paced rate,
continued past 4096 characters, finally formatted, never losing the final text."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator

import pytest

from bot.adapters.streaming import worth_showing
from bot.adapters.telegram import adapter as tgad
from bot.chat.types import IncomingMessage
from tests.fakes.openai_server import Answer, StreamBreak
from tests.fakes.telegram_server import FakeTelegram, parse_html
from tests.support import (
    RecordingService,
    bot_on_pipeline,
    running_bot,
    telegram_e2e_settings,
    telegram_settings_for,
)

# PTB itself reads RetryAfter.retry_after (deprecated as an int in 22.2) when it retries a 429.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


class ScriptedStream(RecordingService):
    """A ChatService whose stream yields what the test puts in `chunks` (None ends it; an exception
    is raised)."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: asyncio.Queue = asyncio.Queue()

    async def stream(self, message: IncomingMessage) -> AsyncIterator[str]:
        self.handled.append(message)
        while (piece := await self.chunks.get()) is not None:
            if isinstance(piece, Exception):
                raise piece
            yield piece


def renders(tg: FakeTelegram, chat_id: int) -> list:
    """sendMessage and editMessageText calls to one chat, in order."""
    return [
        c
        for c in tg.calls
        if c.method in ("sendMessage", "editMessageText") and c.params.get("chat_id") == chat_id
    ]


@pytest.mark.parametrize(
    "text, shown",
    [
        ("Hello there. ", True),
        ("Hi! ", True),
        ('He said "no." ', True),
        ("Here is the list:\n", True),
        ("x" * 80, True),
        ("Well", False),
        ("echo: Al", False),
        ("Sure: h", False),
        ("pi is 3.14", False),
    ],
)
def test_the_first_message_waits_for_about_a_sentence(text, shown):
    """A sentence end, a line break or 80 characters; a colon or a decimal point is not enough."""
    assert worth_showing(text) is shown


async def test_first_text_after_a_sentence_then_edits_then_final_formatting(tg):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    service = ScriptedStream()
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "explain")
        await tg.wait_until(lambda: service.handled)
        service.chunks.put_nowait("The")
        service.chunks.put_nowait(" answer")
        await tg.wait_until(lambda: len(tg.calls_to("sendChatAction")) >= 1)
        assert not renders(tg, chat["id"]), "showed a few words before a sentence"
        service.chunks.put_nowait(" is **forty-two**. It")
        [first] = await tg.wait_for_message(chat["id"])
        assert first["text"].startswith("The answer is **forty-two**.")  # plain while it grows
        service.chunks.put_nowait(" comes from a book.")
        service.chunks.put_nowait(None)
        await tg.wait_until(
            lambda: tg.bot_messages(chat["id"])[0]["text"] == "The answer is forty-two. It comes from a book."
        )
    calls = renders(tg, chat["id"])
    assert calls[0].method == "sendMessage" and "parse_mode" not in calls[0].params
    assert calls[-1].method == "editMessageText" and calls[-1].params["parse_mode"] == "HTML"
    assert "<b>forty-two</b>" in calls[-1].params["text"]
    assert len(tg.bot_messages(chat["id"])) == 1  # grown in place, not resent


async def test_edits_are_paced_and_the_final_text_is_the_whole_answer(tg):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    service = ScriptedStream()
    words = [f"word{i} " for i in range(120)]
    async with running_bot(service, telegram_settings_for(tg), tg, edit_intervals=(0.2, 0.5)):
        tg.send(chat, alice, "talk")
        await tg.wait_until(lambda: service.handled)
        service.chunks.put_nowait("Here we go. ")
        for w in words:
            service.chunks.put_nowait(w)
            # Let the renderer see the stream grow (a poll step, not a wait for luck).
            await asyncio.sleep(0.01)
        service.chunks.put_nowait(None)
        full = ("Here we go. " + "".join(words)).strip()
        await tg.wait_until(lambda: tg.bot_messages(chat["id"])[0]["text"] == full)
    times = [c.at for c in renders(tg, chat["id"])]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) >= 3, "the answer was not shown while it grew"
    assert min(gaps) >= 0.19, gaps  # at most one render per interval


async def test_past_4096_characters_the_answer_continues_in_a_new_message(tg):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    service = ScriptedStream()
    paragraph = "Streaming keeps people engaged while the model writes. " * 12
    pieces = [paragraph.strip() + "\n\n" for _ in range(16)]  # about 10,700 characters
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "a lot please")
        await tg.wait_until(lambda: service.handled)
        for piece in pieces:
            service.chunks.put_nowait(piece)
            await asyncio.sleep(0.01)
        service.chunks.put_nowait(None)
        full = "".join(pieces).strip()
        await tg.wait_until(
            lambda: (
                "".join(m["text"] for m in tg.bot_messages(chat["id"])).replace("\n", "").replace(" ", "")
                == full.replace("\n", "").replace(" ", "")
            ),
            timeout=15,
        )
    messages = tg.bot_messages(chat["id"])
    assert len(messages) == 3 and all(len(m["text"]) <= 4096 for m in messages)
    assert [m["text"] for m in messages] == [
        parse_html(tgad.markdown_to_html(p)) for p in tgad.split_for_telegram(full)
    ]
    assert not tg.calls_to("sendMessage", ok=False) and not tg.calls_to("editMessageText", ok=False)


async def test_a_retry_after_during_streaming_delays_but_keeps_the_final_edit(tg):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    service = ScriptedStream()
    tg.fail_next("editMessageText", 429, retry_after=1)
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "go")
        await tg.wait_until(lambda: service.handled)
        service.chunks.put_nowait("First sentence here. ")
        await tg.wait_for_message(chat["id"])
        service.chunks.put_nowait("Second sentence. ")
        await tg.wait_until(lambda: tg.calls_to("editMessageText"))  # the one that gets 429
        service.chunks.put_nowait("The end.")
        service.chunks.put_nowait(None)
        await tg.wait_until(
            lambda: tg.bot_messages(chat["id"])[0]["text"] == "First sentence here. Second sentence. The end."
        )
    edits = tg.calls_to("editMessageText")
    assert edits[0].status == 429 and edits[-1].status == 200
    assert edits[1].at - edits[0].at >= 1.0  # waited as Telegram asked


async def test_a_stream_failing_midway_keeps_the_text_and_says_sorry(tg, caplog):
    alice = tg.user(1, "Alice")
    chat = tg.private_chat(alice)
    service = ScriptedStream()
    caplog.set_level(logging.ERROR, logger="bot.adapters.telegram.adapter")
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(chat, alice, "go")
        await tg.wait_until(lambda: service.handled)
        service.chunks.put_nowait("Half of an answer. ")
        service.chunks.put_nowait(RuntimeError("boom"))
        await tg.wait_until(
            lambda: (
                tgad.BROKEN in tg.bot_messages(chat["id"])[0]["text"]
                if tg.bot_messages(chat["id"])
                else False
            )
        )
    assert tg.bot_messages(chat["id"])[0]["text"] == "Half of an answer.\n\n" + tgad.BROKEN
    assert "error handling update" in caplog.text


async def test_groups_are_paced_slower_than_private_chats(tg):
    alice = tg.user(1, "Alice")
    group = tg.group(-5, "G")
    service = ScriptedStream()
    async with running_bot(service, telegram_settings_for(tg), tg, edit_intervals=(0.05, 0.3)):
        tg.send(group, alice, "@memo_test_bot go")
        await tg.wait_until(lambda: service.handled)
        for i in range(40):
            service.chunks.put_nowait(f"Sentence {i}. ")
            await asyncio.sleep(0.01)
        service.chunks.put_nowait(None)
        await tg.wait_until(
            lambda: (
                tg.bot_messages(group["id"])
                and tg.bot_messages(group["id"])[0]["text"].endswith("Sentence 39.")
            )
        )
    times = [c.at for c in renders(tg, group["id"])]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.29


# ----------------------------------------------------------------------------- end to end


async def test_e2e_streamed_answer_from_the_model_with_real_pacing(tg, openai, people, tmp_path):
    """The default pacing (1 s in private chats) over a model answer that streams for ~3 s."""
    text = " ".join(f"Fact number {i} about memory is worth knowing." for i in range(60))
    openai.script(Answer(text, chunk_size=40, delay=0.04))
    settings = telegram_e2e_settings(tg, openai)
    from bot.app import build_pipeline

    async with (
        build_pipeline(settings, tmp_path) as pipeline,
        running_bot(
            pipeline, settings, tg, edit_intervals=(tgad.EDIT_INTERVAL_PRIVATE_S, tgad.EDIT_INTERVAL_GROUP_S)
        ),
    ):
        tg.send(people.alice_dm, people.alice, "Tell me the facts.")
        await tg.wait_until(
            lambda: (
                (ms := tg.bot_messages(people.alice_dm["id"]))
                and ms[0]["text"] == text
                and tg.calls_to("editMessageText")
            ),
            timeout=20,
        )
    assert openai.requests[0].stream
    times = [c.at for c in renders(tg, people.alice_dm["id"])]
    assert len(times) >= 3, "the answer did not grow in place"
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.99  # about one edit a second at most


async def test_e2e_a_model_stream_that_breaks_keeps_the_text_and_says_it_was_cut(
    tg, openai, people, tmp_path
):
    openai.script(StreamBreak("The answer starts well and then", after_chunks=2, chunk_size=8))
    async with bot_on_pipeline(tg, openai, tmp_path):
        tg.send(people.alice_dm, people.alice, "Go on.")
        await tg.wait_until(
            lambda: tg.calls_to("editMessageText") or len(tg.calls_to("sendMessage")) > 0, timeout=20
        )
        await tg.wait_until(
            lambda: "cut" in tg.bot_messages(people.alice_dm["id"])[0]["text"].lower(), timeout=20
        )
    assert tg.bot_messages(people.alice_dm["id"])[0]["text"].startswith("The answer star")
