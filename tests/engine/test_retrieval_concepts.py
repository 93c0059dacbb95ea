"""Retrieval's concept words: "what are Leo's hobbies" finds the pastimes a chat names, a cue word
counting less than the question's own word, and the knob that switches it off."""

from __future__ import annotations

import dataclasses

from memory_engine import ChatMemory
from memory_engine.index import gather, retrieval
from memory_engine.index.retrieval import SHIPPED
from memory_worker.local import SqliteStorage
from tests.support import FILLER, add, ids_of, memory

# Leo writes the filler too: his name alone matches every message of his.
LEO_FILLER = [("Leo" if author == "Zed" else author, text) for author, text in FILLER]
HOBBY_CHAT = [
    *LEO_FILLER,
    ("Leo", "signed up for spanish lessons on tuesday evenings"),
    ("Maya", "omg finally"),
    *LEO_FILLER,
    ("Leo", "climbing with tom at the gym, then pizza"),
    ("Maya", "my tea went cold again"),
    ("Leo", "we got 4th at the climbing club comp"),
    *LEO_FILLER,
]


def test_a_hobby_question_finds_the_pastimes_a_chat_names():
    m = memory()
    add(m, *HOBBY_CHAT)
    got = ids_of(m, "What are Leo's hobbies?", 2)
    assert set(got) == {"m5", "m13"}  # "lessons", "club": no word of the question's


def test_without_concepts_the_same_question_finds_neither():
    m = ChatMemory(SqliteStorage(":memory:"), retrieval=dataclasses.replace(SHIPPED, concepts=False))
    add(m, *HOBBY_CHAT)
    got = ids_of(m, "What are Leo's hobbies?", 2)
    assert set(got) != {"m5", "m13"}  # by "leo" alone: any message of his


def test_the_questions_own_word_ranks_above_a_cue():
    m = memory()
    # As rare as each other: the same filler around each.
    add(
        m,
        *FILLER * 3,
        ("Bob", "piano lessons again tonight"),
        *FILLER * 3,
        ("Ann", "my hobby is birdwatching"),
    )
    add(m, *FILLER * 3)
    own, cue = m.search("What hobbies do they have?", 2)["results"]
    assert (own["message_id"], cue["message_id"]) == ("m26", "m13")
    assert abs(cue["score"] - own["score"] * gather.CUE_WEIGHT) < 1e-5


def test_a_question_answered_in_the_next_message_ranks_that_answer():
    m = memory()
    add(m, *FILLER, ("Maya", "do you have any pets?"), ("Leo", "just a goldfish called biscuit"), *FILLER)
    assert "m6" in ids_of(m, "What pets does Leo have?", 2)


def test_a_singular_named_thing_is_not_expanded():
    # "city" is most often named in the question itself ("which city did she recommend").
    assert "city" not in gather.CONCEPTS
    assert gather.expand([("city",), ("recommend",)]) == ([("city",), ("recommend",)], frozenset())


def test_expansion_leaves_the_querys_own_words_out_of_the_cues():
    terms, cues = gather.expand([("hobbies",), ("class",)])
    assert terms[0][0] == "hobbies" and "class" in terms[1] and "class" not in cues
    assert "lessons" in cues and "hobbies" not in cues


def test_a_category_word_whose_cues_are_common_is_still_searched_by_itself():
    m = memory()
    # "work" (a cue of "job") in more rows than retrieval.COUNT_CAP: the expanded word is common.
    chatter = [("Bob" if n % 2 else "Cy", f"so much work today, day {n}") for n in range(retrieval.COUNT_CAP)]
    anns = [("Ann", f"lovely weather, day {n}") for n in range(30)]  # "ann": rarer than the job word
    add(m, *chatter, *anns, ("Ann", "my job is at the bakery now"), *anns)
    assert "m331" in ids_of(m, "What is Ann's job?", 3)
