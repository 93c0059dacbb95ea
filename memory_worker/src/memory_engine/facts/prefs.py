"""Fact rules about the speaker's preferences, favourites, pets and family."""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory_engine.facts.clauses import (
    ADV,
    I_,
    I_AM_,
    WORD,
    FactChange,
    clause_words,
    clean,
    folded,
    guarded,
    is_name_word,
    protect_binomials,
    restore,
    strip_trailing,
    triggers,
)
from memory_engine.facts.lexicon import (
    COGNITIVE_VERBS,
    DETERMINERS,
    GONE_WORDS,
    PRONOUN_TOKENS,
    RELATIONS,
    SPECIES,
    VAGUE_START,
    VAGUE_VALUES,
)
from memory_engine.facts.patterns import alternation, lazy, rx

# -- preferences and favourites ------------------------------------------------------------

_LIKE_WORDS: tuple[str, ...] = (
    "like",
    "love",
    "enjoy",
    "adore",
    "liked",
    "loved",
    "enjoyed",
    "adored",
    "fan",
    "into",
)
_LIKE_WORDS += ("crazy", "obsessed", "passionate", "mad", "keen", "fond", "hooked", "enough")
_DISLIKE_WORDS: tuple[str, ...] = (
    "dislike",
    "hate",
    "detest",
    "loathe",
    "despise",
    "abhor",
    "stand",
    "bear",
    "stomach",
)
_DISLIKE_WORDS += ("like", "enjoy", "care", "fan", "into", "keen", "fond")
_LIKE = rx(
    I_ + r"\s+" + ADV + r"(?:like|love|enjoy|adore)\s+"
    r"|" + I_ + r"(?:'ve|\s+have)\s+" + ADV + r"(?:liked|loved|enjoyed|adored)\s+"
    r"|" + I_ + r"(?:'m|\s+am)\s+" + ADV + r"(?:(?:a\s+)?(?:big\s+|huge\s+|massive\s+|great\s+|total\s+)?"
    r"fan\s+of|into|crazy\s+about|obsessed\s+with|passionate\s+about|mad\s+about|keen\s+on|fond\s+of|"
    r"in\s+love\s+with|hooked\s+on)\s+"
    r"|" + I_ + r"\s+" + ADV + r"can(?:'t|not|\s+not)\s+get\s+enough\s+of\s+",
    first="i",
)
_PREFER = rx(I_ + r"\s+" + ADV + r"(?:much\s+)?prefer\s+(?!to\s)", first="i")
_OVER = lazy(r"\s+(?:to|over|rather\s+than|instead\s+of)\s+")
_DISLIKE = rx(
    I_ + r"\s+" + ADV + r"(?:dislike|hate|detest|loathe|despise|abhor)\s+"
    r"|" + I_ + r"\s+" + ADV + r"(?:can't|cannot|can\s+not|cant)\s+(?:stand|bear|stomach)\s+"
    r"|" + I_ + r"\s+" + ADV + r"(?:don't|do\s+not|dont)\s+" + ADV + r"(?:like|enjoy|care\s+for)\s+"
    r"|" + I_ + r"(?:'m|\s+am)\s+" + ADV + r"not\s+" + ADV + r"(?:(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of|"
    r"into|keen\s+on|fond\s+of)\s+",
    first="i",
)
_NO_LONGER = rx(
    I_AM_ + ADV + r"no\s+longer\s+(?:(?:a\s+)?(?:big\s+|huge\s+)?fan\s+of|into|keen\s+on|fond\s+of)\s+"
    r"|" + I_ + r"\s+" + ADV + r"(?:no\s+longer\s+(?:like|love|enjoy)|(?:have\s+)?stopped\s+(?:liking|loving|"
    r"enjoying))\s+"
    r"|" + I_ + r"\s+" + ADV + r"(?:don't|do\s+not|dont)\s+" + ADV + r"love\s+(?=.*\bany\s?more\b)",
    first="i",
)
_ANYMORE = lazy(r"\b(?:any\s?more|no\s+more|no\s+longer)\b")
_VALUE_END = lazy(
    r"\s+(?:haha|lol|lmao|tbh|fight\s+me|obviously|of\s+course|"
    r"because|since|when|whenever|while|if|unless|until|after|before|where|"
    r"as\s+long\s+as|so\s+much|more\s+than|better\s+than|rather\s+than|than|instead\s+of|except|but|"
    r"even\s+though|whether)\b|[.!?;:]"
)
_LIST_SPLIT = lazy(r"\s*,\s*(?:and\s+|or\s+|&\s+)?|\s+(?:and|or|&|as\s+well\s+as|plus|along\s+with)\s+")


