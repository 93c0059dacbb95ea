"""Issue 40, probe item 6 (the bot's side): `/timezone` takes only a zone that exists, and
answers every other name with a clear line; a bad zone stored earlier does not break `/remind`.

"Europe" crashed the console (IsADirectoryError: a folder of the zone database), a
300-character name gave OSError, and Telegram got no reply at all.
"""

from __future__ import annotations

import pytest

from bot.chat.proactive.remind import TIMEZONE_FACT
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import make_settings, msg, running_pipeline
from tests.support.memory import InProcessMemory

BAD = ["Europe", "America", "A" * 300, "Mars/Olympus_Mons", "../../etc/passwd", "Europe/Lisbon/x", "Etc"]


@pytest.mark.parametrize("zone", BAD)
async def test_a_zone_that_does_not_exist_gets_a_clear_answer(tmp_path, zone):
    async with FakeOpenAI(default=Echo()) as fake, running_pipeline(make_settings(fake.url), tmp_path) as p:
        answer = (await p.command(msg("/timezone " + zone), "timezone", zone)).text
        facts = await p.memory.facts("test:chat", kind="fact")
    assert "I don't know the time zone" in answer and "Europe/Lisbon" in answer
    assert not [f for f in facts if f.get("key") == TIMEZONE_FACT]


async def test_a_real_zone_is_kept_as_the_database_spells_it(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake, running_pipeline(make_settings(fake.url), tmp_path) as p:
        answer = (await p.command(msg("/timezone europe/lisbon"), "timezone", "europe/lisbon")).text
        shown = (await p.command(msg("/timezone"), "timezone", "")).text
    assert answer.startswith("Your time zone is now Europe/Lisbon")
    assert shown.startswith("Time zone: Europe/Lisbon, yours")


async def test_a_bad_zone_stored_earlier_does_not_break_remind(tmp_path):
    engine = InProcessMemory()
    async with (
        FakeOpenAI(default=Echo()) as fake,
        running_pipeline(make_settings(fake.url), tmp_path, memory=engine) as p,
    ):
        # As an older API stored it: straight into memory, past today's check.
        engine.memory("test:chat").learn_fact("ada", "u1", TIMEZONE_FACT, "Europe", source=0)
        answer = (
            await p.command(msg("/remind in 20 minutes to stretch"), "remind", "in 20 minutes to stretch")
        ).text
    assert answer.startswith("OK, reminder #1"), answer
    assert "this bot's default" in answer and "/timezone" in answer  # the zone it used, and how to set one
