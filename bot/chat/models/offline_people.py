"""Who is who for the offline model: the people of a chat, their facts, and how a fact reads aloud.

A person is one author id with the display name their messages carry and the facts stored about
them; a question names one of them ("Where does Ben live?", "Ana's dog"), or the asker ("my",
"I"), or nobody ("Who has a car?"). Answers name whose fact it is: "Ben lives in Oslo", and for
the asker "You live in Oslo".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memory_engine.api import wire


def _split(text: str) -> list[str]:
    return text.split()


LIST_KEYS = frozenset({"likes", "dislikes", "pets", "family", "allergies", "languages", "alias", "health"})
# Letters NFKD leaves whole: folded by hand so "Małgorzata" is "malgorzata" and "Søren" "soren".
_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "ı": "i", "þ": "th"})

# Words of a display name that a question uses as plain words ("The Bot", "Mr Smith").
_NOT_NAMES = frozenset(
    [
        "the",
        "and",
        "von",
        "van",
        "der",
        "den",
        "del",
        "della",
        "des",
        "mrs",
        "miss",
        "bot",
        "official",
        "admin",
        "team",
    ]
)

# Question words that may begin a name ("what" of "Whatley"): never a short form of one.
_COMMON = frozenset(
    _split(
        "what whats where when which who whom whose why how does did is are was were has have had the "
        "and for with about your you old live lives work works job called name named from allergic "
        "speak speaks anyone everyone someone pet pets dog dogs cat cats"
    )
)

# How each key reads: (for the asker, for someone else). {who}: "Ben", {poss}: "Ben's"/"Your".
_TEMPLATES: dict[str, tuple[str, str]] = {
    "name": ("Your name is {value}.", "{poss} name is {value}."),
    "location": ("You live in {value}.", "{who} lives in {value}."),
    "job": ("You work as {value}.", "{who} works as {value}."),
    "employer": ("You work at {value}.", "{who} works at {value}."),
    "age": ("You are {value}.", "{who} is {value}."),
    "birthday": ("Your birthday is {value}.", "{poss} birthday is {value}."),
    "pronouns": ("Your pronouns are {value}.", "{poss} pronouns are {value}."),
    "likes": ("You like {value}.", "{who} likes {value}."),
    "dislikes": ("You don't like {value}.", "{who} doesn't like {value}."),
    "pets": ("Your pets: {value}.", "{poss} pets: {value}."),
    "family": ("Your family: {value}.", "{poss} family: {value}."),
    "diet": ("Your diet: {value}.", "{poss} diet: {value}."),
    "allergies": ("You are allergic to {value}.", "{who} is allergic to {value}."),
    "languages": ("You speak {value}.", "{who} speaks {value}."),
    "health": ("You are {value}.", "{who} is {value}."),
    "hometown": ("You are from {value}.", "{who} is from {value}."),
    "alias": ("People call you {value}.", "People call {who} {value}."),
}


def fold(text: str) -> str:
    """Case- and accent-folded text ("José" -> "jose", "Małgorzata" -> "malgorzata")."""
    low = text.casefold()
    if low.isascii():
        return low
    low = unicodedata.normalize("NFKD", low.translate(_LETTERS))
    return "".join(c for c in low if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """Case- and accent-folded word tokens, any script ("José's" -> "jose", "s")."""
    return re.findall(r"\w+", fold(text).replace("favourite", "favorite"))


@dataclass
class Person:
    """One author of the chat: their names and current facts (key -> value)."""

    author_id: str
    display: str
    facts: dict[str, str] = field(default_factory=dict)

    def names(self) -> set[str]:
        """The words a question may call them by: display name, stated name and aliases, whole and first."""
        out: set[str] = set()
        aliases = [a.strip() for a in self.facts.get("alias", "").split(",")]
        for name in (self.display, self.facts.get("name", ""), *aliases):
            words = tokens(name)
            if words:
                out.add(" ".join(words))
                out.add(words[0])
        # "Lan" of "Nguyễn Thị Lan", "Bell" of "Marcus Bell": any word of the display name
        out.update(w for w in tokens(self.display) if len(w) > 2 and w not in _NOT_NAMES)
        return {n for n in out if len(n) > 1}

    def label(self) -> str:
        """How an answer names them: the display name (or the name they stated)."""
        return self.display or self.facts.get("name", "") or "someone"


def people(facts: Iterable[wire.Fact], messages: Iterable[wire.Message]) -> dict[str, Person]:
    """Everyone in the chat by author id, with their current facts (the first value of a key wins)."""
    found: dict[str, Person] = {}
    for m in messages:
        aid = str(m.get("author_id") or "")
        if aid and m.get("role", "user") == "user" and aid not in found:
            found[aid] = Person(aid, str(m.get("author") or ""))
    for f in facts:
        if f.get("kind", "fact") != "fact":
            continue
        aid = str(f.get("author_id") or f.get("author") or "")
        person = found.setdefault(aid, Person(aid, str(f.get("author") or "")))
        if not person.display:
            person.display = str(f.get("author") or "")
        person.facts.setdefault(str(f.get("key", "")).lower(), str(f.get("value", "")))
    return found


def named_in(question: list[str], everyone: Mapping[str, Person], asker: str) -> Person | None:
    """The person a question names ("Ana's dog", "where does Ben live"), the longest name first.

    A word that is no one's name but starts one person's first name ("hiro" for Hiroshi, "dani"
    for Dániel) names them when it fits nobody else.
    """
    text = " " + " ".join(question) + " "
    best: tuple[int, Person | None] = (0, None)
    for person in everyone.values():
        for name in person.names():
            if f" {name} " in text and len(name) > best[0]:
                best = (len(name), person)
    if best[1] is not None:
        return best[1]
    for word in question:
        if len(word) < 3 or word in _COMMON:
            continue
        fits = {
            p.author_id: p
            for p in everyone.values()
            for n in p.names()
            if n.startswith(word) and " " not in n
        }
        if len(fits) == 1:
            return next(iter(fits.values()))
    return None


def join(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def phrase(key: str, value: str, words: set[str], who: Person | None) -> str:
    """The answer sentence for one fact of `who` (None: the asker)."""
    poss = "Your" if who is None else who.label() + "'s"
    if key.startswith("favorite_"):
        return f"{poss} favourite {key.removeprefix('favorite_').replace('_', ' ')} is {value}."
    items = [i.strip() for i in value.split(",") if i.strip()] if key in LIST_KEYS else [value]
    if key in ("pets", "family"):
        # "Biscuit (dog)": name it by what was asked about ("your dog is Biscuit").
        asked = [i for i in items if set(tokens(i)) & words - {"name", "called"}]
        if asked:
            return " ".join(_member(i, poss) for i in asked)
    items = [shown(key, i) for i in items]
    mine, theirs = _TEMPLATES.get(key, ("Your " + key.replace("_", " ") + " is {value}.", ""))
    template = mine if who is None else theirs or "{poss} " + key.replace("_", " ") + " is {value}."
    return template.format(
        value=join(items or [shown(key, value)]), who=poss[:-2] if who else "You", poss=poss
    )


def _member(item: str, poss: str) -> str:
    # "Rex (dog)": the first "(" after a name, and a ")" that ends the item (no regex: linear).
    at = item.find("(", 1)
    if at < 0 or not item.endswith(")") or at == len(item) - 2:
        return f"{item}."
    return f"{poss} {item[at + 1 : -1]} is {item[:at].rstrip()}."


def shown(key: str, value: str) -> str:
    """A fact's value as an answer says it: a job with its article, a place with its capitals."""
    if key == "job":
        return with_article(value)
    if key == "location":
        return place_name(value)
    return value


