"""Pipeline.stream against SSE from the fake server: pieces as they come, retries before the first token."""

from __future__ import annotations

from bot.chat.pipeline import APOLOGY, CUT_OFF
from tests.fakes.openai_server import Answer, FakeOpenAI, NoFirstToken, ServerError, StreamBreak
from tests.support import make_settings, msg, running_pipeline, tier_totals

LONG = "Streaming answers grow in place as the model writes them, piece by piece."


async def test_stream_yields_pieces_and_records_once_with_usage(tmp_path):
    async with (
        FakeOpenAI(default=Answer(LONG, chunk_size=5, prompt_tokens=40, completion_tokens=20)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        pieces = [p async for p in pipeline.stream(msg("tell me about streaming please, in short"))]
        assert len(pieces) > 5 and "".join(pieces) == LONG
        assert fake.requests[0].stream and fake.requests[0].body["stream_options"] == {"include_usage": True}
        usage = await pipeline.memory.usage("test:chat")
        row = usage["tiers"]["standard"]
        assert (row["calls"], row["errors"], row["prompt_tokens"], row["completion_tokens"]) == (
            1,
            0,
            40,
            20,
        )
        assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 2
        found = await pipeline.memory.search("test:chat", "piece by piece")
        assert [r["text"] for r in found if r["role"] == "assistant"] == [LONG]


async def test_no_first_token_falls_back_before_anything_is_shown(tmp_path):
    async with FakeOpenAI(default=Answer(LONG)) as fake:
        fake.script(NoFirstToken(), ServerError(500), model="m-standard")
        async with running_pipeline(make_settings(fake.url, request_timeout_s=1.0), tmp_path) as pipeline:
            pieces = [p async for p in pipeline.stream(msg("tell me about streaming please, in short"))]
            assert "".join(pieces) == LONG
            assert fake.models_called() == ["m-standard", "m-standard", "m-light"]
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {
                "light": (1, 0),
                "standard": (2, 2),
            }


async def test_break_mid_stream_keeps_text_says_cut_off_records_error(tmp_path):
    async with FakeOpenAI() as fake:
        fake.script(StreamBreak("The answer starts well and then", after_chunks=2, chunk_size=8))
        async with running_pipeline(make_settings(fake.url), tmp_path) as pipeline:
            pieces = [p async for p in pipeline.stream(msg("tell me about streaming please, in short"))]
            assert pieces[:2] == ["The answ", "er start"]
            assert pieces[-1] == CUT_OFF and "cut off" in pieces[-1]
            assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (1, 1)}
            assert len(fake.requests) == 1  # text was shown: no retry after the first token


async def test_stream_apology_when_all_fail(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(503)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        pieces = [p async for p in pipeline.stream(msg("tell me about streaming please, in short"))]
        assert pieces == [APOLOGY]
        assert sum(c for c, _ in tier_totals(await pipeline.memory.usage("test:chat")).values()) == 6


async def test_reader_leaving_early_is_recorded_as_an_error_once(tmp_path):
    async with (
        FakeOpenAI(default=Answer(LONG, chunk_size=4)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        stream = pipeline.stream(msg("tell me about streaming please, in short"))
        assert await stream.__anext__() == "Stre"
        await stream.aclose()
        assert tier_totals(await pipeline.memory.usage("test:chat")) == {"standard": (1, 1)}
        assert (await pipeline.memory.stats("test:chat"))["total_messages"] == 1