def _gerund(verb: str) -> str:
    """ "cook" -> "cooking", "swim" -> "swimming", "dance" -> "dancing"."""
    v = verb.lower()
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")) and len(v) > 2:
        return v[:-1] + "ing"
    vowels = "aeiou"
    if (
        len(v) >= 3
        and v[-1] not in vowels + "wxy"
        and v[-2] in vowels
        and v[-3] not in vowels
        and len(re.findall(r"[aeiou]+", v)) == 1
    ):
        return v + v[-1] + "ing"
    return v + "ing"


def _items(rest: str) -> list[str]:
    """The items of a preference list ("hiking, black coffee and old jazz records")."""
    rest = " " + rest.split("http", 1)[0]  # a link is no item ("trails, see https://...")
    end = _VALUE_END.search(rest)
    rest = protect_binomials(strip_trailing(rest[: end.start()] if end else rest))
    parts = [restore(p) for p in _LIST_SPLIT.split(rest.strip())]
    infinitive = parts[0].lower().startswith("to ") if parts else False
    items: list[str] = []
    for part in parts:
        words = clean(part).split()
        if infinitive and words:
            if words[0].lower() == "to" and len(words) > 1 and words[1].islower():
                words = words[1:]
            if words[0].lower() in COGNITIVE_VERBS:
                return []
            if words[0].lower() == "go" and len(words) > 1 and words[1].endswith("ing"):
                words = words[1:]  # "to go hiking" -> "hiking"
            elif words[0].isalpha() and words[0].islower() and words[0] not in VAGUE_START:
                words = [_gerund(words[0]), *words[1:]]
        item = _item(words)
        relative = _RELATIVE.search(" ".join(words))
        if item is None and relative:  # "books that make me think": keep "books"
            item = _item(" ".join(words)[: relative.start()].split())
        if item:
            items.append(item)
    return items


_RELATIVE = lazy(r"\s+(?:that|which|who|whom|what|how|why)\b")


def _item(words: list[str]) -> str | None:
    """One list item, or None when it is vague, a clause, or too long to be one thing."""
    low = [w.lower() for w in words]
    if (
        not words
        or len(words) > 6
        or len(" ".join(words)) < 2
        or low[0] in VAGUE_START
        or " ".join(low) in VAGUE_VALUES
        or " ".join(low[:2]) in VAGUE_VALUES
        or any(w in PRONOUN_TOKENS for w in low)
        or low in (["see"], ["check"], ["look"], ["go"])  # "..., see https://...": a pointer, no item
    ):
        return None
    return " ".join(words)


def preferences(clause: str) -> Iterator[FactChange]:
    taken: list[tuple[int, int]] = []
    for m in triggers(clause, _NO_LONGER):
        taken.append(m.span())
        for item in _items(strip_trailing(clause[m.end() :])):
            yield FactChange("likes", item, remove_from="likes", add=False)
    for m in triggers(clause, _DISLIKE):
        if any(a <= m.start() < b for a, b in taken):
            continue
        taken.append(m.span())
        rest = clause[m.end() :]
        gone = bool(_ANYMORE.search(rest))
        for item in _items(rest):
            if gone:  # "I don't like broccoli anymore": no longer liked, not said to be hated
                yield FactChange("likes", item, remove_from="likes", add=False)
            else:
                yield FactChange("dislikes", item, remove_from="likes")
    for m in triggers(clause, _LIKE):
        if any(a <= m.start() < b for a, b in taken):
            continue
        for item in _items(clause[m.end() :]):
            yield FactChange("likes", item, remove_from="dislikes")
    for m in triggers(clause, _PREFER):  # "I prefer tea to coffee": the first one is liked
        rest = clause[m.end() :]
        over = _OVER.search(rest)
        for item in _items(rest[: over.start()] if over else rest):
            yield FactChange("likes", item, remove_from="dislikes")


_FAV = r"(?:all[- ]time\s+|absolute\s+|current\s+|personal\s+|very\s+)?(?:fav(?:ou?rite)?|fave)"
_THING = r"(?P<thing>[a-z][a-z\-]*(?:\s+[a-z][a-z\-]*){0,2}?)"
_WHEN = r"(?:\s+(?:right\s+now|at\s+the\s+moment|these\s+days|currently|lately|of\s+all\s+time|ever))?"
_FAV_WORDS = ("fav", "fave", "favorite", "favourite")
_FAVORITE = rx(r"\bmy\s+" + _FAV + r"\s+" + _THING + _WHEN + r"(?:\s+is|'s|\s+are)\s+", first="m")
_FAVORITE_LAST = rx(
    r"^(?P<value>.{1,60}?)\s+(?:is|are)\s+(?:definitely\s+|probably\s+|still\s+|easily\s+|totally\s+)?"
    r"my\s+" + _FAV + r"\s+" + _THING + r"$"
)


