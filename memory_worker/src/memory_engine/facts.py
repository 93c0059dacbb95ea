"""Rule-based fact extraction: what the speaker says about themselves, now.

A message is cut into sentences (questions are skipped) and each sentence into clauses (at
conjunctions and at a comma before a new subject). A rule fires on a first-person trigger
("I live in", "my name is", "my dog ..."); the words before the trigger in its clause must not
negate it, make it hypothetical or past, hedge it or report someone else's words; the value is
then cut at the end of its phrase and cleaned of fillers and time words. Precision comes first:
a wrong fact in every prompt is worse than a missing one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from .facts_clauses import FactChange, clauses, is_question, sentences
from .facts_prefs import favorites, kin, preferences
from .facts_rules import age, dates_and_pronouns, names, places, work

__all__ = ["FactChange", "extract_facts", "is_list_key", "merge_list"]

LIST_KEYS = ("likes", "dislikes", "pets", "family")  # values that accumulate as a list
MAX_SET_ITEMS = 12
MAX_CHANGES = 40  # per message: a pasted wall of text must not rewrite every fact
MAX_TEXT = 8000  # facts are read from the start of a long message only

_ABOUT_ME = re.compile(r"\b(?:i|i'm|i've|my|me|we|we're|we've|our|name|here|this|it's|fav\w*)\b", re.I)
Rule = Callable[[str], Iterator[FactChange]]
RULES: tuple[Rule, ...] = (names, places, work, age, dates_and_pronouns, preferences, favorites, kin)


def extract_facts(text: str) -> list[FactChange]:
    """Facts the speaker states about themselves in one message, in the order found."""
    changes: list[FactChange] = []
    for sentence in sentences(text[:MAX_TEXT]):
        if is_question(sentence):
            continue
        for clause in clauses(sentence):
            if not _ABOUT_ME.search(clause):
                continue  # most chat is not about the speaker: no rule could fire
            for rule in RULES:
                changes.extend(rule(clause))
    lived = any(c.key == "location" and c.remove_from is None for c in changes)
    out: list[FactChange] = []
    for c in changes:
        if c.remove_from == "from":  # "I'm from X" counts unless the message says where they live
            if lived:
                continue
            c = FactChange("location", c.value)
        if c not in out:
            out.append(c)
    return out[:MAX_CHANGES]


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
    """True for keys whose value is a list that grows (likes, dislikes, pets, family)."""
    return key in LIST_KEYS
