"""A wrong key, an unknown model or an unreachable endpoint is named in the answer and the log."""

from __future__ import annotations

import logging

import pytest

from bot.chat.models.failures import CONFIG_TROUBLE
from bot.chat.pipeline import APOLOGY
from tests.fakes.openai_server import FakeOpenAI, ServerError
from tests.support import INSTANT, make_settings, msg, running_pipeline
from tests.support.net import TcpGate


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "refused the API key (HTTP 401); check OPENAI_API_KEY"),
        (403, "refused the API key (HTTP 403); check OPENAI_API_KEY"),
        (404, "model 'm-standard' was not found at"),
    ],
)
async def test_refusals_name_what_to_check(tmp_path, caplog, status, expected):
    async with (
        FakeOpenAI(default=ServerError(status=status, message="no")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path, options=INSTANT) as pipeline,
    ):
        with caplog.at_level(logging.WARNING, logger="bot.chat.models.failures"):
            reply = await pipeline.handle(msg("hello there, how are you doing today?"))
        assert not reply.ok
        assert reply.text.startswith(APOLOGY)
        assert expected in reply.text
        assert "standard" in reply.text and "light" in reply.text
        assert any(expected in r.getMessage() for r in caplog.records)


async def test_streamed_answer_names_the_problem_too(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(status=401, message="bad key")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path, options=INSTANT) as pipeline,
    ):
        text = "".join([piece async for piece in pipeline.stream(msg("hello there, what's new?"))])
        assert "check OPENAI_API_KEY" in text


async def test_unreachable_endpoint_names_the_base_url(tmp_path):
    async with TcpGate() as gate:  # shut: nothing listens on its port
        url = f"{gate.url}/v1"
        async with running_pipeline(make_settings(url, attempts=1), tmp_path, options=INSTANT) as pipeline:
            reply = await pipeline.handle(msg("hello there, how are you doing today?"))
    assert f"could not reach {url}" in reply.text
    assert "check base_url in the tier's [tiers] table or OPENAI_BASE_URL" in reply.text
    assert "tiers standard, light, heavy: could not reach" in reply.text  # one endpoint: one line


async def test_non_admins_are_told_only_that_the_log_says_why(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(status=401)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path, options=INSTANT) as pipeline,
    ):
        reply = await pipeline.handle(msg("hello there, how are you doing today?", admin=False))
    assert CONFIG_TROUBLE in reply.text
    assert "OPENAI_API_KEY" not in reply.text


async def test_transient_failures_get_the_plain_apology(tmp_path):
    async with (
        FakeOpenAI(default=ServerError(status=503)) as fake,
        running_pipeline(make_settings(fake.url), tmp_path, options=INSTANT) as pipeline,
    ):
        reply = await pipeline.handle(msg("hello there, how are you doing today?"))
    assert reply.text == APOLOGY
