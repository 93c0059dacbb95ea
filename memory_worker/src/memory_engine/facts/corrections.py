"""Corrections as people type them: "I'm 34, sorry 35", "wait no, Braga*", "correction: Stavanger".

A correction names a new value without its trigger; the key is the one the words before it (in
the same message, or the speaker's previous message) stated. It is only read after a marker
("sorry", "I mean", "wait no", a "*"), and only a short value that ends where the message or its
phrase ends counts: "I live in Oslo, actually Bergen is nicer" corrects nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memory_engine.facts.clauses import FactChange, is_name_word
from memory_engine.facts.health import diet_value
from memory_engine.facts.lexicon import NOT_NAMES, VAGUE_START
from memory_engine.facts.patterns import lazy
from memory_engine.facts.rules import take_org

__all__ = ["INSIDE_WORDS", "OPENING_WORDS", "correction_of", "corrections_within", "looks_like_correction"]

_STRONG = (
    r"sorry|no\s+wait|wait\s+no|wait|no|nah|nope|i\s+mean|i\s+meant|oops|whoops|correction|scratch\s+that|"
    r"or\s+rather|make\s+that|nvm|actually\s+(?=it'?s\b)|i\s+mean\s+it'?s"
)
_WEAK = _STRONG + r"|actually|update|well|lol\s+no|ok\s+not|okay\s+not|ok|okay|lol|haha"
# The word every opening of _OPENS' first branch starts with (a message whose first word is
# another one, with no "*" and no "actually", corrects nothing: `facts.states_nothing`).
OPENING_WORDS = frozenset(alternative.split("\\")[0].encode() for alternative in _WEAK.split("|"))
_INSIDE = lazy(r"(?:,|\.{2,}|[.;!]|\s-|\s)\s*\b(?:" + _STRONG + r")\b[\s,:!.\-]*", re.I)
# Every match of _INSIDE holds one of these as a whole word (of each alternative of _STRONG, its
# rarest: "wait" of "no wait", "mean" of "i mean", "rather" of "or rather"). ASCII text whose
# words (runs of [a-z0-9_] of its lower case) hold none has no correction inside it.
_INSIDE_WORDS = "sorry wait no nah nope mean meant oops whoops correction scratch rather make nvm actually"
INSIDE_WORDS = frozenset(w.encode() for w in _INSIDE_WORDS.split())
# A message opens like a correction ("sorry, ...", "*Osaka"), ends with a starred word ("Osaka*"),
# or says "actually" anywhere. Three patterns, the last two tried only when their literal is there:
# one pattern with all of them scanned every message from each position (7-11 us a message).
_OPENS = lazy(r"^\W*(?:(?:" + _WEAK + r")\b[\s,:!.\-]*)+|^\s*\*", re.I)
_STARRED_END = lazy(r"\S\*\W*$", re.I)
_ACTUALLY = lazy(r"\bactually\b", re.I)
_LEADING = lazy(
    r"^(?:(?:" + _WEAK + r"|it'?s|it\s+is|i'?m|i\s+am|not\s+[\w'\-]+(?:\s+anymore)?|make\s+that|now)\b"
    r"[\s,:!.\-*]*|\*\s*)+",
    re.I,
)
_VALUE = lazy(
    r"^(?P<v>[^\s,.;!?*()]+(?:\s+[^\s,.;!?*()]+){0,3}?)\s*\**\s*"
    r"(?:$|[,.;!?(]|\s(?:not|with|as\s+of|typo|autocorrect|lol|haha|lmao|i\s+keep|technically|actually|now|"
    r"btw|tho|though|sorry|forgot)\b)",
    re.I,
)
_AT_ORG = lazy(r"\bI(?:'m|\s+am|m)\s+(?:now\s+)?(?:at|with)\s+", re.I)
_EMOJI = lazy("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+", 0)
_SCALAR_ORDER = ("age", "diet", "name", "location", "employer", "job")


def looks_like_correction(text: str) -> bool:
    """True when a message may correct the speaker's previous one ("sorry, Osaka", "*John")."""
    if len(text) > 160 or "?" in text:
        return False
    text = text.strip()
    return bool(
        _OPENS.match(text)
        or ("*" in text and _STARRED_END.search(text))
        # re.I matches "actually" only with letters that lower() maps to it (checked for all of Unicode)
        or ("actually" in text.lower() and _ACTUALLY.search(text))
    )


def _bare(text: str) -> str | None:
    text = _LEADING.sub("", _EMOJI.sub(" ", text).strip())
    m = _VALUE.match(text)
    if not m:
        return None
    value = m.group("v").strip(" *'\"")
    first = value.split()[0].lower() if value else ""
    if not value or (first in NOT_NAMES and not first.isdigit()) or first in VAGUE_START:
        return None
    return value


def _resolve(value: str, text: str, before: list[FactChange]) -> FactChange | None:
    """The change `value` makes to what `before` stated, or None when it fits none of it."""
    keys = [c.key for c in before if (c.add and c.key in _SCALAR_ORDER) or c.key.startswith("favorite_")]
    if not keys:
        return None
    if value.isdigit():
        return FactChange("age", value) if "age" in keys and 0 < int(value) <= 120 else None
    if "diet" in keys and diet_value(value):
        return FactChange("diet", diet_value(value) or value)
    for key in reversed(keys):
        if key in ("age", "diet"):
            continue
        if key == "employer" and (at := _AT_ORG.search(text)):
            org = take_org(text[at.end() :])
            return FactChange("employer", org) if org else None
        if key in ("name", "location", "employer"):
            words = value.split()
            if not all(is_name_word(w) or w.lower() in ("de", "of", "la", "do", "da") for w in words):
                return None
            if key == "name" and len(words) > 2:
                return None
        return FactChange(key, value)
    return None


def correction_of(text: str, before: list[FactChange], found: list[FactChange]) -> list[FactChange]:
    """What a correction message changes in `before` (the speaker's last statement).

    `found` is what the rules read in `text` itself: a key they restate needs no correction.
    """
    if not before or not looks_like_correction(text):
        return []
    stated = {c.key for c in found}
    first = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0]
    value = _bare(first)
    if _AT_ORG.search(first) and "employer" not in stated:
        change = _resolve(value or "", first, [c for c in before if c.key == "employer"])
        return [change] if change else []
    if value is None:
        return []
    change = _resolve(value, first, before)
    return [change] if change and change.key not in stated else []


def corrections_within(text: str, extract: Callable[[str], list[FactChange]]) -> list[FactChange]:
    """Corrections inside one message ("I'm 34, sorry 35"): the last value a marker gives wins."""
    out: list[FactChange] = []
    for m in _INSIDE.finditer(text):
        left, right = text[: m.start()], text[m.end() :]
        if not right.strip():
            continue
        before = extract(left)
        value = _bare(right)
        if before and value:
            change = _resolve(value, right, before)
            if change:
                out.append(change)
    return out
