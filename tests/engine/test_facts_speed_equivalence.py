"""The fast fact extractor gives the same output as before, byte for byte.

The fixture tests/data/facts_outputs.json froze the extractor's output (commit 99c3e8c, before
the speed work) for every labelled sentence and for a few thousand seeded random strings built
here: first-person triggers, guards, names in many scripts, case-folding oddities (İ ı ſ K),
emoji, quotes, dashes and stray punctuation. LoCoMo is compared in benchmarks/fact_speed.py
(its text is not shipped). When the rules change on purpose, re-freeze:

    .venv/bin/python -m tests.engine.test_facts_speed_equivalence --write
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from memory_engine.facts.extract import extract_facts

ROOT = Path(__file__).resolve().parents[2]
LABELLED = ROOT / "tests" / "data" / "facts_labelled.jsonl"
FIXTURE = ROOT / "tests" / "data" / "facts_outputs.json"
RANDOM_STRINGS = 4000

# fmt: off
PHRASES = [
    "I live in", "i live in", "I'm living in", "we moved to", "I've lived in", "I moved here from",
    "I'm from", "I come from", "my name is", "My name's", "name:", "Name -", "call me", "I go by",
    "I'm", "im", "Im", "I am", "ive", "I've been", "I'm a", "I am an", "I work as", "I work at",
    "I'm working for", "I got hired at", "my job is", "I'm employed by", "I turned", "I'm 34",
    "years old", "my birthday is", "I was born on", "my pronouns are", "pronouns:", "I use",
    "I love", "I like", "i like to", "I really enjoy", "I adore", "I'm into", "I'm a big fan of",
    "I can't get enough of", "I prefer", "I hate", "I don't like", "dont", "I can't stand",
    "I'm not a fan of", "I no longer like", "I stopped loving", "anymore", "my favourite",
    "my fav food:", "is my favorite", "fave", "things I love:", "my dog", "my cat", "our kids",
    "my sister", "my twin brother", "I have a dog named", "we adopted two cats:", "my late",
    "passed away", "this is", "here", "hi,", "Hey!", "not", "never", "used to", "if", "would",
    "I said", "I told you", "I think", "maybe", "when", "and", "but", "because", "so", "or",
    "and also", "and live in", "and love", "as well", "these days", "last year", "in 2019",
    "since 2015", "for years", "rock and roll", "mac and cheese", "at", "for", "with", "the",
    "a", "an", "called", "named", "to", "over", "rather than", "lol", "btw", "now", "too",
]
TRIGGERS = PHRASES.index("passed away")  # the phrases before it open a fact
WORDS = [
    "Ana", "José", "Zoë", "Ingrid", "van", "der", "Berg", "김민준", "Владимир", "İstanbul",
    "ıvan", "ſam", "KELVIN", "Kyiv", "Rio", "de", "Janeiro", "Austin,", "Texas", "the",
    "Netherlands", "Acme", "Corp", "Stripe", "BBC", "nurse", "teacher", "software", "engineer",
    "plumber", "hiking", "coffee", "jazz", "tea", "books", "sushi", "broccoli", "dogs", "Rex",
    "Milo", "Luna", "thirty", "twenty-five", "42", "7", "March", "3rd", "12/05", "1990-04-01",
    "she/her", "they/them", "swim", "cook", "dance", "travel", "music", "painting", "pottery",
    "Paris", "Oslo", "home", "myself", "it", "them", "everything", "people", "stuff", "x",
    "Mr.", "Dr.", "St.", "e.g.", "etc.", "😀", "🎉", "❤️", "➀", "\u200d", "—", "’", "“", "”",
]
SEPARATORS = [
    " ", " ", " ", " ", "  ", ", ", ". ", "! ", "? ", "; ", ": ", " - ", "\n", "\t", "...", " (", ") ",
]
# fmt: on
ALPHABET = "aeiouAEIOU imnstlrdkK'’\".,;:!?-—()[]*_=/&0123456789 İıſKéßçøåñü漢字한글😀🎉\u200d\ufe0f\n"


def random_strings(n: int = RANDOM_STRINGS, seed: int = 12) -> list[str]:
    """Seeded messages: phrases, words and separators in random order and case, and plain noise."""
    rnd = random.Random(seed)
    out: list[str] = []
    for i in range(n):
        if i % 5 == 4:
            out.append("".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 60))))
            continue
        if i % 5 == 3:  # one trigger and its value, the shape that fires rules
            words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 4)))
            tail = rnd.choice(["", " " + rnd.choice(PHRASES), rnd.choice(SEPARATORS) + rnd.choice(PHRASES)])
            out.append(f"{rnd.choice(PHRASES[:TRIGGERS])} {words}{tail}{rnd.choice(['', '.', '!', '?'])}")
            continue
        parts: list[str] = []
        for _ in range(rnd.randint(1, 14)):
            part = rnd.choice(PHRASES) if rnd.random() < 0.55 else rnd.choice(WORDS)
            case = rnd.random()
            if case < 0.08:
                part = part.upper()
            elif case < 0.16:
                part = part.lower()
            parts.append(part)
            parts.append(rnd.choice(SEPARATORS))
        out.append("".join(parts[:-1]) + rnd.choice(["", ".", "!", "?", " 😀", "..."]))
    return out


EDGES = [
    "a\x01b. I'm Ana",
    "Mr. Smith. I'm Ana.",
    "my my name is Bob",
    "I hate hate HATE olives",
    "ım from Oslo",
    "Name: Ana",
    "pronouns: she/her",
    "fav food = tacos",
    "Things I love: books, tea",
    "I'm Ana and live in Oslo",
    "it’s Carlos speaking",
    "hi, it's Carlos here",
    "Ren here",
    "I like rock and roll, fish and chips",
    "➀my name is Ana",
    "I😀m from Oslo",
    "I’m from Paris—and I live in Rome",
    "my dog's name is Rex",
    "we adopted two cats: Milo and Luna",
    "I can't stand jazz; I love tea",
    "I ı İ ſ K",
    "im 34 yo",
    "I'm a nurse at St. Mary's, from Porto",
    "I've been a plumber for 20 years",
    "My birthday is 3rd of May",
    "I don't like broccoli anymore",
    "I'm no longer a fan of jazz",
    "my late dog Rex",
    "I, uh, live in Oslo",
    "I live in Oslo (for now) - and I work at Acme",
    "I\tlive\u00a0in Oslo",
    "I LIVE IN OSLO",
    "",
]


def labelled() -> list[str]:
    """Every sentence of the labelled set."""
    lines = LABELLED.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


def outputs(texts: list[str]) -> list[list[list[Any]]]:
    """Each text's facts as JSON-friendly lists [key, value, remove_from, add]."""
    return [[[c.key, c.value, c.remove_from, c.add] for c in extract_facts(t)] for t in texts]


