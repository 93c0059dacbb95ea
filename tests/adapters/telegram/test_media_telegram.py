"""Voice messages and photos over the fake Bot API: getFile + downloads, the fake OpenAI's
/audio/transcriptions and image parts, the real pipeline and the embedded memory host."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from bot.app import build_pipeline
from bot.chat.media import DESCRIBE
from bot.chat.pipeline import Pipeline
from tests.fakes.openai_server import Answer, FakeOpenAI, Hang, ServerError, Transcript
from tests.fakes.telegram_server import FakeTelegram
from tests.support import FAST, default_config_settings, image_bytes, running_bot

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

VOICE = b"OggS\x00\x02" + bytes(range(256)) * 8  # what the bot sends on is what it downloaded


def env_for(tg: FakeTelegram, openai: FakeOpenAI, key: bool = True) -> dict[str, str]:
    env = {
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_BASE_URL": tg.base_url,
        "OPENAI_BASE_URL": openai.url,
    }
    if key:
        env["OPENAI_API_KEY"] = "sk-test"
    return env


@contextlib.asynccontextmanager
async def bot(
    tg: FakeTelegram, openai: FakeOpenAI, data_dir, *, key: bool = True, streaming: bool = True, **tables
) -> AsyncIterator[Pipeline]:
    """The shipped config (vision tiers) on the fakes; the pipeline, for looking into memory."""
    tables.setdefault("telegram", {})["streaming"] = streaming
    settings = default_config_settings(env_for(tg, openai, key), **tables)
    async with (
        build_pipeline(settings, data_dir, options=FAST) as pipeline,
        running_bot(pipeline, settings, tg),
    ):
        yield pipeline


async def ask(tg: FakeTelegram, chat: dict, user: dict, text: str | None = None, **kw) -> dict:
    """Send a message and wait for the bot's next message in that chat (its final text)."""
    before = len(tg.bot_messages(chat["id"]))
    tg.send(chat, user, text, **kw)
    return (await tg.wait_for_message(chat["id"], count=before + 1, timeout=15))[before]


@pytest.fixture
def alice(tg):
    return tg.user(111, "Alice", "alice")


@pytest.fixture(params=[True, False], ids=["streaming", "whole"])
def streaming(request) -> bool:
    return request.param


async def test_a_voice_message_is_answered_from_its_transcript_and_found_later(
    tg, openai, alice, tmp_path, streaming
):
    dm = tg.private_chat(alice)
    openai.script_transcription(Transcript("My cat Biscuit loves sardines."))
    async with bot(tg, openai, tmp_path, streaming=streaming) as pipeline:
        answer = await ask(tg, dm, alice, media=tg.files.voice(VOICE, duration=4))
        found = await pipeline.memory.search(f"telegram:{dm['id']}", "what does Biscuit love?")
        await ask(tg, dm, alice, "what does my cat love to eat, Biscuit?")
        why = await ask(tg, dm, alice, "/why")
    heard = openai.transcriptions[0]
    assert heard.model == "gpt-4o-mini-transcribe" and heard.data == VOICE and heard.filename == "voice.ogg"
    assert tg.files.downloads == ["voice/file_1.oga"]  # fetched through getFile + /file/bot<token>/
    # Handled exactly like typed text: the model got the transcript, the user the answer to it.
    assert answer["text"] == "echo: Alice: [voice] My cat Biscuit loves sardines."
    assert [m["text"] for m in found if m["role"] == "user"] == ["[voice] My cat Biscuit loves sardines."]
    assert "[voice] My cat Biscuit loves sardines." in openai.requests[1].text()
    assert "[voice] My cat Biscuit loves sardines." in why["text"]


