"""Shared pieces of the fact extractor: the change type, sentences, clauses, the guard, value cleaning."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .facts_lexicon import (
    ADVERBS,
    BINOMIALS,
    GUARD_BIGRAMS,
    GUARD_WORDS,
    LEAD_FILLERS,
    NOT_NAMES,
    OWN_REPORT,
    TIME_HEADS,
    TIME_UNITS,
    TIME_WORDS,
)

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - "})
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+")  # no fact in a pictograph
_ABBREV = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Prof|Jr|Sr|Mt|vs|etc|approx|e\.g|i\.e)\.", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+|;\s*")
_QUESTION_END = re.compile(r"\?[\s\"')\]\W]*$")
_INVERTED = re.compile(
    r"^(?:(?:so|and|but|hey|ok|okay|um|well|wait|also)[,\s]+)*"
    r"(?:(?:do|does|did|am|is|are|was|were|can|could|would|will|shall|should|may|might|have|has|"
    r"had|must)(?:n't)?\s+(?:i|you|we|he|she|they|it|my|your|our|the|this|that|there|anyone|"
    r"somebody|someone)\b|(?:what|where|when|who|whom|whose|which|why|how)(?:'s|'re|'d|\s+(?:do|"
    r"does|did|is|are|was|were|can|could|would|will|should|have|has|am)\b))",
    re.I,
)
_SUBJECT = r"(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|he|she|they|it|you|there|our|his|her|their)\b"
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[()]|\s-\s|,?\s+(?:but|because|although|though|whereas|while|yet|except|cause|cuz)\s+"
    r"|[,:]\s*(?:and\s+|so\s+|or\s+)?(?=" + _SUBJECT + r")"
    r"|(?<!^i)(?<! i)\s+(?:and|so|or)\s+(?=" + _SUBJECT + r"))",
    re.I,
)
# Chat spellings without the apostrophe, and stutters ("I hate hate HATE").
_BARE = {"im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "cant": "can't"}
_BARE_WORD = re.compile(r"\b(" + "|".join(_BARE) + r")\b", re.I)
_STUTTER = re.compile(r"\b(\w+)(?:\s+\1\b)+", re.I)
# "Name: Ingrid", "fav food: tacos", "Things I love: books, tea": a label read as a sentence.
_LABELS = (
    (re.compile(r"^\W*(?:my\s+)?name\s*[:=\-]\s*", re.I), "my name is "),
    (
        re.compile(r"^\W*(?:my\s+)?(fav(?:ou?rite)?|fave)\s+([a-z][a-z ]{0,30}?)\s*[:=]\s*", re.I),
        r"my \1 \2 is ",
    ),
    (re.compile(r"^\W*(?:things|stuff)\s+i\s+(love|like|enjoy|hate|dislike)\s*[:=\-]\s*", re.I), r"I \1 "),
    (re.compile(r"^\W*(?:my\s+)?pronouns\s*[:=\-]\s*", re.I), "my pronouns are "),
)
# "I'm Ana and live in Oslo": the second verb keeps the first person subject.
_ELIDED = re.compile(
    r"\b(and|but)\s+(?=(?:also\s+|really\s+|now\s+|currently\s+|still\s+)*(?:live|like|love|enjoy|"
    r"adore|hate|dislike|work|moved)\b)",
    re.I,
)
_TOKEN = re.compile(r"n't|'[a-z]+|[\w\-]+", re.I)


def sentences(text: str) -> list[str]:
    """The sentences of a message, with their final punctuation."""
    text = _ABBREV.sub(lambda m: m.group(1) + "\x01", _EMOJI.sub(" ", text.translate(_QUOTES)))
    return [s.replace("\x01", ".").strip() for s in _SENTENCE_END.split(text) if s.strip()]


def is_question(sentence: str) -> bool:
    """True for a question: ends with "?", or starts like one ("do I", "where is")."""
    return bool(_QUESTION_END.search(sentence) or _INVERTED.match(sentence.strip(" \"'*_-")))


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence: split at conjunctions and at a comma before a new subject."""
    sentence = sentence.rstrip(".!? ")
    sentence = _BARE_WORD.sub(lambda m: _BARE[m.group(1).lower()], _STUTTER.sub(r"\1", sentence))
    for label, spoken in _LABELS:
        sentence = label.sub(spoken, sentence, count=1)
    if re.match(r"\W*i\b", sentence, re.I):
        sentence = _ELIDED.sub(r"\1 I ", sentence)
    return [c.strip(" ,") for c in _CLAUSE_BREAK.split(sentence) if c and c.strip(" ,")]


def tokens(text: str) -> list[str]:
    """Lower-case word tokens with contractions apart ("don't" -> "do", "n't")."""
    return [t.lower() for t in _TOKEN.findall(text.replace("n't", " n't").replace("'d ", " 'd "))]


