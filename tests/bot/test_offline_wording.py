"""The offline model's wording, as a newcomer reads it in the console (issue 40, first hour 8):
articles, place names, plurals, greetings, a follow-up named by its plan."""

from __future__ import annotations

import re

import pytest

from bot.chat.models.offline_people import place_name, with_article
from tests.support import console_chat


def _answers(out: str) -> list[str]:
    """The answers of a piped console run, one per input line (the offline tag left out)."""
    blocks = [b.strip() for b in out.split("\n\n") if b.strip()]
    return [
        "\n".join(ln for ln in b.splitlines() if not ln.startswith(("I'm offline", "(offline")))
        for b in blocks
    ]


def test_jobs_get_an_article_and_places_a_capital(tmp_path):
    out = console_chat(
        tmp_path,
        ["I work as a nurse", "what is my job?", "I live in rio de janeiro", "where do I live?"],
    )
    answers = _answers(out)
    assert answers[1] == "You work as a nurse."
    assert answers[2] == "Noted, I'll remember that (location: Rio de Janeiro)."
    assert answers[3] == "You live in Rio de Janeiro."


@pytest.mark.parametrize(
    ("job", "said"),
    [
        ("nurse", "a nurse"),
        ("engineer", "an engineer"),
        ("hour-long tour guide", "an hour-long tour guide"),
        ("university lecturer", "a university lecturer"),
        ("a teacher", "a teacher"),
        ("the head chef", "the head chef"),
        ("Nurse", "a Nurse"),
        ("nurses", "nurses"),
        ("freelance", "freelance"),  # no noun to count: "as freelance" stays
        ("in marketing", "in marketing"),
    ],
)
def test_with_article(job, said):
    assert with_article(job) == said


@pytest.mark.parametrize(
    ("place", "said"),
    [
        ("lisbon", "Lisbon"),
        ("new york", "New York"),
        ("rio de janeiro", "Rio de Janeiro"),
        ("são paulo", "São Paulo"),
        ("the hague", "The Hague"),
        ("McAllen", "McAllen"),  # as written when it has capitals
        ("stratford-upon-avon", "Stratford-upon-Avon"),
    ],
)
def test_place_name(place, said):
    assert place_name(place) == said


def test_a_greeting_gets_a_greeting_and_plural_counts_read_right(tmp_path):
    lines = [
        "hello",
        "Good morning!",
        "hi there, I live in porto",
        *[f"message number {i}" for i in range(8)],
    ]
    out = console_chat(tmp_path, [*lines, "/compact", "/summary"])
    answers = _answers(out)
    assert answers[0].startswith("Hello") and "Noted" not in answers[0]
    assert answers[1].startswith("Good morning") and "Noted" not in answers[1]
    assert answers[2] == "Hello! Noted, I'll remember that (location: Porto)."
    assert "1 compaction so far" in out and "1 compactions" not in out
    assert "(1 compaction, updated" in out


def test_a_follow_up_is_confirmed_by_its_plan_not_by_a_setting(tmp_path):
    out = console_chat(
        tmp_path, ["/followups on", "My job interview is on Thursday", "I'm going to the dentist tomorrow"]
    )
    answers = _answers(out)
    assert "followups: on" not in out
    interview = answers[1]
    assert re.search(r"I'll ask you how your interview went on \w+day \d+ \w+", interview), interview