_AFTERTHOUGHT = lazy(
    r",\s*(?:obviously|of course|lol|haha|tbh|honestly|btw|though|tho|i guess|i think|duh)\W*$"
)


def _favorite_value(value: str) -> str | None:
    value = clean(_AFTERTHOUGHT.sub("", value))
    words = value.split()
    if not words or len(words) > 8 or words[0].lower() in VAGUE_START or value.lower() in VAGUE_VALUES:
        return None
    return value


def favorites(clause: str) -> Iterator[FactChange]:
    found: list[tuple[str, str | None]] = []
    for m in triggers(clause, _FAVORITE):
        rest = " " + clause[m.end() :]
        end = _VALUE_END.search(rest)
        found.append((m.group("thing"), _favorite_value(rest[: end.start()] if end else rest)))
    last = _FAVORITE_LAST.match(clause)
    if last and not guarded(last.group("value")):
        found.append((strip_trailing(last.group("thing")), _favorite_value(last.group("value"))))
    for thing, value in found:
        words = [w for w in thing.lower().split() if w not in ("ever",)]
        if value and words and words[0] not in VAGUE_START:
            yield FactChange("favorite_" + "_".join(words), value)


# -- pets and family -----------------------------------------------------------------------

_KIN_LIST = sorted([*SPECIES, *RELATIONS], key=len, reverse=True)
_KIN = "|".join(re.escape(k) for k in _KIN_LIST)
_KIN_TREE = alternation(_KIN_LIST)  # the same matches; about 200 words tried as a tree of prefixes
# The first word of each pet or relative ("golden" retriever, "half"-brother): one is in every match.
_KIN_WORDS = tuple(sorted({k.replace("-", " ").split()[0] for k in [*SPECIES, *RELATIONS]}))
# Whitespace comes before a match's pet or relative, and no word character after its first word:
# that word is a whole word of the folded clause. Most clauses with "my" or "have" hold none.
_KIN_GATE = frozenset([*_KIN_WORDS, *map(folded, _KIN_WORDS)])
_MY_KIN_SOURCE = (
    r"\b(?:my|our)\s+(?P<adj>(?:[a-z\-]+\s+){0,2}?)(?P<kin>KIN)"
    r"(?:'s\s+names?\s+(?:is|are)\s+|\s+(?:is|are)\s+(?:called|named)\s+|\s*,\s*|\s+(?:named\s+|called\s+)?)"
    r"(?=(?-i:[^\W\d_a-z]))"
)
_MY_KIN = rx(
    _MY_KIN_SOURCE.replace("KIN", _KIN),
    first="mo",
    fast=_MY_KIN_SOURCE.replace("KIN", _KIN_TREE),
)
_HAVE_KIN_SOURCE = (
    r"\b(?:" + I_ + r"|we)(?:'ve|\s+have)?\s+" + ADV + r"(?:have|got|have\s+got|adopted|own)\s+"
    r"(?:a|an|one|two|three|four|five|\d)\s+(?P<adj>(?:[a-z\-]+\s+){0,2}?)(?P<kin>KIN)"
    r"(?:\s*[,:]\s*|\s+(?:named|called)\s+)(?=[^\W\d_])"
)
_HAVE_KIN = rx(
    _HAVE_KIN_SOURCE.replace("KIN", _KIN),
    first="iw",
    fast=_HAVE_KIN_SOURCE.replace("KIN", _KIN_TREE),
)
_NAME_LIST = lazy(r"\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)", 0)


def _kin_names(rest: str, plural: bool) -> list[str]:
    names: list[str] = []
    pos = 0
    while True:
        m = WORD.match(rest, pos)
        if not m:
            break
        name = re.sub(r"'s$", "", m.group())
        if not is_name_word(name):
            break
        names.append(name)
        sep = _NAME_LIST.match(rest, m.end())
        if not plural or not sep:
            break
        pos = sep.end()
    return names


def kin(clause: str) -> Iterator[FactChange]:
    # the triggers first (gated, rarely there), then the words that make them past
    if _KIN_GATE.isdisjoint(clause_words(clause)):
        return
    found = [m for pattern in (_MY_KIN, _HAVE_KIN) for m in triggers(clause, pattern)]
    if not found:
        return
    if any(w in GONE_WORDS for w in re.findall(r"[a-z]+", clause.lower())) or re.search(
        r"\bpassed\s+away\b", clause, re.I
    ):
        return
    for m in found:
        adj = m.group("adj").split()
        if any(a in GONE_WORDS or a in DETERMINERS for a in adj):
            continue
        kin = m.group("kin").lower()
        key, label = ("pets", SPECIES[kin]) if kin in SPECIES else ("family", RELATIONS[kin])
        plural = label != kin or kin.endswith("s")
        for name in _kin_names(clause[m.end() :], plural):
            yield FactChange(key, f"{name} ({label})")
