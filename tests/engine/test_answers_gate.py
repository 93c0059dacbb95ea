"""`asked` (what kind of fact a question asks for) skips the patterns whose words a message
lacks: the same answer as trying every pattern, on questions of each kind, their variants in
case and filler, and seeded random word salad of the patterns' own words."""

from __future__ import annotations

import random
import re

from memory_engine.facts import answers

QUESTIONS = [
    "where do you live", "where d'you live now", "Where d' u live?", "where are you based?",
    "WHERE R U BASED", "how old are you?", "How old r ya", "how old are y'all",
    "what do you all do for work?", "whats ur job", "what is your job?", "where does everyone work?",
    "where are you from?", "where r u originally from", "your accent?", "do you speak french?",
    "anyone vegetarian?", "any1 allergic?", "allergies?", "do you have kids?", "any pets?",
    "you guys have dogs?", "Caf\u00e9 anyone? do you have cats?", "wh\u00e4t do you do for work?",
]  # fmt: skip
WORDS = re.findall(
    r"\S+",
    "what what's do does you all for work where are u r from originally live based how old any pets "
    "pet dog dogs cats cat animal kids kid child children vegan vegetarian pescatarian allergic "
    "allergies speak job your ur accent everyone y'all anyone any1 ppl ? , . ! guys \u212aids",
)


def every_pattern(before: str) -> str | None:
    """`asked` without its word gate: each pattern in order."""
    if "?" not in before and not re.match(r"^\W*(?:what|where|how|who|do|does|anyone|any1)\b", before, re.I):
        return None
    return next((kind for kind, pattern in answers.ASKS if pattern.search(before)), None)


def texts() -> list[str]:
    """The questions with case and filler changed, and random strings of the patterns' words."""
    rng = random.Random(38)
    out = []
    for q in QUESTIONS:
        for _ in range(40):
            t = q.upper() if rng.random() < 0.2 else q.title() if rng.random() < 0.3 else q
            out.append(rng.choice(["", " ", "so ", "lol ", ", "]) + t + rng.choice(["", "?", " ?", "!!"]))
    for _ in range(20_000):
        out.append(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) + rng.choice(["?", "", " ?"])
        )
    return out


def test_asked_is_every_pattern_tried_in_order() -> None:
    cases = texts()
    kinds = [every_pattern(t) for t in cases]
    assert {"job", "from", "location", "age", "pets", "kids", "diet", "allergies", "languages"} <= set(kinds)
    assert [answers.asked(t) for t in cases] == kinds
