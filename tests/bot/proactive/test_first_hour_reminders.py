"""A newcomer's first hour, round two (issue 40): quoted reminders, follow-ups in /reminders."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.chat.proactive.remind import reminder_line
from bot.chat.proactive.when import parse_reminder

NOW = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        '"in 3 minutes to call mum"',
        "“in 3 minutes to call mum”",
        "'in 3 minutes to call mum'",
        'in 3 minutes "to call mum"',
        'in 3 minutes to "call mum"',
        '"in 3 minutes to call mum',
        "in 3 minutes to call mum”",
        'remind me "in 3 minutes to call mum"',
    ],
)
def test_quotes_around_the_request_or_the_task_are_not_kept(text):
    r = parse_reminder(text, NOW, "UTC")
    assert r.task == "call mum"
    assert (r.due - NOW).total_seconds() == 180


def test_quotes_inside_the_task_are_kept():
    r = parse_reminder('in 3 minutes to watch "Dune" with Ana', NOW, "UTC")
    assert r.task == 'watch "Dune" with Ana'
    dated = parse_reminder('tomorrow at 9 to buy "the good bread"', NOW, "UTC")
    assert dated.task == "buy the good bread" or dated.task == 'buy "the good bread"'


def test_a_follow_up_says_follow_up_once_in_reminders():
    line = reminder_line(
        {
            "id": 1,
            "due_at": int(datetime(2026, 12, 8, 10, 0, tzinfo=UTC).timestamp() * 1000),
            "tz": "UTC",
            "text": "follow-up: your interview on 2026-12-07",
            "author": "grace",
            "every": {"followup": "interview"},
        }  # type: ignore[typeddict-item]
    )
    assert line.lower().count("follow-up") == 1, line
    assert "interview" in line and "Tuesday 8 December 2026 at 10:00 (UTC)" in line
