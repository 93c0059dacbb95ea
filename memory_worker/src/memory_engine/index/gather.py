"""Concept words: a question names a category ("hobbies", "cities"), the chat names the things.

"What are Leo's hobbies?" shares no word with "signed up for spanish lessons", and "which
cities has Sam visited?" none with "have you ever been to prague": people name a pastime, a
trip or a job, not its category, and in short-message chats the answer is spread over several
such messages. A handful of category words a question uses are searched together
with the everyday words people say those things with (`CONCEPTS`), as OR-ed alternatives of
the question's word: a message scores once for the word, by its best alternative
(`best_form.forms_once`), a cue counting CUE_WEIGHT of what the question's own word would,
and bm25's idf keeps a cue that is everywhere in a chat from counting much.

General English, written from how people talk about these things, not from a benchmark's
messages. The category words are the gathering ones: a singular "city" or "career" is most
often named in the question itself ("which city did she recommend"), and expanding it
measured worse on LoCoMo dev (benchmarks/chat_recall.py).
"""

from __future__ import annotations

from collections.abc import Sequence

# (the question's category words, the words people say such things with)
_CONCEPT_TABLE = [
    ("hobby hobbies interests pastimes", "hobby hobbies class classes lessons practice club team training"),
    ("hobby hobbies interests pastimes", "trying learning"),
    ("cities countries visited travel travelled traveled trips", "trip travel visited vacation holiday"),
    ("cities countries visited travel travelled traveled trips", "flew flight been went"),
    ("job jobs profession occupation", "job work working office company boss manager shift hired"),
    ("pet pets animals", "pet pets dog dogs cat cats puppy kitten"),
]


def _concepts(table: list[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for asked, cues in table:
        for word in asked.split():
            out[word] = tuple(dict.fromkeys([*out.get(word, ()), *(c for c in cues.split() if c != word)]))
    return out


# A category word -> its cue words (itself left out).
CONCEPTS = _concepts(_CONCEPT_TABLE)
# A cue's share of a message's score, against the question's own word's (1.0: the same).
# Tuned on LoCoMo dev and tests/data/recall_chats/dev.txt (0.3 .. 1.0 measured).
CUE_WEIGHT = 0.7


def expand(terms: Sequence[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], frozenset[str]]:
    """The query's terms, a category word's term with its cue words appended as alternatives;
    and the cue words added (not forms of any of the query's own words)."""
    own = {form for term in terms for form in term}
    out, added = [], set()
    for term in terms:
        cues = [c for form in term for c in CONCEPTS.get(form, ()) if c not in own]
        out.append(tuple(dict.fromkeys([*term, *cues])) if cues else term)
        added.update(cues)
    return out, frozenset(added)
