"""Shared pieces of the fact extractor: the change type, sentences, clauses, the guard, value cleaning."""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memory_engine.facts.lexicon import (
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
from memory_engine.facts.patterns import LiteralIndex, Rx, lazy, word_runs

# Letters that re.IGNORECASE matches to an ASCII letter although str.lower() does not map them to it
# (found by trying every code point): "ım" matches the chat spelling "im".
FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - "})
_EMOJI = lazy("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+", 0)  # no fact in a pictograph
_EMOJI_BREAK = lazy(
    "[\U0001f000-\U0001faff\u2600-\u27bf][\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]*\\s+(?=[^\\W\\d_])",
    0,
)
_ABBREV = lazy(r"\b(Mr|Mrs|Ms|Dr|St|Prof|Jr|Sr|Mt|vs|etc|approx|e\.g|i\.e)\.", re.I)
# Each split pattern starts with a lookahead for the characters every match starts with: the same
# matches, found about twice as fast.
# `fast` forms open with a character class (re then skips to the places that can start a match in
# its own loop); their lookbehinds tell the branch the class's character opens: the same matches.
_SENTENCE_END = lazy(
    r"(?=[\s\"')\];])(?:(?<=[.!?])[\"')\]]*\s+|\n+|;\s*)",
    0,
    fast=r"[\s\"')\];](?:(?<=[.!?][\s\"')\]])(?:(?<=[\"')\]])[\"')\]]*\s+|(?<=\s)\s*)|(?<=\n)\n*|(?<=;)\s*)",
)
_QUESTION_END = lazy(r"\?[\s\"')\]\W]*$", 0)
_INVERTED = lazy(
    r"^(?:(?:so|and|but|hey|ok|okay|um|well|wait|also)[,\s]+)*"
    r"(?:(?:do|does|did|am|is|are|was|were|can|could|would|will|shall|should|may|might|have|has|"
    r"had|must)(?:n't)?\s+(?:i|you|we|he|she|they|it|my|your|our|the|this|that|there|anyone|"
    r"somebody|someone)\b|(?:what|where|when|who|whom|whose|which|why|how)(?:'s|'re|'d|\s+(?:do|"
    r"does|did|is|are|was|were|can|could|would|will|should|have|has|am)\b))",
    re.I,
)
_INVERTED_WORDS = (
    *("so", "and", "but", "hey", "ok", "okay", "um", "well", "wait", "also", "do", "does", "did", "am", "is"),
    *("are", "was", "were", "can", "could", "would", "will", "shall", "should", "may", "might", "have"),
    *("has", "had", "must", "what", "where", "when", "who", "whom", "whose", "which", "why", "how"),
)
_INVERTED_OPENINGS = frozenset(w[:2] for w in _INVERTED_WORDS)
_SUBJECT = r"(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|he|she|they|it|you|there|our|his|her|their)\b"
_CLAUSE_BREAK = lazy(
    r"(?=[\s(),:])\s*(?:[()]|\s-\s|,?\s+(?:but|because|although|though|whereas|while|yet|except|cause|cuz)\s+"
    r"|[,:]\s*(?:and\s+|so\s+|or\s+)?(?=" + _SUBJECT + r")"
    r"|(?<!^i)(?<! i)\s+(?:and|so|or)\s+(?=" + _SUBJECT + r"))",
    re.I,
)
# Chat spellings without the apostrophe, and stutters ("I hate hate HATE").
_BARE = {"im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "cant": "can't"}
_BARE_WORD = lazy(r"\b(" + "|".join(_BARE) + r")\b", re.I)
_STUTTER = lazy(r"\b(\w+)(?:\s+\1\b)+", re.I)
# "Name: Ingrid", "fav food: tacos", "Things I love: books, tea": a label read as a sentence.
_LABELS = (
    (lazy(r"^\W*(?:my\s+)?name\s*[:=\-]\s*", re.I), "my name is "),
    (
        lazy(r"^\W*(?:my\s+)?(fav(?:ou?rite)?|fave)\s+([a-z][a-z ]{0,30}?)\s*[:=]\s*", re.I),
        r"my \1 \2 is ",
    ),
    (lazy(r"^\W*(?:things|stuff)\s+i\s+(love|like|enjoy|hate|dislike)\s*[:=\-]\s*", re.I), r"I \1 "),
    (lazy(r"^\W*(?:my\s+)?pronouns\s*[:=\-]\s*", re.I), "my pronouns are "),
)
# "I'm Ana and live in Oslo": the second verb keeps the first person subject.
_ELIDED = lazy(
    r"\b(and|but)\s+(?=(?:also\s+|really\s+|now\s+|currently\s+|still\s+)*(?:live|like|love|enjoy|"
    r"adore|hate|dislike|work|moved)\b)",
    re.I,
)
_TOKEN = lazy(r"n't|'[a-z]+|[\w\-]+", re.I)


def folded(text: str) -> str:
    """`text` lower-cased, with the letters in FOLD made ASCII: same length, same classes (\\w, \\s, \\d).

    A plain (case-sensitive) search of it for a lower-case literal finds every place where a
    case-insensitive pattern could match that literal in `text`: the cheap gates below rely on it.
    """
    return text.lower() if text.isascii() else text.translate(FOLD).lower()


def has_any(low: str, words: tuple[str, ...]) -> bool:
    """True when one of `words` occurs in `low` (a loop: faster than any() over a generator)."""
    for word in words:  # noqa: SIM110 (any() over a generator is slower, and this runs per rule)
        if word in low:
            return True
    return False


# Gates: a pattern is only run when the literal text its every match needs is there.
_ABBREV_NEEDS: tuple[str, ...] = (
    "mr.",
    "mrs.",
    "ms.",
    "dr.",
    "st.",
    "prof.",
    "jr.",
    "sr.",
    "mt.",
    "vs.",
    "etc.",
    "approx.",
)
_ABBREV_NEEDS += ("e.g.", "i.e.")
_BARE_NEEDS = tuple(_BARE)
_BARE_WORDS = frozenset(_BARE)  # each is a whole word where _BARE_WORD matches
_LABEL_NEEDS = ("name", "fav", "things", "stuff", "pronouns")
_ELIDED_VERBS = ("live", "like", "love", "enjoy", "adore", "hate", "work", "moved")
_BREAK_GATE = lazy(  # _CLAUSE_BREAK's matches, less its lookbehinds: case-sensitive, on folded text
    r"[()]|\s-\s|\s(?:but|because|although|though|whereas|while|yet|except|cause|cuz)\s"
    r"|[,:]\s*(?:(?:and|so|or)\s+)?" + _SUBJECT + r"|\s(?:and|so|or)\s+" + _SUBJECT,
    0,
    fast=r"[()\s,:](?:(?<=[()])|(?<=\s)(?:-\s|(?:but|because|although|though|whereas|while|yet|except|cause|cuz)\s"
    r"|(?:and|so|or)\s+" + _SUBJECT + r")|(?<=[,:])\s*(?:(?:and|so|or)\s+)?" + _SUBJECT + r")",
)
_BREAK_WORDS = frozenset(
    ("but", "because", "although", "though", "whereas", "while", "yet", "except", "cause", "cuz")
)
_AND_SO_OR = frozenset(("and", "so", "or"))
_SUBJECT_WORDS = frozenset(
    ("i", "my", "we", "he", "she", "they", "it", "you", "there", "our", "his", "her", "their")
)


def _may_break(low: str, runs: list[str]) -> bool:
    """False when folded `low` (its runs of \\w: `runs`) holds no match of _BREAK_GATE: each of its
    alternatives needs "(", ")", "-", or one of its words as a whole word (a subject after a
    comma, a colon or and/so/or)."""
    if "(" in low or ")" in low or "-" in low or not _BREAK_WORDS.isdisjoint(runs):
        return True
    return ("," in low or ":" in low or not _AND_SO_OR.isdisjoint(runs)) and not _SUBJECT_WORDS.isdisjoint(
        runs
    )


_STARTS_I = lazy(r"\W*i\b", re.I)


def _repeats_a_word(runs: list[str]) -> bool:
    """True when two runs of \\w in a row (of folded text) are the same: every stutter has them."""
    if len(set(runs)) == len(runs):
        return False
    return any(map(operator.eq, runs, runs[1:]))


_OPEN_WORDS = frozenset(
    [
        "of",
        "to",
        "in",
        "is",
        "are",
        "am",
        "was",
        "my",
        "our",
        "a",
        "an",
        "the",
        "and",
        "or",
        "with",
        "for",
        "at",
        "from",
        "about",
        "me",
        "called",
        "named",
        "like",
        "love",
        "prefer",
        "adore",
        "hate",
        "stand",
        "i'm",
        "im",
    ]
)


def _emoji_break(m: re.Match[str]) -> str:
    """A sentence break for an emoji between two thoughts, a space after a word that wants more."""
    before = m.string[: m.start()].split()
    return " " if not before or before[-1].lower() in _OPEN_WORDS else "\n"


_ABBREV_ENDS = tuple(a[:-1] for a in _ABBREV_NEEDS)  # "mr", "e.g": each with its "." after it


def _has_abbreviation(low: str) -> bool:
    """has_any(low, _ABBREV_NEEDS): the letters before each "." (few) instead of 14 scans."""
    at = low.find(".")
    while at >= 0:
        if low[max(0, at - 6) : at].endswith(_ABBREV_ENDS):
            return True
        at = low.find(".", at + 1)
    return False


def sentences(text: str) -> list[str]:
    """The sentences of a message, with their final punctuation."""
    if not text.isascii():  # quotes, dashes and emoji are all outside ASCII
        # An emoji between words ends a thought ("Ben here 👋 moved to Oslo"): a sentence break.
        text = _EMOJI_BREAK.sub(_emoji_break, text.translate(_QUOTES))
        text = _EMOJI.sub(" ", text)
    if "." in text and _has_abbreviation(folded(text)):
        text = _ABBREV.sub(lambda m: m.group(1) + "\x01", text)
    if "\x01" in text:
        return [s.replace("\x01", ".").strip() for s in _SENTENCE_END.split(text) if s.strip()]
    return [part for s in _SENTENCE_END.split(text) if (part := s.strip())]


def is_question(sentence: str) -> bool:
    """True for a question: ends with "?", or starts like one ("do I", "where is")."""
    if "?" in sentence and _QUESTION_END.search(sentence):
        return True
    start = sentence.strip(" \"'*_-")
    # every match of _INVERTED opens with two ASCII letters of these (folded: re.I's ASCII matches)
    return folded(start[:2]) in _INVERTED_OPENINGS and _INVERTED.match(start) is not None


def clauses(sentence: str) -> list[str]:
    """The clauses of one sentence: split at conjunctions and at a comma before a new subject."""
    sentence = sentence.rstrip(".!? ")
    low = folded(sentence)
    first_runs = word_runs(low)
    runs: list[str] | None = first_runs
    if _repeats_a_word(first_runs):
        sentence = _STUTTER.sub(r"\1", sentence)
        low, runs = folded(sentence), None
    if has_any(low, _BARE_NEEDS) if runs is None else not _BARE_WORDS.isdisjoint(runs):
        sentence = _BARE_WORD.sub(lambda m: _BARE[m.group(1).translate(FOLD).lower()], sentence)
        low, runs = folded(sentence), None
    if ("=" in sentence or ":" in sentence or "-" in sentence) and has_any(low, _LABEL_NEEDS):
        for label, spoken in _LABELS:  # every label has one of ":=-" and one of its words
            sentence = label.sub(spoken, sentence, count=1)
        low, runs = folded(sentence), None
    if ("and" in low or "but" in low) and has_any(low, _ELIDED_VERBS) and _STARTS_I.match(sentence):
        sentence = _ELIDED.sub(r"\1 I ", sentence)
        low, runs = folded(sentence), None
    if not _may_break(low, word_runs(low) if runs is None else runs) or not _BREAK_GATE.search(low):
        sentence = sentence.strip(" ,")
        return [sentence] if sentence else []
    return [part for c in _CLAUSE_BREAK.split(sentence) if c and (part := c.strip(" ,"))]


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


_TRAIL_PHRASES = lazy(
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
WORD = lazy(r"[^\W\d_][\w'\-]*", 0)


# Gates. Each pattern knows, from its own source, literal strings one of which every match holds
# (`literals`); a clause holding none of them is not searched. A rule's gate is the union of the
# gates of the patterns it uses (`rule_gate`): nothing to keep in step by hand.
_Fold = tuple[str, str, frozenset[str] | None, frozenset[str], frozenset[str]]
_last_fold: _Fold = ("", "", None, frozenset(), frozenset())
# the last clause folded (every rule asks for the same one), with the index's literals it holds,
# the index's literals and its words, when known


def clause_literals(clause: str, low: str, runs: list[str], index: LiteralIndex) -> int:
    """The OR of the bits `index` gives the literals and words that `clause` (folded: `low`, its
    runs of \\w: `runs`) holds (LiteralIndex.scan).

    `triggers` reuses the literals found, and the words, as its patterns' gates.
    """
    global _last_fold
    present, mask = index.scan(low, runs)
    _last_fold = (clause, low, present, index.literals, frozenset(runs))
    return mask


def clause_words(clause: str) -> frozenset[str]:
    """The runs of \\w of folded `clause` (those clause_literals found, when it was the last clause)."""
    last, _, present, _, words = _last_fold
    if last is clause and present is not None:
        return words
    return frozenset(word_runs(folded(clause)))


def triggers(clause: str, pattern: Rx) -> list[re.Match[str]]:
    """Matches of a trigger whose clause prefix does not guard it."""
    global _last_fold
    last, low, present, known, words = _last_fold  # one tuple: a thread reads a consistent set
    if last is not clause:
        low = folded(clause)
        present, known = None, frozenset()
        _last_fold = (clause, low, None, known, known)
    if pattern.literal_set is not None:
        if present is None:
            if not pattern.gate_passes(low):
                return []
        elif pattern.words.isdisjoint(words) and pattern.fragments.isdisjoint(present):
            fragments = pattern.fragments
            if fragments <= known or not any(f in low for f in fragments):
                return []  # none of its literals is there (those the index does not know: tested here)
    return [m for m in pattern.finditer(clause) if not guarded(clause[: m.start()])]


def rule_patterns(rule: Callable[..., Any]) -> list[Rx]:
    """The `Rx` patterns a rule's code names (nested code included)."""
    names: set[str] = set()
    codes = [rule.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return [v for n in names if isinstance(v := rule.__globals__.get(n), Rx)]


def rule_gate(rule: Callable[..., Any]) -> tuple[str, ...] | None:
    """The literals one of which a rule's every finding needs: its patterns' gates, together.

    The patterns are the `Rx` objects the rule's code names (nested code included); a rule with
    one pattern that has no gate, or with none, is always run (None).
    """
    gates = [pt.literals for pt in rule_patterns(rule)]
    if not gates or any(g is None for g in gates):
        return None
    return tuple(sorted(set().union(*gates)))  # type: ignore[arg-type]
