"""Facts said the way people say them in groups (issue 38): moves, introductions, jokes, answers, aliases."""

from __future__ import annotations

import pytest

from memory_engine import ChatMemory
from memory_engine.facts.answers import addressed, context_facts
from memory_engine.facts.extract import facts_and_past
from memory_worker.local import SqliteStorage


def _pairs(changes):
    return [(c.key, c.value) for c in changes if c.add]


@pytest.mark.parametrize(
    ("text", "past", "facts"),
    [
        ("I left Lyon for Montreal last year", [("location", "Lyon")], [("location", "Montreal")]),
        (
            "29, just moved to Oslo from Bergen",
            [("location", "Bergen")],
            [("location", "Oslo"), ("age", "29")],
        ),
        (
            "Ben here, software engineer at Acme, mostly backend",
            [],
            [("name", "Ben"), ("job", "software engineer"), ("employer", "Acme")],
        ),
        ("i'm a plumber not a magician lol", [], [("job", "plumber")]),
        ("became vegetarian last spring", [], [("diet", "vegetarian")]),
        ("I'm diabetic", [], [("health", "diabetic")]),
        ("haha i'm a nurse by day, dj by night", [], [("job", "nurse")]),
    ],
)
def test_group_talk_states_facts(text, past, facts):
    got_past, got = facts_and_past(text)
    assert _pairs(got_past) == past
    assert set(facts) <= set(_pairs(got))


@pytest.mark.parametrize(
    "text",
    [
        "if i left Lyon for Paris i'd be sad",
        "i don't think i'm diabetic",
        "is anyone diabetic?",
        "my brother left Rome for Milan",
        "my mum always says 'I'm a doctor, not a magician'",
        "not a baker myself haha",
        "lol here we go again",
    ],
)
def test_traps_state_nothing_of_these_kinds(text):
    past, got = facts_and_past(text)
    assert not past and not [c for c in got if c.key in ("location", "job", "health", "diet", "alias")]


def test_answers_and_allergens_need_the_message_before():
    assert _pairs(
        context_facts("two, Rex and Ash. both rescue greyhounds", "how many dogs do u have?", False)
    ) == [
        ("pets", "Rex (dog)"),
        ("pets", "Ash (dog)"),
    ]
    assert _pairs(context_facts("accountant 😴 dont ask", "what do u all do for work anyway", False)) == [
        ("job", "accountant")
    ]
    assert _pairs(context_facts("Sevilla! moved here for the job", "where are you from carmen?", False)) == [
        ("hometown", "Sevilla")
    ]
    assert _pairs(context_facts("noooo i'm allergic lol", "i'm baking cashew cookies 🍪", False)) == [
        ("allergies", "cashews")
    ]
    # Not an answer: a negative, one's own question, no question at all, an allergy with two candidates.
    assert context_facts("no pets, my landlord would kill me", "what are your pets called?", False) == []
    assert context_facts("accountant", "what do you do?", True) == []
    assert context_facts("accountant", "i love mondays", False) == []
    assert context_facts("i'm allergic", "peanuts or cashews in the cake?", False) == []


def test_a_greeting_names_the_previous_speaker_and_the_alias_is_a_removable_fact(tmp_path):
    assert addressed("welcome seun! 🙌", False) == "seun" and addressed("hi all!", False) is None
    assert addressed("welcome! shiv, i run this chaos", False) is None  # a greeting, then one's own name
    assert addressed("hi moose", True) is None  # one's own message before: no one greeted
    memory = ChatMemory(SqliteStorage(str(tmp_path / "m.sqlite")))
    memory.turn("moose reporting for duty 🫡", author="Marcus Bell", author_id="m")
    memory.turn("lol hi moose. marcus do you still have the dice bag?", author="Lan", author_id="l")
    memory.turn("hi Marcus!", author="Bo", author_id="b")  # his display name already: nothing new
    aliases = [f for f in memory.facts()["facts"] if f["key"] == "alias"]
    assert [(f["author_id"], f["value"]) for f in aliases] == [("m", "moose")]
    found = memory.search("what does moose do", k=1)["results"]
    assert found and found[0]["author_id"] == "m"  # retrieval's author boost knows the alias
