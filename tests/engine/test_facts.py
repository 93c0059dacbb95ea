"""Rule-based fact extraction: only what the speaker says about themselves, now.

Unit tests of `memory_engine.facts.extract` for every trap of issue 12 (and more of each kind), the
labelled set's precision floor, and one conversation through the local host over real HTTP
(corrections supersede, "anymore" removes, pets and family are lists).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_engine.facts.extract import FactChange, extract_facts, is_list_key, merge_list
from tests.support import start_backend

ROOT = Path(__file__).resolve().parents[2]


def facts(text: str) -> list[tuple[str, str]]:
    """The (key, value) pairs a message adds; a removal shows as ("-likes", value)."""
    return [(c.key, c.value) if c.add else ("-" + str(c.remove_from), c.value) for c in extract_facts(text)]


# -- the traps: nothing is stored ------------------------------------------------------------

QUESTIONS = [
    "Do I like broccoli?",
    "do i like broccoli",
    "Where do I live?",
    "What is my name?",
    "Am I 30?",
    "Is my name on the list?",
    "Have I ever lived in Asia?",
    "What's my favourite colour?",
    "Would I enjoy Paris?",
    "Do you like hiking?",
    "So, do I work at Google or not?",
    "I wonder, do I live in Paris?",
]
REQUESTS = [
    "Can you call me tomorrow?",
    "can you call me tomorrow",
    "Could you call me at noon?",
    "Call me when you get home.",
    "Please call me back later",
    "Call me if you need anything.",
    "You can call me anytime.",
    "Can you remind me to buy milk?",
    "Tell me a joke about cats.",
    "Let's meet in Berlin tomorrow.",
]
NEGATIONS = [
    "My name is not Alice.",
    "My name isn't Alice.",
    "I don't live in Paris.",
    "I do not live in Paris anymore.",
    "I never lived in Paris.",
    "I'm not a doctor.",
    "I'm not 40 yet!",
    "I don't hate jazz.",
    "I don't love crowds.",
    "It's not that I don't like opera.",
    "I like neither cats nor dogs.",
    "Nobody here likes me.",
    "I'm not from around here.",
    "I no longer live in Madrid.",
]
HYPOTHETICALS = [
    "If I lived in Rome, I would eat pasta every day.",
    "If I moved to Iceland I'd freeze.",
    "I'd love to visit Rome.",
    "I would love to try skydiving.",
    "I'd like a coffee, please.",
    "I want to move to Canada.",
    "I wish I lived in Hawaii.",
    "I'm planning to move to Tokyo.",
    "I'm thinking about moving to Berlin.",
    "Maybe I like jazz, I'm not sure.",
    "Someday I'll work at NASA.",
    "I might be moving to Quebec.",
    "If my name were Bob, I'd be famous.",
    "I'd call my son Felix if I had one.",
    "I'd love to have a dog.",
]
OTHER_PEOPLE = [
    "My sister lives in Rome.",
    "My brother moved to Chicago.",
    "My wife works at Microsoft.",
    "My dad hates cilantro.",
    "My son is 5.",
    "My son's favourite colour is red.",
    "Her favourite colour is purple.",
    "His name is Tom.",
    "My friends think I love karaoke.",
    "Everybody likes pizza.",
    "My neighbour's dog Rex barks all night.",
    "My friend Ana is visiting.",
    "They live in Munich.",
    "My mom's birthday is in May.",
]
FIGURES_OF_SPEECH = [
    "I live in fear of spiders.",
    "I live in constant fear of deadlines.",
    "I live in hope.",
    "I live in the moment.",
    "I live in denial about my bank balance.",
    "I'm dying to see the new Batman movie.",
    "I'm dying for a cup of tea.",
    "I could kill for a pizza right now.",
    "Call me crazy, but I think it will rain.",
    "I hate to say it, but you're right.",
    "I like to think I'm a good cook.",
    "I love you.",
    "I love it when a plan comes together.",
    "I'm from the future, haha.",
    "I work like a dog.",
    "I live for the weekends.",
    "I'm over the moon!",
]
PAST_STATES = [
    "I used to live in Berlin.",
    "I lived in London for ten years.",
    "Back in 2010 I lived in Seoul.",
    "I used to work as a chef.",
    "I worked at IBM for ten years.",
    "I'm a former teacher.",
    "I used to love video games.",
    "When I was 12 I broke my arm.",
    "My old dog Buster died last year.",
    "My late grandfather Joe was a sailor.",
    "I used to be based in Geneva.",
]


@pytest.mark.parametrize(
    "text",
    [
        *QUESTIONS,
        *REQUESTS,
        *NEGATIONS,
        *HYPOTHETICALS,
        *OTHER_PEOPLE,
        *FIGURES_OF_SPEECH,
        *PAST_STATES,
    ],
)
def test_no_fact_from_a_trap(text):
    assert facts(text) == []


# -- what is stored ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Alice.", [("name", "Alice")]),
        ("my name is ada", [("name", "Ada")]),
        ("Call me Ishmael.", [("name", "Ishmael")]),
        ("Hi, I'm Grace and I live in Tallinn.", [("name", "Grace"), ("location", "Tallinn")]),
        ("Hello! I'm José.", [("name", "José")]),
        ("My name's Zoë, nice to meet you.", [("name", "Zoë")]),
        ("My name is 김민준.", [("name", "김민준")]),
        ("My name is Siobhán O'Connor.", [("name", "Siobhán O'Connor")]),
        ("My name is Ludwig van Beethoven", [("name", "Ludwig van Beethoven")]),
        ("Name: Ingrid", [("name", "Ingrid")]),
        ("Hi, Ren here.", [("name", "Ren")]),
    ],
)
def test_names(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("I live in Berlin.", "Berlin"),
        ("i live in berlin", "berlin"),
        ("I'm based in São Paulo.", "São Paulo"),
        ("I live in New York City with my wife.", "New York City"),
        ("I've been living in Oslo for three years.", "Oslo"),
        ("I live in the Netherlands now.", "the Netherlands"),
        ("I moved from Madrid to Valencia.", "Valencia"),
        ("I live in Rio de Janeiro.", "Rio de Janeiro"),
        ("We just moved to Austin, Texas!", "Austin, Texas"),
        ("I live in Lisbon, near the river", "Lisbon"),
        ("remember that I live in Oslo", "Oslo"),
        ("I live in Zürich.", "Zürich"),
        ("I live in 東京.", "東京"),
        ("I live with my parents in Lagos.", "Lagos"),
        ("My sister and I live in Rome.", "Rome"),
    ],
)
def test_locations(text, place):
    assert facts(text) == [("location", place)]


def test_where_they_live_wins_over_where_they_come_from():
    assert facts("I'm from Poland originally but I live in Dublin now") == [("location", "Dublin")]
    assert facts("I'm from Brazil.") == [("location", "Brazil")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Actually, I moved to Porto last month.", [("location", "Porto")]),
        ("Correction: I live in Porto, not Lisbon.", [("location", "Porto")]),
        ("Sorry, my name is actually Jon.", [("name", "Jon")]),
        ("Oh and I live in Oslo now, by the way.", [("location", "Oslo")]),
        ("No wait, I'm 35.", [("age", "35")]),
        ("wait no, i'm 33 not 34", [("age", "33")]),
        ("Actually I work at Apple now.", [("employer", "Apple")]),
        ("Update: I'm working at Meta these days.", [("employer", "Meta")]),
        ("Honestly, I really love jazz these days.", [("likes", "jazz")]),
        ("I adore Italian food lately.", [("likes", "Italian food")]),
        ("honestly i love baking sourdough on sundays", [("likes", "baking sourdough")]),
        ("I said I live in Oslo, not Bergen.", [("location", "Oslo")]),
    ],
)
def test_corrections_and_fillers(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("I love hiking, black coffee and old jazz records.", ["hiking", "black coffee", "old jazz records"]),
        ("I like cats, dogs, and parrots.", ["cats", "dogs", "parrots"]),
        ("I enjoy reading and cooking.", ["reading", "cooking"]),
        ("I love Bach, Chopin and Debussy.", ["Bach", "Chopin", "Debussy"]),
        ("I like jazz as well as blues.", ["jazz", "blues"]),
        ("I like to swim and run.", ["swimming", "running"]),
        ("I love to dance.", ["dancing"]),
        ("I like rock and roll.", ["rock and roll"]),
        ("I love fish and chips and lemonade.", ["fish and chips", "lemonade"]),
        ("I like tea more than coffee.", ["tea"]),
        ("I prefer tea to coffee.", ["tea"]),
        ("I like apples, pears, etc.", ["apples", "pears"]),
        ("Things I love: books, tea, rain.", ["books", "tea", "rain"]),
        ("I like books that make me think.", ["books"]),
    ],
)
def test_lists_split_into_items(text, items):
    assert facts(text) == [("likes", i) for i in items]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I really dislike cilantro.", [("dislikes", "cilantro")]),
        ("I absolutely love board games.", [("likes", "board games")]),
        ("I totally love vintage cars.", [("likes", "vintage cars")]),
        ("I do love a good thriller.", [("likes", "a good thriller")]),
        ("I'm a huge fan of the Beatles.", [("likes", "the Beatles")]),
        ("I'm crazy about mangoes.", [("likes", "mangoes")]),
        ("I kinda like country music tbh", [("likes", "country music")]),
        ("I hate hate HATE mornings.", [("dislikes", "mornings")]),
        ("I can't stand loud music.", [("dislikes", "loud music")]),
        ("I'm not a fan of horror movies.", [("dislikes", "horror movies")]),
        ("I don't really like mushrooms.", [("dislikes", "mushrooms")]),
        ("I love tea but I hate coffee.", [("likes", "tea"), ("dislikes", "coffee")]),
    ],
)
def test_intensified_and_negated_preferences(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I don't like broccoli anymore.",
        "I no longer like broccoli.",
        "I don't enjoy broccoli any more.",
        "Actually, I don't love broccoli anymore.",
        "I'm no longer a fan of broccoli.",
    ],
)
def test_no_longer_liked_is_a_removal_only(text):
    assert extract_facts(text) == [FactChange("likes", "broccoli", remove_from="likes", add=False)]


def test_a_dislike_drops_the_like_and_a_like_drops_the_dislike():
    assert extract_facts("I hate olives.") == [FactChange("dislikes", "olives", remove_from="likes")]
    assert extract_facts("I love olives.") == [FactChange("likes", "olives", remove_from="dislikes")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My dog Biscuit loves the park.", [("pets", "Biscuit (dog)")]),
        ("Look at my cat Tom.", [("pets", "Tom (cat)")]),
        ("I have a dog named Rex.", [("pets", "Rex (dog)")]),
        ("My cat's name is Luna.", [("pets", "Luna (cat)")]),
        ("We have two cats, Salt and Pepper.", [("pets", "Salt (cat)"), ("pets", "Pepper (cat)")]),
        ("our golden retriever Sunny is the best boy", [("pets", "Sunny (golden retriever)")]),
        ("My sister Ana lives in Rome.", [("family", "Ana (sister)")]),
        ("My husband, Tom, is a chef.", [("family", "Tom (husband)")]),
        ("My wife's name is Sara.", [("family", "Sara (wife)")]),
        ("I have a brother named Luis.", [("family", "Luis (brother)")]),
        ("My son Leo is 5.", [("family", "Leo (son)")]),
        ("My kids, Mia and Noah, love pizza.", [("family", "Mia (kid)"), ("family", "Noah (kid)")]),
        ("I have three kids: Ava, Ben and Cora.", [("family", f"{n} (kid)") for n in ("Ava", "Ben", "Cora")]),
        ("My brother Tomás lives in Madrid.", [("family", "Tomás (brother)")]),
    ],
)
def test_pets_and_family(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "My dog is sick.",
        "My ex-husband Mark lives nearby.",
        "My colleague Ben is annoying.",
        "My friend's cat Salem is black.",
        "We lost our dog Bella last spring.",
        "Is my brother coming?",
        "my dog biscuit ate my homework",  # a lower-case word after "my dog" is not a name
    ],
)
def test_not_a_pet_or_a_relative_of_the_speaker(text):
    assert facts(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I work as a nurse.", [("job", "nurse")]),
        ("I'm a software engineer.", [("job", "software engineer")]),
        ("I work for Acme Corp as a data analyst.", [("employer", "Acme Corp"), ("job", "data analyst")]),
        (
            "I'm a senior product manager at Stripe.",
            [("job", "senior product manager"), ("employer", "Stripe")],
        ),
        ("I work for the BBC.", [("employer", "the BBC")]),
        ("I've been a plumber for 20 years", [("job", "plumber")]),
        ("I'm 34.", [("age", "34")]),
        ("I am 27 years old.", [("age", "27")]),
        ("im 22 and broke haha", [("age", "22")]),
        ("I turned thirty last Saturday 🎉", [("age", "30")]),
        ("My birthday is on March 3rd.", [("birthday", "March 3rd")]),
        ("I was born on January 15, 1988.", [("birthday", "January 15, 1988")]),
        ("My pronouns are she/her.", [("pronouns", "she/her")]),
        ("I go by they/them.", [("pronouns", "they/them")]),
        ("My favourite colour is teal.", [("favorite_color", "teal")]),
        ("I'm allergic to cats.", [("allergies", "cats")]),
        ("Blue is my favorite color.", [("favorite_color", "Blue")]),
        ("My favourite food is probably sushi.", [("favorite_food", "sushi")]),
        ("fav food: tacos", [("favorite_food", "tacos")]),
    ],
)
def test_other_keys(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I'm 30 minutes away.",
        "I'm 6 feet tall.",
        "I'll be 35 next month.",
        "My birthday is tomorrow!",
        "I'm a morning person.",
        "I'm a huge believer in hard work.",
        "I'm French, by the way.",
        "I'm tired.",
        "I'm a Leo.",
        "I work from home on Fridays.",
        "My favourite part was the ending.",
        "I'm allergic to Mondays.",
    ],
)
def test_not_a_fact_though_it_looks_like_one(text):
    assert facts(text) == []


def test_values_stay_short_and_bounded_on_a_huge_message():
    text = "I love " + ", ".join(f"thing{i}" for i in range(5000)) + ". My name is Ana."
    changes = extract_facts(text * 20)
    assert 0 < len(changes) <= 40
    assert all(0 < len(c.value) <= 80 for c in changes)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_well_formed_changes(text):
    for c in extract_facts(text):
        assert c.key and c.value.strip() == c.value and c.value
        assert "\n" not in c.value and len(c.value) <= 120
        assert c.add or c.remove_from


@pytest.mark.parametrize(
    ("text", "expected"),
    [("ım from Oslo", [("location", "Oslo")]), ("İm a nurse", [("job", "nurse")]), ("I doeſnt like it", [])],
)
def test_letters_that_fold_to_ascii_do_not_crash_the_chat_spellings(text, expected):
    assert facts(text) == expected  # "ım" matches the spelling "im" but lower() keeps it "ım"


# -- lists ---------------------------------------------------------------------------------


def test_list_keys_and_merge():
    assert all(is_list_key(k) for k in ("likes", "dislikes", "pets", "family"))
    assert not is_list_key("name") and not is_list_key("favorite_food")
    value = merge_list(None, add="Biscuit (dog)")
    value = merge_list(value, add="Tom (cat)")
    assert merge_list(value, remove="biscuit (DOG)") == "Tom (cat)"
    assert merge_list("a, b", add="A") == "b, A"  # a repeat moves to the end, once


# -- the labelled set ------------------------------------------------------------------------


def _benchmark():
    spec = importlib.util.spec_from_file_location("fact_accuracy", ROOT / "benchmarks" / "fact_accuracy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fact_accuracy", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("split", ["dev", "holdout", "blind", "blind2"])
def test_labelled_set_keeps_its_precision_floor(split):
    bench = _benchmark()
    rows = [r for r in bench.load() if r["split"] == split]
    assert len(rows) >= 80
    result = bench.score(lambda t: bench.pairs_of(extract_facts(t)), rows)
    # Measured 1.00 precision on every split and recall 0.90-0.99: the floors leave a little
    # room for a rule change that trades one edge case, none for a new class of wrong facts.
    assert result["all"]["p"] >= 0.97, result["errors"]
    assert result["all"]["r"] >= 0.85, result["errors"]
    assert result["alarms"] <= 1, [e for e in result["errors"] if not e["missed"]]


def test_labelled_set_is_big_enough_and_has_traps():
    rows = _benchmark().load()
    assert len(rows) >= 250
    traps = sum(1 for r in rows if not r["facts"])
    assert 0.3 <= traps / len(rows) <= 0.6
    unseen = sum(1 for r in rows if r["split"] in ("holdout", "blind2"))  # never tuned on
    assert unseen >= 0.3 * len(rows)


# -- through the memory API ------------------------------------------------------------------


async def test_a_conversation_keeps_true_facts_only(tmp_path):
    mem = await start_backend("local", tmp_path)
    try:
        said = [
            "Hi, I'm Marta and I live in Lisbon.",
            "I love hiking, black coffee and old jazz records.",
            "Do I like broccoli?",
            "Can you call me tomorrow?",
            "My sister Ana lives in Rome.",
            "My dog Biscuit is asleep.",
            "I used to live in Berlin.",
            "Actually, I moved to Porto last month.",
            "I don't like black coffee anymore.",
            "I really dislike cilantro.",
        ]
        for text in said:
            await mem.turn("c1", text, author="marta", author_id="m1")
        current = (await mem.ok("GET", "/v1/chats/c1/facts"))["facts"]
        assert {f["key"]: f["value"] for f in current} == {
            "name": "Marta",
            "location": "Porto",
            "likes": "hiking, old jazz records",
            "dislikes": "cilantro",
            "family": "Ana (sister)",
            "pets": "Biscuit (dog)",
        }
        history = (await mem.ok("GET", "/v1/chats/c1/facts?history=1"))["facts"]
        places = [f["value"] for f in history if f["key"] == "location"]
        assert places == ["Lisbon", "Porto"]  # the correction superseded; Berlin never counted
    finally:
        await mem.close()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("hi, im nico, 31, a nurse in Porto", {("name", "Nico"), ("age", "31")}),
        ("im mateo, 24, from São Paulo", {("name", "Mateo"), ("age", "24"), ("location", "São Paulo")}),
        ("im tired, 31 hours on this", set()),  # a lower-case word after "im" must be a name
        ("im back, 5 min", set()),
        ("nico, 31", set()),  # lower case without "I'm" is no introduction
    ],
)
def test_a_lower_case_introduction_with_an_age(text, want):
    assert {(c.key, c.value) for c in extract_facts(text)} == want
