"""The bot's instructions: `system_prompt` in bot.toml, and a chat's persona (/persona) kept by the
memory worker."""

from __future__ import annotations

from dataclasses import replace

from bot.chat.commands.registry import refused
from bot.chat.prompt import MEMORY_RULE, PERSONA_HEAD, SYSTEM_INSTRUCTION
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import make_settings, msg, running_pipeline

PIRATE = "You are Captain Hook. Talk like a pirate and call everyone 'matey'."


def system_of(request) -> str:
    return str(request.messages[0]["content"])


async def test_a_persona_reaches_the_model_shows_in_why_and_survives_a_restart(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake:
        settings = make_settings(fake.url)
        # The real host: what survives the restart is what its files kept.
        async with running_pipeline(settings, tmp_path, host=True) as pipeline:
            before = await pipeline.handle(msg("hello there"))
            set_it = await pipeline.command(msg("/persona"), "persona", PIRATE)
            await pipeline.handle(msg("who are you?"))
            why = await pipeline.command(msg("/why"), "why", "")
        assert before.ok and PIRATE not in system_of(fake.requests[0])
        assert system_of(fake.requests[0]) == SYSTEM_INSTRUCTION  # the default: no persona
        assert PIRATE in set_it.text
        sent = system_of(fake.requests[1])
        assert f"{PERSONA_HEAD}\n{PIRATE}" in sent
        assert sent.endswith(MEMORY_RULE)  # the rule about quoted memory comes last, unchanged
        assert f"Persona: {PIRATE}" in why.text

        # A new process on the same data: the worker kept the persona.
        async with running_pipeline(settings, tmp_path, host=True) as pipeline:
            why_after_restart = await pipeline.command(msg("/why"), "why", "")
            shown = await pipeline.command(msg("/persona"), "persona", "")
            await pipeline.handle(msg("still a pirate?"))
            reset = await pipeline.command(msg("/persona"), "persona", "reset")
            await pipeline.handle(msg("and now?"))
        assert f"Persona: {PIRATE}" in why_after_restart.text
        assert PIRATE in shown.text
        assert PIRATE in system_of(fake.requests[2])
        assert "default" in reset.text
        assert PIRATE not in system_of(fake.requests[3])
        assert system_of(fake.requests[3]) == SYSTEM_INSTRUCTION


async def test_persona_is_for_admins_and_bounded(tmp_path):
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        member = await pipeline.command(msg("/persona", admin=False, author_id="u2"), "persona", "Be rude.")
        too_long = await pipeline.command(msg("/persona"), "persona", "x" * 2001)
        none_yet = await pipeline.command(msg("/persona"), "persona", "")
        await pipeline.handle(msg("hi"))
    assert member.text == refused("persona")
    assert "2001" in too_long.text and "2000" in too_long.text
    assert "No persona" in none_yet.text
    assert "rude" not in system_of(fake.requests[0]).lower()


async def test_system_prompt_comes_from_the_config_and_one_chat_persona_stays_in_its_chat(tmp_path):
    own = "You are Memo, the family's assistant. Keep answers under three sentences."
    async with FakeOpenAI(default=Echo()) as fake:
        settings = replace(make_settings(fake.url), system_prompt=own)
        async with running_pipeline(settings, tmp_path) as pipeline:
            await pipeline.command(msg("/persona", chat="test:a"), "persona", PIRATE)
            await pipeline.handle(msg("hello from a", chat="test:a"))
            await pipeline.handle(msg("hello from b", chat="test:b"))
    a, b = (system_of(r) for r in fake.requests)
    assert a.startswith(own) and b.startswith(own)
    assert PIRATE in a and PIRATE not in b
    assert MEMORY_RULE in a and MEMORY_RULE in b


def test_the_default_system_prompt_asks_for_the_users_language():
    assert "language the user writes in" in SYSTEM_INSTRUCTION
