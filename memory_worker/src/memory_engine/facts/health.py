"""Fact rules for what a helpful answer about food and talk needs: diet, allergies, languages."""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory_engine.facts.clauses import ADV, I_, FactChange, triggers
from memory_engine.facts.patterns import lazy, rx

__all__ = ["DIET_WORDS", "allergy_items", "diet_value", "health", "language_items", "languages"]

# Each diet as people write it, and the one value stored for it.
_DIETS = {
    "vegan": "vegan",
    "vegetarian": "vegetarian",
    "veggie": "vegetarian",
    "pescatarian": "pescatarian",
    "pescetarian": "pescatarian",
    "keto": "keto",
    "paleo": "paleo",
    "halal": "halal",
    "kosher": "kosher",
    "gluten free": "gluten-free",
    "gluten-free": "gluten-free",
    "dairy free": "dairy-free",
    "dairy-free": "dairy-free",
    "plant based": "plant-based",
    "plant-based": "plant-based",
    "lactose intolerant": "lactose-free",
    "lactose-intolerant": "lactose-free",
    "low carb": "low carb",
    "low-carb": "low carb",
}
DIET_WORDS = frozenset(k.split()[0].split("-")[0] for k in _DIETS) - {"low", "dairy", "lactose"}
_DIET = "(?P<diet>" + "|".join(sorted((re.escape(k) for k in _DIETS), key=len, reverse=True)) + r")\b"
_I_AM_DIET = rx(
    I_
    + r"(?:'m|\s+am|'ve\s+been|\s+have\s+been)\s+"
    + ADV
    + r"(?:an?\s+)?(?:strict\s+|full\s+)?"
    + _DIET
    + r"(?!\s+(?:food|restaurant|place|recipe|option|meal|friend|people)s?\b)",
    first="i",
)
_DIET_HERE = rx(r"^\W*" + _DIET + r"\s+here\b")
_EAT_DIET = rx(
    r"(?:"
    + I_
    + r"\s+"
    + ADV
    + r"(?:eat|keep|follow)|"
    + I_
    + r"(?:'m|\s+am)\s+on)\s+(?:an?\s+)?(?:strict\s+)?"
    + _DIET
    + r"(?:\s+diet)?",
    first="i",
)
_NO_MEAT = rx(I_ + r"\s+(?:don't|do\s+not|dont)\s+eat\s+(?:meat|any\s+meat)\b", first="i")
_ALLERGIC = rx(
    I_
    + r"(?:'m|\s+am)\s+"
    + ADV
    + r"(?:(?:very|severely|deathly|super|so|mildly|highly)\s+)?allergic\s+to\s+"
    r"|" + I_ + r"(?:'ve|\s+have)?\s+(?:got\s+)?allergies\s+to\s+",
    first="i",
)
_ALLERGY = rx(
    r"(?:" + I_ + r"(?:'ve|\s+have)?\s+(?:got\s+)?(?:an?\s+)?|^\W*)(?:(?:severe|bad|mild|serious|bad)\s+)?"
    r"(?P<thing>[a-z]+)\s+allergy\b(?!\s+(?:season|meds|medicine|test))",
)
# Things people say they are "allergic to" that are no allergy ("allergic to mondays").
_NOT_ALLERGENS = frozenset(
    [
        "work",
        "mondays",
        "monday",
        "people",
        "life",
        "everything",
        "anything",
        "nothing",
        "school",
        "exercise",
        "effort",
        "you",
        "him",
        "her",
        "them",
        "it",
        "this",
        "that",
        "responsibility",
        "commitment",
        "mornings",
        "drama",
        "math",
        "maths",
        "homework",
        "adulting",
    ]
)
_SINGULAR_ALLERGENS = {
    "nut": "nuts",
    "peanut": "peanuts",
    "egg": "eggs",
    "tree nut": "tree nuts",
    "bee": "bees",
}
_ITEM_SPLIT = lazy(r"\s*(?:,|;|/|\band\b|\bor\b|&|\+)\s*", re.I)
_ITEM_END = lazy(
    r"\s+(?:so|which|because|cause|since|but|when|life|lol|haha|tbh|btw|here|too|though|at|to|from)\b"
    r"|[.!?;:(]|\s-\s",
    re.I,
)


def diet_value(text: str) -> str | None:
    """The stored diet for a diet word ("Vegetarian", "gluten free"), or None."""
    return _DIETS.get(" ".join(text.lower().replace("-", " ").split()))


def allergy_items(text: str) -> list[str]:
    """The allergens listed at the start of `text` ("cats AND dogs, life is hard" -> cats, dogs)."""
    end = _ITEM_END.search(text)
    text = text[: end.start()] if end else text
    out: list[str] = []
    for n, part in enumerate(_ITEM_SPLIT.split(text)):
        words = part.lower().split()
        if n and len(words) > 2:
            break  # "allergic to bees, carry an epipen": the list ended at the comma
        if not words or len(words) > 3 or any(w in _NOT_ALLERGENS for w in words):
            if words and any(w in _NOT_ALLERGENS for w in words):
                return []
            continue
        item = " ".join(words).strip(" .,!")
        if item:
            out.append(_SINGULAR_ALLERGENS.get(item, item))
    return out