async def test_audio_files_and_video_notes_are_transcribed_too(tg, openai, alice, tmp_path):
    dm = tg.private_chat(alice)
    openai.script_transcription(Transcript("from a song"), Transcript("from a video note"))
    async with bot(tg, openai, tmp_path, streaming=False):
        song = await ask(tg, dm, alice, media=tg.files.audio(b"ID3" + VOICE, name="tune.mp3"))
        note = await ask(tg, dm, alice, media=tg.files.video_note(b"\x00\x00\x00\x18ftypmp42" + VOICE))
    assert song["text"] == "echo: Alice: [voice] from a song"
    assert note["text"] == "echo: Alice: [voice] from a video note"
    assert [t.filename for t in openai.transcriptions] == ["tune.mp3", "video_note.mp4"]


async def test_voice_over_the_caps_is_refused_plainly_without_a_download(tg, openai, alice, tmp_path):
    dm = tg.private_chat(alice)
    async with bot(tg, openai, tmp_path, transcription={"max_duration_s": 60, "max_bytes": 1000}):
        too_long = await ask(tg, dm, alice, media=tg.files.voice(VOICE[:500], duration=61))
        too_big = await ask(tg, dm, alice, media=tg.files.voice(VOICE, duration=5))
        still = await ask(tg, dm, alice, "are you still there?")
    assert (
        "too long" in too_long["text"] and "1 min 0 s" in too_long["text"] and "1 min 1 s" in too_long["text"]
    )
    assert "too large" in too_big["text"] and "1 kB" in too_big["text"]
    assert not openai.transcriptions and tg.files.downloads == []  # refused on what Telegram said
    assert still["text"] == "echo: Alice: are you still there?" and len(openai.requests) == 1


async def test_a_failing_or_hanging_transcription_endpoint_is_told_and_the_bot_keeps_working(
    tg, openai, alice, tmp_path
):
    dm = tg.private_chat(alice)
    openai.script_transcription(ServerError(500), Hang(), Transcript("third time lucky"))
    async with bot(tg, openai, tmp_path, transcription={"timeout_s": 0.5}) as pipeline:
        failed = await ask(tg, dm, alice, media=tg.files.voice(VOICE))
        timed_out = await ask(tg, dm, alice, media=tg.files.voice(VOICE))
        typed = await ask(tg, dm, alice, "typed instead")
        third = await ask(tg, dm, alice, media=tg.files.voice(VOICE))
        stats = await pipeline.memory.stats(f"telegram:{dm['id']}")
    assert "couldn't transcribe" in failed["text"] and "HTTP 500" in failed["text"]
    assert "couldn't transcribe" in timed_out["text"] and "in time" in timed_out["text"]
    assert typed["text"] == "echo: Alice: typed instead"
    assert third["text"] == "echo: Alice: [voice] third time lucky"
    assert stats["total_messages"] == 4  # the two unread voices left nothing behind; two turns + answers


async def test_offline_voice_says_it_needs_a_model(tg, openai, alice, tmp_path):
    dm = tg.private_chat(alice)
    async with bot(tg, openai, tmp_path, key=False):
        answer = await ask(tg, dm, alice, media=tg.files.voice(VOICE))
    assert "speech-to-text model" in answer["text"] and "OPENAI_API_KEY" in answer["text"]
    assert not openai.transcriptions and not openai.requests


def photo_sizes(tg: FakeTelegram) -> tuple[dict, bytes]:
    """Telegram's sizes of one photo; the 1280 px one is what a vision model should get."""
    best = image_bytes(1280, 960, "blue")
    media = tg.files.photo(
        (320, 240, image_bytes(320, 240, "blue")), (1280, 960, best), (2560, 1920, image_bytes(2560, 1920))
    )
    return media, best