# First words that need no article ("the head chef", "in marketing"), and jobs that are no
# countable noun ("works as freelance").
_DETERMINERS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "his",
        "her",
        "their",
        "our",
        "your",
        "one",
        "another",
        "in",
        "at",
        "for",
        "with",
    ]
)
_UNCOUNTED = frozenset(
    [
        "freelance",
        "self-employed",
        "retired",
        "unemployed",
        "staff",
        "management",
        "security",
        "support",
        "sales",
        "marketing",
        "finance",
        "hr",
        "it",
        "admin",
        "research",
    ]
)
# Spelled with a vowel, said with a consonant (and the other way round).
_SAID_CONSONANT = ("uni", "use", "usu", "uti", "ure", "eu", "one", "once")
_SAID_VOWEL = ("hour", "honest", "honor", "honour", "heir")


def with_article(value: str) -> str:
    """ "nurse" -> "a nurse", "engineer" -> "an engineer"; a plural, a word like "freelance",
    or a value that has its own article stays as it is."""
    words = value.split()
    if not words:
        return value
    first, last = words[0].lower(), words[-1].lower()
    if first in _DETERMINERS or (len(words) == 1 and first in _UNCOUNTED):
        return value
    if last.endswith("s") and not last.endswith(("ss", "us", "is")):  # "nurses": no article
        return value
    vowel = first[:1] in "aeiou" and not first.startswith(_SAID_CONSONANT)
    return f"{'an' if vowel or first.startswith(_SAID_VOWEL) else 'a'} {value}"


# The small words of place names, kept in lower case after the first word ("Rio de Janeiro").
_PLACE_PARTICLES = frozenset(
    [
        "de",
        "da",
        "do",
        "dos",
        "das",
        "del",
        "della",
        "di",
        "du",
        "la",
        "le",
        "les",
        "van",
        "von",
        "der",
        "den",
        "of",
        "upon",
        "on",
        "en",
        "y",
        "e",
        "am",
        "im",
        "sur",
        "sobre",
    ]
)


def place_name(value: str) -> str:
    """A place as a name: "rio de janeiro" -> "Rio de Janeiro"; one written with capitals stays."""
    if value != value.lower():
        return value

    def word(w: str, first: bool) -> str:
        return w if (w in _PLACE_PARTICLES and not first) else w[:1].upper() + w[1:]

    words = [w.split("-") for w in value.split()]
    return " ".join("-".join(word(p, i == j == 0) for j, p in enumerate(w)) for i, w in enumerate(words))