def guarded(prefix: str) -> bool:
    """True when the words before a trigger make it no current fact (negation, "if", "used to")."""
    words = tokens(prefix)
    own = {i + 1 for i, w in enumerate(words) if w == "i"}  # "I said", "I told you": the speaker's own words
    if any(w in GUARD_WORDS and not (i in own and w in OWN_REPORT) for i, w in enumerate(words)):
        return True
    return any((a, b) in GUARD_BIGRAMS for a, b in itertools.pairwise(words))


def strip_leading(value: str) -> str:
    """Drop fillers that open a value ("actually Ana", "probably sushi")."""
    words = value.split()
    while words and words[0].lower().strip(",") in LEAD_FILLERS:
        words.pop(0)
    return " ".join(words)


_TRAIL_PHRASES = re.compile(
    r"(?:\s+(?:these days|those days|at the moment|right now|as well|a lot|so much|very much|"
    r"any more|for (?:good|now|a while|ages|years|months|the most part)|by the way|in general|"
    r"of all time|more than anything|above all|more and more|"
    r"(?:a|one|\w+) (?:\w+ )?(?:days?|weeks?|months?|years?) ago|a while ago|since \S+|in \d{4}|"
    r"for (?:\w+ )?(?:days|weeks|months|years)|every (?:day|night|week|weekend|morning|evening)|"
    r"in the (?:morning|evening|afternoon|summer|winter|spring|autumn|fall)s?|"
    r"on (?:the )?weekends?|on (?:mon|tues|wednes|thurs|fri|satur|sun)days|now and then|every now and then|"
    r"from time to time|once in a while|(?:and|or) (?:so on|stuff|whatever|more)|etc))+$",
    re.I,
)


def strip_trailing(value: str) -> str:
    """Drop time words and fillers that close a value ("Porto last month", "jazz these days")."""
    while True:
        before = value
        value = _TRAIL_PHRASES.sub("", value).rstrip(" ,")
        words = value.split()
        if words and words[-1].lower() in TIME_WORDS:
            words.pop()
        elif len(words) >= 2 and words[-2].lower() in TIME_HEADS and words[-1].lower() in TIME_UNITS:
            del words[-2:]
        value = " ".join(words)
        if value == before:
            return value


def clean(value: str) -> str:
    """A value without quotes, fillers, time words and extra spaces."""
    value = " ".join(value.split()).strip(" \"'`()[]{}*_,:")
    return strip_trailing(strip_leading(value)).strip(" \"'`()[]{}*_,:")


def protect_binomials(text: str) -> str:
    """Join fixed pairs ("rock and roll") so a list split keeps them whole (see `restore`)."""
    low = text.lower()
    for phrase in BINOMIALS:
        at = low.find(phrase)
        while at >= 0:
            end = at + len(phrase)
            if (at == 0 or not low[at - 1].isalnum()) and (end == len(low) or not low[end].isalnum()):
                text = text[:at] + text[at:end].replace(" and ", "\x02") + text[end:]
                low = text.lower()
            at = low.find(phrase, at + 1)
    return text


def restore(text: str) -> str:
    """Undo `protect_binomials`."""
    return text.replace("\x02", " and ")


def is_capitalised(word: str) -> bool:
    """True for a word that looks like a proper noun: upper case or an uncased script (김민준)."""
    first = word[:1]
    return first.isalpha() and not first.islower()


def is_name_word(word: str) -> bool:
    """A capitalised word that is not a common word in title case."""
    return is_capitalised(word) and word.lower().strip("'") not in NOT_NAMES


def title(name: str) -> str:
    """Upper-case the first letter of each word that starts in lower case ("josé" -> "José")."""
    return " ".join(w[:1].upper() + w[1:] if w[:1].islower() and len(w) > 2 else w for w in name.split())


@dataclass(frozen=True)
class FactChange:
    """One extracted statement: set `key` to `value` (or, for lists, add/remove an item)."""

    key: str
    value: str
    remove_from: str | None = None  # drop `value` from this list key first ("I hate X": not liked)
    add: bool = True  # False: only the removal ("I don't like X anymore")


# Emphasis between "I" and the verb ("I really dislike"), the subject "I", a word of a name.
ADV = r"(?:(?:" + "|".join(sorted(ADVERBS)) + r"|kind of|sort of|pretty much)\s+)*"
I_ = r"(?<![\w'])i"
I_AM_ = r"(?<![\w'])i(?:'m|\s+am)\s+"
WORD = re.compile(r"[^\W\d_][\w'\-]*")


def rx(pattern: str) -> re.Pattern[str]:
    """A case-insensitive rule pattern."""
    return re.compile(pattern, re.I)


def triggers(clause: str, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """Matches of a trigger whose clause prefix does not guard it."""
    for m in pattern.finditer(clause):
        if not guarded(clause[: m.start()]):
            yield m
