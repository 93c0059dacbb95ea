"""Issue 40, probe item 7: a reminder time that cannot be is refused, saying why; one that
can is read right. "in -5 minutes" and "in 30 seconds" were set for 09:00 today, and
"tomorrow at 25:00" for tomorrow at the current clock time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.chat.proactive.when import ReminderParseError, parse_reminder
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import make_settings, msg, running_pipeline

NOW = datetime(2026, 12, 1, 12, 34, 56, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    "said,why",
    [
        ("in -5 minutes to stretch", "in the past"),
        ("in −5 minutes to stretch", "in the past"),  # a minus sign
        ("after -2 hours to call", "in the past"),
        ("in 0 minutes to stretch", "now"),
        ("tomorrow at 25:00 to call mum", "25:00 is not a time of day"),
        ("tomorrow at 12:75 to call mum", "12:75 is not a time of day"),
        ("on Friday at 24h30 to call mum", "24h30 is not a time of day"),
        ("tomorrow at 25 to call mum", "25 is not a time of day"),
        ("tomorrow at 13pm to call mum", "13pm is not a time of day"),
        ("in 99999999999 weeks to wait", "too far"),
    ],
)
def test_what_cannot_be_is_refused_with_the_reason(said, why):
    with pytest.raises(ReminderParseError) as err:
        parse_reminder(said, NOW, "UTC")
    assert why in str(err.value), str(err.value)


@pytest.mark.parametrize(
    "said,after",
    [
        ("in 30 seconds to check the oven", timedelta(seconds=30)),
        ("in 45 secs to check the oven", timedelta(seconds=45)),
        ("in 1 second to blink", timedelta(seconds=1)),
        ("in 5 minutes to stretch", timedelta(minutes=5)),
    ],
)
def test_seconds_and_minutes_count_from_now(said, after):
    parsed = parse_reminder(said, NOW, "UTC")
    assert parsed.due == NOW + after
    assert parsed.task.split()[-1] in said


def test_a_real_clock_time_still_reads():
    parsed = parse_reminder("tomorrow at 23:59 to call mum", NOW, "UTC")
    assert parsed.due == datetime(2026, 12, 2, 23, 59, tzinfo=UTC)
    assert parsed.task == "call mum"
    assert parse_reminder("on 25.12 to open presents", NOW, "UTC").due.day == 25  # a date, not 25:12


async def test_the_command_keeps_nothing_it_refuses(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake, running_pipeline(make_settings(fake.url), tmp_path) as p:
        for said in ("in -5 minutes to stretch", "tomorrow at 25:00 to call mum"):
            answer = (await p.command(msg("/remind " + said), "remind", said)).text
            assert not answer.startswith("OK"), answer
        listing = (await p.command(msg("/reminders"), "reminders", "")).text
    assert "No reminders pending" in listing