def digest(texts: list[str]) -> str:
    """A hash of the inputs, so a changed generator is told apart from a changed extractor."""
    return hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()


def frozen() -> dict[str, Any]:
    """The fixture: input digests and the outputs that are not empty, by index."""
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def inputs(name: str) -> list[str]:
    """One group of the frozen inputs."""
    return {"labelled": labelled, "random": random_strings, "edges": lambda: EDGES}[name]()


@pytest.mark.parametrize("name", ["labelled", "random", "edges"])
def test_outputs_match_the_frozen_extractor(name: str) -> None:
    texts = inputs(name)
    want = frozen()[name]
    assert digest(texts) == want["digest"], "inputs changed: re-freeze with the old extractor"
    got = outputs(texts)
    expected = [want["outputs"].get(str(i), []) for i in range(len(texts))]
    differing = [(texts[i], got[i], expected[i]) for i in range(len(texts)) if got[i] != expected[i]]
    assert not differing[:5], f"{len(differing)} of {len(texts)} outputs differ"
    least = {"random": 500, "labelled": 250, "edges": 20}[name]
    assert sum(1 for o in expected if o) >= least  # the inputs do fire rules


def write() -> None:
    """Freeze the current extractor's outputs into the fixture."""
    data: dict[str, Any] = {}
    for name in ("labelled", "random", "edges"):
        texts = inputs(name)
        found = outputs(texts)
        data[name] = {"digest": digest(texts), "outputs": {str(i): o for i, o in enumerate(found) if o}}
        print(f"{name}: {len(texts)} texts, {len(data[name]['outputs'])} with facts")
    FIXTURE.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv:
        write()
