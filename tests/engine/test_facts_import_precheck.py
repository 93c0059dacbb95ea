"""The import's pre-check `facts.states_nothing` says True only for a message the rules record
nothing for, whatever its author said before: `ChatMemory.apply_facts` reads no previous message
for it (`looks_like_correction` is False) and `extract_facts` finds nothing. Checked over every
corpus the fact tests use, the seeded strings of the speed-equivalence test, generated chat, and
each of them turned into a correction (an opening word, a "*", "actually", a question)."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

from memory_engine.facts import corrections as facts_corrections
from memory_engine.facts.corrections import OPENING_WORDS
from memory_engine.facts.extract import extract_facts, looks_like_correction, states_nothing
from memory_engine.imports import bulk as imports
from memory_engine.imports import hold as import_hold
from tests.engine.test_facts_speed_equivalence import labelled, random_strings
from tests.engine.test_import_hold import chat, cut, dump, history, send, true_hints

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from import_throughput import WORDS  # noqa: E402 (the generated export's words)

PREVIOUS = ["I live in Oslo", "my name is Ada", "I'm 34", "I love pizza and coffee", "I work at Siemens"]


def _informal() -> list[str]:
    rows = (ROOT / "tests" / "data" / "facts_informal.jsonl").read_text(encoding="utf-8").splitlines()
    return [m for row in rows if row.strip() for m in json.loads(row)["messages"]]


def _chat(n: int = 3000, seed: int = 5) -> list[str]:
    """Plain chat as the benchmark's export has it, with links, stars, numbers and openers."""
    rnd = random.Random(seed)
    extra = ["https://x.org", "*", "?", "actually", "Actually", "3", "...", "-", "'", "sorry", "ok", "Well"]
    extra += [w.decode() for w in OPENING_WORDS] + ["I", "i", "no", "NO", "wait,", "okay.", "lol!"]
    out = []
    for _ in range(n):
        size = rnd.randint(1, 30)
        words = [rnd.choice(WORDS) if rnd.random() < 0.8 else rnd.choice(extra) for _ in range(size)]
        text = " ".join(words)
        out.append(text.capitalize() if rnd.random() < 0.3 else text)
    return out


def _texts() -> list[str]:
    base = labelled() + _informal() + random_strings() + _chat()
    turned = []
    for t in base[::3]:
        turned += [f"sorry, {t}", f"{t}*", f"*{t}", f"{t} actually", f"  ...wait no {t}", f"{t}?", t[:150]]
    return base + turned


def test_a_message_it_passes_states_no_fact_and_reads_no_previous_message():
    passed = 0
    for text in _texts():
        if not states_nothing(text):
            continue
        passed += 1
        assert not looks_like_correction(text), text
        assert extract_facts(text) == [], text
        for previous in PREVIOUS:  # (apply_facts gives none: looks_like_correction is False)
            assert extract_facts(text, previous=previous if looks_like_correction(text) else None) == []
    assert passed > 2500  # (3298 when written: most plain chat passes)


def test_most_plain_chat_passes_and_openers_do_not():
    chat = [" ".join(random.Random(i).choices(WORDS, k=12)) for i in range(200)]
    assert sum(map(states_nothing, chat)) >= 190
    openers = ["sorry, Osaka", "Osaka*", "wait no, 35", "I live in Oslo", "it's actually Bergen", "ok fine"]
    for text in openers:
        assert not states_nothing(text)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("hinted", [False, True])
def test_an_import_with_the_pre_check_stores_what_it_stores_without(monkeypatch, seed, hinted):
    """Whole databases (facts, messages, state, index), held or not, with and without the pre-check."""
    messages = history(600, seed)
    for m in messages[::7]:  # plain chat the pre-check passes, among the facts and corrections
        m["text"] = " ".join(random.Random(m["message_id"]).choices(WORDS, k=9))
    parts = cut(messages, [40, 3, 26])
    hints = true_hints(parts) if hinted else None
    dumps = []
    for pre_check in (True, False):
        if not pre_check:
            monkeypatch.setattr(imports, "states_nothing", lambda text: False)
            monkeypatch.setattr(import_hold, "states_nothing", lambda text: False)
        memory = chat()
        send(memory, parts, hints)
        dumps.append(dump(memory))
    assert dumps[0] == dumps[1]
    assert len(dumps[0]["facts"]) > 5


def test_every_opening_of_a_correction_starts_with_one_of_the_opening_words():
    """OPENING_WORDS is read off the correction pattern's alternatives: each must open with a plain
    word (a group or a class there would make the set wrong, and this test says so)."""
    alternatives = facts_corrections._WEAK.split("|")
    for alternative in alternatives:
        assert re.fullmatch(r"[a-z]+(?:\\s\+.*)?", alternative), alternative
    assert {a.split("\\")[0].encode() for a in alternatives} == OPENING_WORDS
