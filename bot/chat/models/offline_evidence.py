"""Which earlier messages the offline model may quote: statements, and only for what they state.

A message is evidence for a question only through its stated clauses: a hypothetical or wish
("if i had the money i'd move to ..."), a negation ("no pets") and what a contrasting "not"
denies ("a vet, not a dog whisperer") state nothing; a word too common to tell ("that time
works for me" for "what does X do for work") counts only inside the phrase that states the key.
A correction the author sent right after ("sorry typo 7pm, not 6") is quoted with the message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.chat.models.offline_people import fold, tokens
from memory_engine.api import wire

# A message's clauses that state nothing: a hypothetical or wish ("if i had the money i'd move
# to ...") and a negation ("no pets"); what a contrasting "not" denies ("a vet, not a dog
# whisperer") goes too, the part before it stays.
_CLAUSE_CUT = re.compile(r"[,.;!?\u2026()]+|\s(?:but|so|because|cause|cuz|coz|tho|though|and)\s")
_HYPOTHETICAL = re.compile(
    r"\b(?:if|would|wish|someday|maybe|might|thinking|considering|planning|dream\w*|i'?d|id|"
    r"wanna|gonna|hope|should|could|imagine|pretend|unless)\b|\bone day\b|\bwant to\b|\bgoing to\b"
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|nope|nah|don'?t|doesn'?t|didn'?t|isn'?t|aren'?t|wasn'?t|weren'?t|can'?t|"
    r"cant|cannot|won'?t|wont|haven'?t|hasn'?t|nothing|none|neither|nor)\b"
)
# Words too common to make a message evidence alone ("that time works for me" is no job):
# they count only inside the phrase that states the key.
_GENERIC = frozenset(
    [
        "work",
        "job",
        "time",
        "live",
        "liv",
        "do",
        "go",
        "get",
        "like",
        "day",
        "thing",
        "good",
        "new",
        "know",
        "think",
        "want",
        "need",
        "make",
        "take",
        "see",
        "come",
        "old",
        "year",
        "home",
        "place",
        "way",
        "lot",
        "back",
        "now",
        "still",
        "really",
        "one",
        "two",
        "people",
        "stuff",
    ]
)
_KEY_PHRASE = re.compile(
    r"\b(?:work|works|working|worked)\s+(?:as|at|in)\b|\b(?:live|lives|living|based)\s+(?:in|at|near)\b"
    r"|\bmoved\s+to\b|\bmy\s+job\b"
)
_CORRECTS = re.compile(
    r"^\W*(?:sorry|correction|actually|typo|oops|wait|i mean|update|edit|no sorry|my bad|\*)", re.I
)


def stem(word: str) -> str:
    """A word without its commonest English ending ("works" -> "work")."""
    for end in ("ing", "ed", "es", "s"):
        if len(word) > len(end) + 2 and word.endswith(end):
            return word[: -len(end)]
    return word


def one_line(text: str, limit: int = 200) -> str:
    """The text on one line, cut at `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stated_words(text: str) -> set[str]:
    """The stems of a message's stated clauses: hypotheticals, negations and what a "not" denies left out."""
    low = fold(text).replace("\u2019", "'")
    kept: list[str] = []
    for clause in _CLAUSE_CUT.split(low):
        if _HYPOTHETICAL.search(clause):
            continue
        neg = _NEGATION.search(clause)
        if neg:
            before = clause[: neg.start()]
            if neg.group(0) == "not" and len(before.split()) >= 2 and not _HYPOTHETICAL.search(before):
                kept.append(before)  # "i'm a pharmacist not a wizard": the pharmacist stands
            continue
        kept.append(clause)
    return {stem(t) for t in tokens(" ".join(kept))}


def evidence(wanted: set[str], text: str) -> int:
    """How many asked-for stems a message states; 0 when it shares only common words out of their phrase."""
    shared = wanted & stated_words(text)
    if shared and shared <= _GENERIC and not _KEY_PHRASE.search(fold(text)):
        return 0  # "that time works for me" says nothing of anyone's work
    return len(shared)


# What answers "when": a time, a day, a date.
WHEN = re.compile(
    r"\b(?:\d{1,2}(?::\d\d)?\s*(?:am|pm)|\d{1,2}:\d\d|\d{1,2}(?:st|nd|rd|th)|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday|tomorrow|tonight|today|noon|midnight|january|february|march|"
    r"april|may|june|july|august|september|october|november|december)\b",
    re.I,
)


def from_message(
    messages: Sequence[wire.Message], wanted: set[str], asker: str, prefer: re.Pattern[str] | None = None
) -> str | None:
    """The earlier statement stating the most of the asked-for stems, quoted with its author.

    A correction its author sent right after it ("sorry typo 7pm, not 6") is quoted with it.
    """
    if not wanted:
        return None
    best: tuple[int, int, int, wire.Message | None] = (0, 0, 0, None)
    for m in messages:
        overlap = evidence(wanted, str(m.get("text") or ""))
        if overlap * 2 < len(wanted):
            continue  # less than half of what was asked: unrelated
        # "when is the party?": of the messages that share as much, the one that says when
        says = int(prefer is not None and prefer.search(str(m.get("text") or "")) is not None)
        if (overlap, says, int(m.get("id") or 0)) > best[:3]:
            best = (overlap, says, int(m.get("id") or 0), m)
    chosen = best[3]
    if chosen is None:
        return None
    quoted = one_line(str(chosen.get("text") or ""))
    author = str(chosen.get("author_id") or "")
    later = sorted(
        (
            m
            for m in messages
            if str(m.get("author_id") or "") == author
            and 0 < int(m.get("id") or 0) - best[2] <= 3
            and _CORRECTS.match(str(m.get("text") or ""))
        ),
        key=lambda m: int(m.get("id") or 0),
    )
    if later:
        quoted += f"” then: “{one_line(str(later[-1].get('text') or ''))}"
    if author in ("", asker):
        return f"You told me: “{quoted}”"
    return f"{chosen.get('author') or 'Someone'} said: “{quoted}”"