def health(clause: str) -> Iterator[FactChange]:
    """Diet and allergies: "I'm vegan", "I keep kosher", "I'm allergic to cats and dogs"."""
    for pattern in (_I_AM_DIET, _EAT_DIET, _DIET_HERE):
        for m in triggers(clause, pattern):
            yield FactChange("diet", _DIETS[" ".join(m.group("diet").lower().split())])
    for _ in triggers(clause, _NO_MEAT):
        yield FactChange("diet", "vegetarian")
    for m in triggers(clause, _ALLERGIC):
        for item in allergy_items(clause[m.end() :]):
            yield FactChange("allergies", item)
    for m in triggers(clause, _ALLERGY):
        thing = m.group("thing").lower()
        if thing not in _NOT_ALLERGENS and thing not in ("an", "a", "the", "my", "some"):
            yield FactChange("allergies", _SINGULAR_ALLERGENS.get(thing, thing))


# -- languages -------------------------------------------------------------------------------

LANGUAGES = frozenset(
    [
        "english",
        "spanish",
        "french",
        "german",
        "italian",
        "portuguese",
        "dutch",
        "swedish",
        "norwegian",
        "danish",
        "finnish",
        "icelandic",
        "polish",
        "czech",
        "slovak",
        "hungarian",
        "romanian",
        "bulgarian",
        "serbian",
        "croatian",
        "bosnian",
        "slovenian",
        "albanian",
        "greek",
        "turkish",
        "russian",
        "ukrainian",
        "belarusian",
        "lithuanian",
        "latvian",
        "estonian",
        "georgian",
        "armenian",
        "azerbaijani",
        "kazakh",
        "uzbek",
        "persian",
        "farsi",
        "dari",
        "pashto",
        "kurdish",
        "arabic",
        "hebrew",
        "amharic",
        "somali",
        "swahili",
        "yoruba",
        "igbo",
        "hausa",
        "zulu",
        "xhosa",
        "afrikaans",
        "twi",
        "wolof",
        "lingala",
        "kinyarwanda",
        "malagasy",
        "hindi",
        "urdu",
        "bengali",
        "bangla",
        "punjabi",
        "gujarati",
        "marathi",
        "tamil",
        "telugu",
        "kannada",
        "malayalam",
        "sinhala",
        "nepali",
        "mandarin",
        "cantonese",
        "chinese",
        "japanese",
        "korean",
        "vietnamese",
        "thai",
        "lao",
        "khmer",
        "burmese",
        "malay",
        "indonesian",
        "tagalog",
        "filipino",
        "cebuano",
        "maori",
        "samoan",
        "tongan",
        "hawaiian",
        "catalan",
        "basque",
        "galician",
        "welsh",
        "irish",
        "gaelic",
        "breton",
        "maltese",
        "luxembourgish",
        "esperanto",
        "latin",
        "yiddish",
        "quechua",
        "guarani",
        "aymara",
        "nahuatl",
        "mongolian",
        "tibetan",
        "uyghur",
        "tajik",
        "kyrgyz",
        "turkmen",
        "sign",
        "asl",
        "bsl",
        "creole",
        "haitian",
        "patois",
    ]
)
_LANG_PREFIX = lazy(
    r"^(?:(?:a\s+(?:little\s+)?(?:bit\s+(?:of\s+)?)?|some\s+|basic\s+|fluent\s+|native\s+|conversational\s+|"
    r"broken\s+|decent\s+|good\s+|ok\s+|okay\s+)+)",
    re.I,
)
_PLACE_WORDS = ("at", "with", "to", "in", "for", "on")  # "Swahili at home and English at work"
_LANG_SPLIT = lazy(r"\s*(?:,|;|/|\band\b|\bplus\b|&|\+)\s*", re.I)


def language_items(text: str) -> list[str]:
    """The languages listed at the start of `text`, title-cased; [] when the list has a non-language."""
    text = re.sub(r"^\s*(?:\d+|two|three|four|five)\s+languages?\s*[:,\-]?\s*", "", text, flags=re.I)
    out: list[str] = []
    for part in _LANG_SPLIT.split(text):
        part = _LANG_PREFIX.sub("", part.strip(" .!")).strip()
        words = part.split()
        if not words:
            continue
        lang = words[0].lower().strip(".,!")
        if lang not in LANGUAGES:
            break  # "I speak Spanish at home": the list ends where the languages do
        out.append(lang.upper() if lang in ("asl", "bsl") else lang.capitalize())
        if len(words) > 1 and words[1].lower() not in ("speaker", "fluently", "natively", *_PLACE_WORDS):
            break
    return out


_SPEAK = rx(
    I_ + r"\s+" + ADV + r"(?:can\s+)?(?:speak|speaks)\s+"
    r"|" + I_ + r"(?:'m|\s+am)\s+" + ADV + r"(?:fluent|native|conversational)\s+in\s+"
    r"|" + I_ + r"(?:'m|\s+am)\s+(?:bilingual|trilingual|multilingual)\s*(?:[,:(\-]|in)\s*"
    r"|" + I_ + r"(?:'m|\s+am)\s+an?\s+native\s+(?=\w+\s+speaker)"
    r"|\bmy\s+(?:native|first|mother|home)\s+(?:language|tongue)\s+is\s+"
    r"|^\W*(?:native|fluent)\s+(?:in\s+)?(?=\w+\s+(?:speaker|here))",
)


def languages(clause: str) -> Iterator[FactChange]:
    """Languages the speaker speaks: "I speak Spanish and a little Japanese", "fluent in Polish"."""
    for m in triggers(clause, _SPEAK):
        for lang in language_items(clause[m.end() :]):
            yield FactChange("languages", lang)
