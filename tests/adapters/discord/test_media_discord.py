"""Voice and image attachments over the fake Discord (attachments served over HTTP), the fake
OpenAI's /audio/transcriptions and image parts, the real pipeline and the embedded memory host."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from bot.app import build_pipeline
from bot.chat.pipeline import Pipeline
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import Answer, FakeOpenAI, ServerError, Transcript
from tests.support import FAST, World, default_config_settings, discord_env, image_bytes, running_client

VOICE = b"OggS\x00\x02" + bytes(range(256)) * 4


@pytest.fixture
def world(fake_discord: FakeDiscord) -> World:
    return World(fake_discord)


@contextlib.asynccontextmanager
async def bot(fake_discord: FakeDiscord, openai: FakeOpenAI, data_dir, **tables) -> AsyncIterator[Pipeline]:
    """The shipped config (vision tiers) on the fakes; the pipeline, to look into memory."""
    tables.setdefault("discord", {"streaming": False})
    settings = default_config_settings(discord_env(fake_discord, openai), **tables)
    async with (
        build_pipeline(settings, data_dir, options=FAST) as pipeline,
        running_client(pipeline, settings),
    ):
        yield pipeline


async def answers(fake_discord: FakeDiscord, channel: dict, count: int) -> list[str]:
    """Wait for `count` bot messages in `channel`; their texts."""
    await fake_discord.wait_for(lambda: len(fake_discord.shown(channel)) >= count, timeout=15)
    return fake_discord.shown(channel)


async def test_a_voice_message_attachment_is_transcribed_answered_and_searchable(
    fake_discord, openai, world, tmp_path
):
    openai.script_transcription(Transcript("Remind me that the dentist is on Friday."))
    voice = fake_discord.files.attachment(
        world.dm, "voice-message.ogg", VOICE, "audio/ogg", duration_secs=4.2
    )
    async with bot(fake_discord, openai, tmp_path) as pipeline:
        await fake_discord.user_says(world.dm, world.member, "", attachments=[voice])
        [answer] = await answers(fake_discord, world.dm, 1)
        found = await pipeline.memory.search(f"discord:{world.dm['id']}", "when is the dentist?")
    heard = openai.transcriptions[0]
    assert (
        heard.data == VOICE
        and heard.filename == "voice-message.ogg"
        and heard.model == "gpt-4o-mini-transcribe"
    )
    assert fake_discord.files.downloads == [voice["url"].removeprefix(fake_discord.files.base_url)]
    assert answer.endswith("[voice] Remind me that the dentist is on Friday.")
    users = [m["text"] for m in found if m["role"] == "user"]
    assert users == ["[voice] Remind me that the dentist is on Friday."]


async def test_a_failing_transcription_is_told_and_the_next_message_answered(
    fake_discord, openai, world, tmp_path
):
    openai.script_transcription(ServerError(503))
    voice = fake_discord.files.attachment(world.dm, "voice-message.ogg", VOICE, "audio/ogg", duration_secs=2)
    async with bot(fake_discord, openai, tmp_path):
        await fake_discord.user_says(world.dm, world.member, "", attachments=[voice])
        await answers(fake_discord, world.dm, 1)
        await fake_discord.user_says(world.dm, world.member, "and now in writing")
        told, answered = await answers(fake_discord, world.dm, 2)
    assert "couldn't transcribe" in told and "503" in told
    assert answered.endswith("and now in writing")


async def test_an_image_attachment_reaches_a_vision_tier_and_is_remembered(
    fake_discord, openai, world, tmp_path
):
    big = image_bytes(2000, 1000, "green")  # Discord sends the original: scaled to 1280 px for the model
    photo = fake_discord.files.attachment(world.dm, "garden.png", big, "image/png", width=2000, height=1000)
    openai.script(Answer("Image: A plain green lawn.\nLovely lawn!"))
    async with bot(fake_discord, openai, tmp_path) as pipeline:
        await fake_discord.user_says(world.dm, world.member, "my garden this morning", attachments=[photo])
        [shown] = await answers(fake_discord, world.dm, 1)
        found = await pipeline.memory.search(f"discord:{world.dm['id']}", "garden lawn photo", k=5)
    [(mime, sent)] = openai.requests[0].images
    import io

    from PIL import Image

    assert mime == "image/jpeg" and Image.open(io.BytesIO(sent)).size == (1280, 640)
    assert shown == "Lovely lawn!"
    texts = [m["text"] for m in found]
    assert "[photo] my garden this morning" in texts and "[photo: A plain green lawn.]\nLovely lawn!" in texts


async def test_a_guild_image_not_addressed_to_the_bot_is_recorded_without_a_model_call(
    fake_discord, openai, world, tmp_path
):
    ch = world.general
    photo = fake_discord.files.attachment(ch, "cake.png", image_bytes(), "image/png", width=64, height=48)
    async with bot(fake_discord, openai, tmp_path) as pipeline:
        await fake_discord.user_says(ch, world.member, "birthday cake!", attachments=[photo])
        await fake_discord.user_says(
            ch,
            world.admin,
            f"{fake_discord.mention(fake_discord.bot)} what did bob post?",
            mentions=[fake_discord.bot],
        )
        await answers(fake_discord, ch, 1)
        found = await pipeline.memory.search(f"discord:{ch['id']}", "birthday cake", k=5)
    assert "[photo] birthday cake!" in [m["text"] for m in found]
    assert len(openai.requests) == 1 and not openai.requests[0].images
    assert fake_discord.files.downloads == []
