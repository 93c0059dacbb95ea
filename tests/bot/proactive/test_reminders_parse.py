"""Reminders in plain words: what and exactly when, time zones and DST, refusals with an example."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.chat.proactive.when import (
    EXAMPLE,
    ReminderParseError,
    format_every,
    format_when,
    looks_like_request,
    next_occurrence,
    parse_reminder,
    zone,
)

NOW = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)  # a Tuesday
LANGS = ("en", "de", "fr", "es")


def read(text: str, tz: str = "Europe/Lisbon", now: datetime = NOW):
    r = parse_reminder(text, now, tz, LANGS)
    return r.task, format_when(r.due, r.tz), r.every


@pytest.mark.parametrize(
    ("text", "task", "when"),
    [
        ("remind me in 20 minutes to take the bread out", "take the bread out", "Tuesday 1 Dec at 21:20"),
        ("remind me tomorrow at 9 to call the bank", "call the bank", "Wednesday 2 Dec at 09:00"),
        ("remind me on Friday at 18:00 to book the table", "book the table", "Friday 4 Dec at 18:00"),
        ("remind me to call mum at 18:00", "call mum", "Wednesday 2 Dec at 18:00"),
        ("to water the plants on Friday", "water the plants", "Friday 4 Dec at 09:00"),
        ("remind me at 5pm to leave", "leave", "Wednesday 2 Dec at 17:00"),
        ("remind me in an hour about the oven", "the oven", "Tuesday 1 Dec at 22:00"),
        ("remind me morgen um 9 to call Ana", "call Ana", "Wednesday 2 Dec at 09:00"),
    ],
)
def test_plain_words_give_the_task_and_the_exact_local_time(text, task, when):
    got_task, got_when, every = read(text)
    full = when.replace(" Dec ", " December 2026 ") + " (Europe/Lisbon)"
    assert (got_task, got_when, every) == (task, full, None)


def test_the_same_words_mean_the_persons_own_zone():
    lisbon = parse_reminder("tomorrow at 9 to call", NOW, "Europe/Lisbon", LANGS).due
    tokyo = parse_reminder("tomorrow at 9 to call", NOW, "Asia/Tokyo", LANGS).due
    assert lisbon == datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    # 21:00 UTC is already 06:00 on Wednesday in Tokyo: "tomorrow" is Thursday there.
    assert tokyo == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)


def test_durations_count_real_time_across_a_dst_change():
    before = datetime(2027, 3, 28, 0, 30, tzinfo=UTC)  # Lisbon jumps 01:00 -> 02:00 at 01:00 UTC
    r = parse_reminder("in 2 hours to check", before, "Europe/Lisbon", LANGS)
    assert r.due == datetime(2027, 3, 28, 2, 30, tzinfo=UTC)
    assert format_when(r.due, r.tz) == "Sunday 28 March 2027 at 03:30 (Europe/Lisbon)"


def test_every_monday_at_8_is_recurring_and_keeps_the_wall_clock_through_dst():
    task, when, every = read("every Monday at 8 remind me to put the bins out")
    assert (task, when) == ("put the bins out", "Monday 7 December 2026 at 08:00 (Europe/Lisbon)")
    assert every == {"at": "08:00", "weekday": 0} and format_every(every) == "every Monday at 08:00"
    # Through the March change: 08:00 WET (08:00 UTC), then 08:00 WEST (07:00 UTC).
    first = next_occurrence(every, "Europe/Lisbon", datetime(2027, 3, 20, tzinfo=UTC))
    second = next_occurrence(every, "Europe/Lisbon", first)
    assert first == datetime(2027, 3, 22, 8, 0, tzinfo=UTC)
    assert second == datetime(2027, 3, 29, 7, 0, tzinfo=UTC)
    assert second.astimezone(zone("Europe/Lisbon")).hour == 8


def test_every_day_and_weekdays():
    _, when, every = read("remind me every day at 7:30 to take the pills")
    assert when == "Wednesday 2 December 2026 at 07:30 (Europe/Lisbon)" and every == {"at": "07:30"}
    friday_evening = datetime(2026, 12, 4, 20, 0, tzinfo=UTC)
    weekdays = {"at": "07:30", "weekdays": [0, 1, 2, 3, 4]}
    assert next_occurrence(weekdays, "UTC", friday_evening) == datetime(2026, 12, 7, 7, 30, tzinfo=UTC)


def test_a_time_skipped_by_dst_moves_past_the_gap():
    # 01:30 does not exist in Lisbon on 2027-03-28: the occurrence is the first real instant after.
    r = next_occurrence({"at": "01:30"}, "Europe/Lisbon", datetime(2027, 3, 27, 12, tzinfo=UTC))
    assert r == datetime(2027, 3, 28, 1, 30, tzinfo=UTC)
    assert format_when(r, "Europe/Lisbon") == "Sunday 28 March 2027 at 02:30 (Europe/Lisbon)"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("remind me to do the thing", "couldn't tell when"),
        ("remind me sometime", "couldn't tell when"),
        ("remind me on 1 January 2020 to pay", "has already passed"),
        ("remind me in 10 minutes", "What should I remind you of"),
    ],
)
def test_unreadable_or_past_is_refused_with_an_example_never_guessed(text, why):
    with pytest.raises(ReminderParseError) as err:
        parse_reminder(text, NOW, "UTC", LANGS)
    assert why in str(err.value) and EXAMPLE in str(err.value)


def test_unknown_zone_is_refused_plainly():
    with pytest.raises(ReminderParseError, match="don't know the time zone"):
        zone("Mars/Olympus")


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("remind me tomorrow at 9 to call the bank", True),
        ("Please remind me in 5 minutes to stretch", True),
        ("every Monday at 8 remind me to put the bins out", True),
        ("can you remind me what we said yesterday?", False),
        ("what is a reminder?", False),
        ("I always forget to remind my brother", False),
        ("remind me of the plan?", False),
        ("remind me to call mum", True),
    ],
)
def test_requests_in_words_are_recognised(text, asks):
    assert looks_like_request(text) is asks
