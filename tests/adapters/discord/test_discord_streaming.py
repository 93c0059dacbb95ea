"""Streaming answers on Discord: shown early, edited in place at a paced rate, split past 2,000."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from bot.adapters.discord import adapter
from bot.adapters.discord import send as discord_send
from tests.support import RecordingDiscordService, discord_settings_for, running_client

INTERVAL = 0.2  # a faster pace than production, so the tests stay short


@pytest.fixture(autouse=True)
def fast_pace(monkeypatch):
    """Edits at most every INTERVAL seconds."""
    monkeypatch.setattr(discord_send, "EDIT_INTERVAL_S", INTERVAL)


@pytest.fixture
def pipeline() -> RecordingDiscordService:
    """The in-test ChatService."""
    return RecordingDiscordService()


@pytest.fixture
async def bot(fake_discord, world, pipeline) -> AsyncIterator[adapter.DiscordBot]:
    """The client with streaming on."""
    async with running_client(pipeline, discord_settings_for(fake_discord, world, streaming=True)) as client:
        yield client


def edits_of(fake_discord, channel) -> dict[str, list]:
    """PATCH calls per message id in `channel`."""
    by_message: dict[str, list] = {}
    for call in fake_discord.calls_to("PATCH", rf"/channels/{channel['id']}/messages/\d+"):
        by_message.setdefault(call.path.rsplit("/", 1)[1], []).append(call)
    return by_message


async def test_first_sentence_is_shown_before_the_answer_is_finished(fake_discord, world, pipeline, bot):
    go_on = asyncio.Event()

    async def pieces(message):
        yield "Hello there. "
        await go_on.wait()  # the model is still thinking: only the first sentence exists
        yield "Here is the rest of the answer."

    pipeline.streamer = pieces
    await fake_discord.user_says(world.dm, world.member, "hi")
    await fake_discord.wait_for(lambda: fake_discord.shown(world.dm))
    assert fake_discord.shown(world.dm) == ["Hello there."]
    go_on.set()
    await fake_discord.wait_for(
        lambda: fake_discord.shown(world.dm) == ["Hello there. Here is the rest of the answer."]
    )
    assert len(fake_discord.sent_to(world.dm)) == 1  # grown in place, not a second message
    assert fake_discord.calls_to("POST", rf"/channels/{world.dm['id']}/typing")


async def test_a_few_words_wait_for_more_before_the_first_message(fake_discord, world, pipeline, bot):
    go_on = asyncio.Event()

    async def pieces(message):
        yield "Well"
        await go_on.wait()
        yield ", that depends."

    pipeline.streamer = pieces
    await fake_discord.user_says(world.dm, world.member, "hi")
    await pipeline.wait_for(lambda: pipeline.handled)
    assert fake_discord.shown(world.dm) == []  # "Well" alone would flicker; nothing is sent yet
    go_on.set()
    await fake_discord.wait_for(lambda: fake_discord.shown(world.dm) == ["Well, that depends."])
    assert len(fake_discord.sent_to(world.dm)) == 1 and not edits_of(fake_discord, world.dm)


async def test_a_long_stream_is_paced_split_and_loses_no_character(fake_discord, world, pipeline, bot):
    words = (f"word{i}" for i in itertools.count())
    sentences = [" ".join(next(words) for _ in range(12)) + "." for _ in range(100)]
    full = " ".join(sentences)
    assert len(full) > 6000

    async def pieces(message):
        for sentence in sentences:
            yield sentence + " "
            await asyncio.sleep(0.01)  # the model's own pace: about a second in all

    pipeline.streamer = pieces
    await fake_discord.user_says(
        world.general,
        world.member,
        f"{fake_discord.mention(fake_discord.bot)} go",
        mentions=[fake_discord.bot],
    )
    want = adapter.parts_of(full)
    await fake_discord.wait_for(lambda: fake_discord.shown(world.general) == want, timeout=15)
    assert len(want) >= 4 and all(len(p) <= 2000 for p in fake_discord.shown(world.general))
    # Within the limits: edits of one message are at least the interval apart.
    for calls in edits_of(fake_discord, world.general).values():
        gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
        assert all(gap >= INTERVAL * 0.9 for gap in gaps), gaps
    total_edits = sum(len(c) for c in edits_of(fake_discord, world.general).values())
    elapsed = fake_discord.calls[-1].at - fake_discord.sent_to(world.general)[0].at
    assert total_edits <= len(want) * (elapsed / INTERVAL + 2)
    first = fake_discord.sent_to(world.general)[0].json
    assert str(first["message_reference"]["message_id"])  # the first part replies to the question


async def test_a_429_on_an_edit_delays_but_does_not_lose_the_final_text(fake_discord, world, pipeline, bot):
    go_on = asyncio.Event()

    async def pieces(message):
        yield "The first sentence arrives quickly. "
        await go_on.wait()
        yield "And the last one arrives later."

    pipeline.streamer = pieces
    fake_discord.fail_next(lambda c: c.method == "PATCH", how="429")
    await fake_discord.user_says(world.dm, world.member, "hi")
    await fake_discord.wait_for(lambda: fake_discord.shown(world.dm))
    go_on.set()
    final = "The first sentence arrives quickly. And the last one arrives later."
    await fake_discord.wait_for(lambda: fake_discord.shown(world.dm) == [final])
    assert [
        c.status for c in fake_discord.calls_to("PATCH", rf"/channels/{world.dm['id']}/messages/\d+")
    ] == [429, 200]


async def test_a_stream_that_fails_keeps_the_text_and_apologises(fake_discord, world, pipeline, bot, caplog):
    async def pieces(message):
        yield "Part of an answer. "
        raise RuntimeError("the chat service broke")

    pipeline.streamer = pieces
    await fake_discord.user_says(world.dm, world.member, "hi")
    await fake_discord.wait_for(
        lambda: fake_discord.shown(world.dm) and "Sorry" in fake_discord.shown(world.dm)[-1]
    )
    assert fake_discord.shown(world.dm)[0].startswith("Part of an answer.")
    assert "chat service stream failed" in caplog.text


async def test_streaming_off_sends_whole_answers(fake_discord, world, pipeline):
    async with running_client(pipeline, discord_settings_for(fake_discord, world, streaming=False)):
        await fake_discord.user_says(world.dm, world.member, "hi")
        await fake_discord.wait_for(lambda: fake_discord.shown(world.dm))
    assert fake_discord.shown(world.dm) == ["echo: hi"] and not edits_of(fake_discord, world.dm)
