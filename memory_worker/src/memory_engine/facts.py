"""Rule-based fact extraction from user messages: name, location, likes, dislikes, and more."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A value ends at sentence punctuation or at a clause that starts something else.
_END = r"(?=\s*(?:[.!?;,\n]|\s(?:and|but|because|so|though|although|since|which|who|where)\s|$))"
_VALUE = r"(?P<value>[^.!?;,\n]{1,60}?)"
_NAME = r"(?P<value>[A-Za-z\u00C0-\u024F][\w'\-]*(?:\s+[A-Z\u00C0-\u024F][\w'\-]*){0,2})"

_SET_KEYS = ("likes", "dislikes")  # values that accumulate as a list instead of replacing
MAX_SET_ITEMS = 12


@dataclass(frozen=True)
class FactChange:
    """One extracted statement: set `key` to `value` (or, for lists, add/remove an item)."""

    key: str
    value: str
    remove_from: str | None = None  # for "I don't like X": drop X from this list key


_RULES: list[tuple[str, re.Pattern[str]]] = [
    # Not re.I: after the first word, a name goes on only with capitalised words.
    ("name", re.compile(r"(?i:\b(?:my name is|my name's|call me|i am called|i'm called|name's))\s+" + _NAME)),
    (
        "location",
        re.compile(
            r"\b(?:i live in|i'm living in|i am living in|i'm based in|i am based in|i moved to|"
            r"i've moved to|i have moved to|i'm from|i am from|i come from|i reside in)\s+" + _VALUE + _END,
            re.I,
        ),
    ),
    (
        "job",
        re.compile(
            r"\b(?:i work as|i'm working as|i am working as|my job is|i'm employed as)\s+(?:an?\s+)?"
            + _VALUE
            + _END,
            re.I,
        ),
    ),
    (
        "employer",
        re.compile(
            r"\b(?:i work at|i work for|i'm working at|i am working at|i'm employed at|i am employed at)\s+"
            + _VALUE
            + _END,
            re.I,
        ),
    ),
    ("age", re.compile(r"\b(?:i am|i'm)\s+(?P<value>\d{1,3})\s+(?:years old|yo\b|y/o)", re.I)),
    ("birthday", re.compile(r"\bmy birthday is (?:on\s+)?" + _VALUE + _END, re.I)),
    ("pronouns", re.compile(r"\bmy pronouns are\s+(?P<value>[a-z]+/[a-z]+(?:/[a-z]+)?)", re.I)),
    (
        "dislikes",
        re.compile(
            r"\b(?:i don't like|i do not like|i dont like|i dislike|i hate|i can't stand|i cannot stand|i detest)\s+"
            + _VALUE
            + _END,
            re.I,
        ),
    ),
    (
        "likes",
        re.compile(
            r"\b(?:i really like|i like|i love|i enjoy|i adore|i'm into|i am into|i'm a fan of|i am a fan of)\s+"
            + _VALUE
            + _END,
            re.I,
        ),
    ),
]
_FAVORITE = re.compile(r"\bmy fav(?:ou?rite)? (?P<thing>[a-z]+(?: [a-z]+)?) is\s+" + _VALUE + _END, re.I)

# Words that make "I like to go" or "I love it" useless as a stored preference.
_VAGUE = {
    "it",
    "that",
    "this",
    "them",
    "you",
    "him",
    "her",
    "to",
    "so",
    "too",
    "the idea",
    "when",
    "how",
    "what",
    "a lot",
    "lots",
}


# Time words that end a statement without being part of its value ("I live in Berlin now").
_TRAILING = re.compile(
    r"(?:\s+(?:now|today|currently|nowadays|anymore|any more|these days|at the moment|lately|too|as well|a lot|so much|very much))+$",
    re.I,
)


def _clean(value: str) -> str:
    value = " ".join(value.split()).strip(" \"'`()[]{}")
    return _TRAILING.sub("", value)[:60]


def extract_facts(text: str) -> list[FactChange]:
    """Facts stated about the speaker in one message, in the order found."""
    changes: list[FactChange] = []
    negated_spans: list[tuple[int, int]] = []
    for key, pattern in _RULES:
        for m in pattern.finditer(text):
            if key == "likes" and any(a <= m.start() < b for a, b in negated_spans):
                continue  # "i don't like tea" also contains "like tea"
            value = _clean(m.group("value"))
            if (
                not value
                or value.lower() in _VAGUE
                or value.lower().split()[0] in {"to", "it", "that", "you"}
            ):
                continue
            if key == "name":
                value = " ".join(w[:1].upper() + w[1:] for w in value.split())
            if key == "dislikes":
                negated_spans.append((m.start(), m.end()))
                changes.append(FactChange("dislikes", value, remove_from="likes"))
            elif key == "likes":
                changes.append(FactChange("likes", value, remove_from="dislikes"))
            else:
                changes.append(FactChange(key, value))
    for m in _FAVORITE.finditer(text):
        thing = "_".join(m.group("thing").lower().split())
        value = _clean(m.group("value"))
        if value:
            changes.append(FactChange(f"favorite_{thing}", value))
    return changes


def merge_list(current: str | None, add: str | None = None, remove: str | None = None) -> str:
    """Add or remove one item of a comma-separated list value, newest last, bounded."""
    items = [i.strip() for i in (current or "").split(",") if i.strip()]
    folded = [i.lower() for i in items]
    if remove and remove.lower() in folded:
        del items[folded.index(remove.lower())]
        folded.remove(remove.lower())
    if add:
        if add.lower() in folded:
            del items[folded.index(add.lower())]
        items.append(add.replace(",", " "))
    return ", ".join(items[-MAX_SET_ITEMS:])


def is_list_key(key: str) -> bool:
    """True for keys whose value is a list that grows (likes, dislikes)."""
    return key in _SET_KEYS