async def test_a_photo_reaches_a_vision_tier_as_an_image_part_and_is_remembered(
    tg, openai, alice, tmp_path, streaming
):
    dm = tg.private_chat(alice)
    media, best = photo_sizes(tg)
    openai.script(
        Answer("Image: A blue square on a plain background.\nThat is a very blue picture!", chunk_size=5)
    )
    async with bot(tg, openai, tmp_path, streaming=streaming) as pipeline:
        tg.send(dm, alice, caption="look at my new painting", media=media)
        shown = await tg.wait_until(
            lambda: (
                (ms := tg.bot_messages(dm["id"])) and ms[-1]["text"] == "That is a very blue picture!" and ms
            )
        )
        later = await ask(tg, dm, alice, "what was in the photo I sent?")
        found = await pipeline.memory.search(f"telegram:{dm['id']}", "blue painting photo", k=5)
    sent = openai.requests[0]
    assert sent.images == [("image/png", best)]  # the largest size up to 1280 px, unchanged
    assert tg.files.downloads == ["photos/file_2.jpg"]
    assert sent.model in ("gpt-4.1-nano", "gpt-4.1-mini", "gpt-4.1")  # every shipped tier has vision = true
    assert DESCRIBE in sent.text() and "[photo] look at my new painting" in sent.text()
    assert not any("Image:" in m["text"] for m in shown)  # the description line is for memory only
    texts = [m["text"] for m in found]
    assert "[photo] look at my new painting" in texts
    assert any(t.startswith("[photo: A blue square on a plain background.]") for t in texts)
    # Asked later, the model reads the description from memory (no image sent again).
    assert "A blue square on a plain background." in openai.requests[1].text()
    assert not openai.requests[1].images and later["text"].startswith("echo:")


async def test_a_corrupt_image_is_told_and_its_caption_still_answered(tg, openai, alice, tmp_path):
    dm = tg.private_chat(alice)
    broken = image_bytes(200, 100)[:120]  # a PNG cut short: the header is fine, the pixels are not
    async with bot(tg, openai, tmp_path, streaming=False):
        with_caption = await ask(
            tg, dm, alice, caption="what do you think?", media=tg.files.photo((200, 100, broken))
        )
        bare = await ask(tg, dm, alice, media=tg.files.photo((200, 100, b"not an image at all")))
    assert "couldn't open that picture" in with_caption["text"]
    assert with_caption["text"].endswith("echo: Alice: [photo] what do you think?")
    assert "couldn't open that picture" in bare["text"]
    assert (
        len(openai.requests) == 1 and not openai.requests[0].images
    )  # no image sent, no call for the bare one


async def test_no_vision_tier_is_a_clear_answer_and_the_caption_is_handled_as_text(
    tg, openai, alice, tmp_path
):
    dm = tg.private_chat(alice)
    media, _ = photo_sizes(tg)
    tiers = {"plain": {"model": "text-only", "price_in_per_mtok": 1.0}}
    async with bot(tg, openai, tmp_path, streaming=False, tiers=tiers):
        answer = await ask(tg, dm, alice, caption="is this a cat?", media=media)
    assert "no configured model reads images" in answer["text"]
    assert answer["text"].endswith("echo: Alice: [photo] is this a cat?")
    assert openai.requests[0].model == "text-only" and not openai.requests[0].images
    assert tg.files.downloads == []  # nothing fetched that nobody could look at


async def test_a_group_photo_not_addressed_to_the_bot_is_recorded_without_a_model_call(
    tg, openai, alice, tmp_path
):
    group = tg.group(-100555, "Friends")
    bob = tg.user(222, "Bob", "bob")
    media, _ = photo_sizes(tg)
    async with bot(tg, openai, tmp_path) as pipeline:
        tg.send(group, bob, caption="our new office", media=media)
        answer = await ask(tg, group, alice, "@memo_test_bot what did Bob share?")
        found = await pipeline.memory.search(f"telegram:{group['id']}", "office", k=5)
    assert [m["text"] for m in found if "office" in m["text"]] == ["[photo] our new office"]
    assert len(openai.requests) == 1 and not openai.requests[0].images  # only Alice's question
    assert "[photo] our new office" in openai.requests[0].text()
    assert tg.files.downloads == [] and not tg.calls_to("getFile")
    assert answer["text"].startswith("echo:")
