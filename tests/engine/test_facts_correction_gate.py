"""The extractor asks for corrections inside a message ("I'm 34, sorry 35") only when its words
hold one of INSIDE_WORDS: no message that has one is ruled out (generated corrections of every
marker, with fillers, case and punctuation changed)."""

from __future__ import annotations

import random
import re

from memory_engine.facts.corrections import INSIDE_WORDS, corrections_within
from memory_engine.facts.extract import extract_facts

STATEMENTS = [
    "I'm 34",
    "I live in Lisbon",
    "my name is Ana",
    "I work at Acme",
    "I'm a nurse",
    "I have a dog named Rex",
]
MARKERS = [
    "sorry", "no wait", "wait no", "wait", "no", "nah", "nope", "i mean", "i meant", "oops", "whoops",
    "correction", "scratch that", "or rather", "make that", "nvm", "actually it's", "i mean it's",
]  # fmt: skip
VALUES = ["35", "Porto", "Anna", "Globex", "a doctor", "Max", "Osaka", "Berlin"]


def messages() -> list[str]:
    """Statements corrected inside the message by each marker, in several spellings."""
    rng = random.Random(38)
    out = []
    for _ in range(3000):
        marker = rng.choice(MARKERS)
        marker = marker.upper() if rng.random() < 0.2 else marker.title() if rng.random() < 0.2 else marker
        cut = rng.choice([", ", "... ", ". ", "; ", "! ", " - ", " "])
        tail = rng.choice(["", ",", ":", "!", " -"]) + " "
        out.append(rng.choice(STATEMENTS) + cut + marker + tail + rng.choice(VALUES))
    return out


def test_no_correction_inside_is_ruled_out_by_the_words() -> None:
    corrected = 0
    for text in messages():
        if corrections_within(text, extract_facts):
            corrected += 1
            words = re.findall(rb"[a-z0-9_]+", text.lower().encode())
            assert not INSIDE_WORDS.isdisjoint(words), text
    assert corrected > 1000  # the generator makes corrections the rules read
