"""The offline plan detector: first-person dated plans are found, the traps are not."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bot.chat.proactive.followups import checkin_at
from bot.chat.proactive.plans import candidate, detect_plan
from bot.config import FollowupSettings

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("text", "event", "day"),
    [
        ("my interview is on Thursday at 10", "interview", date(2026, 12, 3)),
        ("flying to Oslo tomorrow", "flight", date(2026, 12, 2)),
        ("exam next monday", "exam", date(2026, 12, 7)),
        ("I have an exam next monday", "exam", date(2026, 12, 7)),
        ("I'm flying to Oslo tomorrow", "flight", date(2026, 12, 2)),
        ("I'm presenting on Friday", "presentation", date(2026, 12, 4)),
        ("my dentist appointment is on 12 December", "appointment", date(2026, 12, 12)),
        ("I have a job interview on 3 Dec", "interview", date(2026, 12, 3)),
        ("Big day: my wedding is on Saturday!", "wedding", date(2026, 12, 5)),
    ],
)
def test_a_dated_plan_of_ones_own_is_found(text, event, day):
    plan = detect_plan(text, NOW, "UTC")
    assert plan is not None and (plan.event, plan.day) == (event, day)


@pytest.mark.parametrize(
    "text",
    [
        "Is your interview on Thursday?",  # a question
        "when is my exam, tomorrow",  # a question without its mark
        "my interview is not on Thursday",  # negated
        "my exam was cancelled, it was tomorrow",
        "I don't have an exam tomorrow",
        "if I get it, my interview is on Thursday",  # hypothetical
        "my interview on Thursday might move",
        "maybe I'm flying to Oslo tomorrow",
        "my sister's interview is on Thursday",  # someone else's
        "your exam is tomorrow",
        "Tom is flying to Oslo tomorrow",
        "she has an exam next monday",
        "what a nice day tomorrow",  # no event
        "my interview went well",  # no date
        "my exam was on 3 March 2020",  # in the past
        "I went to a castle during my trip to the UK last Friday",  # told in the past (LoCoMo)
        "I had a career-high in assists last Friday in our big game",
    ],
)
def test_traps_are_not_plans(text):
    assert detect_plan(text, NOW, "UTC") is None


def test_the_day_is_the_persons_own():
    late = datetime(2026, 12, 1, 23, 30, tzinfo=UTC)  # already Wednesday in Tokyo
    plan = detect_plan("my exam is tomorrow", late, "Asia/Tokyo")
    assert plan is not None and plan.day == date(2026, 12, 3)


def test_most_messages_are_dropped_before_any_date_is_parsed():
    assert candidate("hello there, how are you") is None
    assert candidate("x" * 500 + " my exam is tomorrow") is None  # too long to be a plan


def test_the_check_in_is_the_day_after_and_never_in_quiet_hours():
    settings = FollowupSettings(checkin_time="10:00", quiet_start="22:00", quiet_end="08:00")
    at = checkin_at(date(2026, 12, 3), "Europe/Lisbon", settings)
    assert at == datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    at = checkin_at(date(2026, 7, 3), "Europe/Lisbon", settings)  # summer: UTC+1
    assert at == datetime(2026, 7, 4, 9, 0, tzinfo=UTC)
    early = FollowupSettings(checkin_time="06:30", quiet_start="22:00", quiet_end="08:00")
    assert checkin_at(date(2026, 12, 3), "UTC", early) == datetime(2026, 12, 4, 8, 0, tzinfo=UTC)
