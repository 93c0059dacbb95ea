"""Facts said as the answer to someone's question, or with what they are about in the message before.

In a group, people answer: "what do you all do for work?" "accountant 😴", "how many dogs do you
have?" "two, Rex and Ash", "where are you from?" "Sevilla!", "anyone vegetarian?" "me! since
2020"; and they say "i'm allergic" right after someone offers cashew cookies. The message alone
states nothing; with the message before it (`before`: the chat's previous message, someone
else's question for an answer) it does. Only the first part of the answer counts, and only when
the question is one of the kinds below; a negative or hedged answer states nothing.
"""

from __future__ import annotations

import re

from memory_engine.facts.clauses import FactChange
from memory_engine.facts.health import LANGUAGES
from memory_engine.facts.lexicon import JOBS, NOT_NAMES, PLACE_STOP, SPECIES, TIME_WORDS
from memory_engine.facts.patterns import lazy


def _split(text: str) -> list[str]:
    return text.split()


MAX_ANSWER = 160  # an answer is short; a long message states its facts itself
_YOU = r"(?:you|u|ya|y'all|yall|you all|u all|you guys|everyone|everybody|anyone|any1|anybody|ppl)"
# The kinds of fact a question asks for, each with a pattern of the question, in order.
ASKS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(source, re.I))
    for kind, source in (
        ("job", rf"\bwhat\s+(?:do|does)\s+{_YOU}\b[^?]*\b(?:do|work)\b|\b(?:your|ur)\s+(?:job|work)\b"),
        ("job", rf"\bwhere\s+(?:do|does)\s+{_YOU}\s+work\b|\bwhat(?:'s| is)\s+(?:your|ur)\s+job\b"),
        ("from", rf"\bwhere\s+(?:are|r)\s+{_YOU}\s+(?:from|originally from)\b|\b(?:your|ur)\s+accent\b"),
        ("location", rf"\bwhere\s+(?:do|d')\s*{_YOU}\s+live\b|\bwhere\s+(?:are|r)\s+{_YOU}\s+based\b"),
        ("age", rf"\bhow\s+old\s+(?:are|r)\s+{_YOU}\b"),
        (
            "pets",
            rf"\b{_YOU}\b[^?]*\b(?:pets?|dogs?|cats?|animals?)\b|\b(?:pets?|dogs?|cats?)\b[^?]*\b{_YOU}\b",
        ),
        ("kids", rf"\b{_YOU}\b[^?]*\b(?:kids?|children|child)\b|\b(?:kids?|children)\b[^?]*\b{_YOU}\b"),
        ("diet", rf"\b{_YOU}\b[^?]*\b(vegetarian|vegan|pescatarian)\b"),
        ("allergies", rf"\b{_YOU}\b[^?]*\ballergic\b|\ballergies\b"),
        ("languages", rf"\b(?:do|does|what)\b[^?]*\b{_YOU}\s+speak\b"),
    )
)
_FIRST_PART = lazy(r"^[^,.;!?()\n\u2014]+", 0)
_NO = lazy(
    r"^\W*(?:no|nope|nah|not|none|never|zero|neither|nobody|not me|i don'?t|i dont|i'?m not|im not|idk|dunno|"
    r"maybe|hmm|lol no|haha no|unfortunately not)\b",
    re.I,
)
_YES = lazy(r"^\W*(?:me|me too|i am|i'?m|im|yes|yep|yeah|yup|guilty|\U0001f64b|\u270b)\b", re.I)
_NUMBER_WORDS = frozenset(_split("one two three four five six seven eight nine ten a an"))
_CAPITAL = lazy(r"\b([A-ZÀ-Þ][a-zà-ÿ'\-]+)\b", 0)
_ALLERGENS = {
    **{
        w: w
        for w in _split("peanuts nuts cashews almonds walnuts hazelnuts pistachios shellfish eggs sesame")
    },
    **{
        w: w
        for w in _split("gluten wheat soy dairy milk lactose fish shrimp prawns strawberries kiwi cats dogs")
    },
    **{w: w for w in _split("pollen penicillin latex bees mustard celery")},
    "peanut": "peanuts",
    "nut": "nuts",
    "cashew": "cashews",
    "almond": "almonds",
    "walnut": "walnuts",
    "egg": "eggs",
    "prawn": "prawns",
    "strawberry": "strawberries",
    "cat": "cats",
    "dog": "dogs",
    "bee": "bees",
}
_BARE_ALLERGIC = lazy(r"\b(?:i'?m|im|i am)\s+(?:\w+\s+){0,2}allergic\b(?!\s+to\b)", re.I)
_HEDGED = lazy(r"\b(?:if|maybe|might|think|not|don'?t|dont|never|was|used to|would)\b", re.I)
_JOB_WORD = lazy(r"[a-z]+", 0)
_LEAD = lazy(r"^\W*(?:i'?m\s+|im\s+|i am\s+)?(?:an?\s+)?", re.I)
_AT_ORG = lazy(r"\s+(?:at|@|for)\s+(?:the\s+)?([A-ZÀ-Þ][\w&'\-]*(?:\s+[A-ZÀ-Þ][\w&'\-]*){0,2})", 0)
_EXTRA_JOBS = frozenset(("physio", "medic", "dev", "swe", "cop"))


# Every match of each of ASKS holds one of its words here as a whole word: for ASCII text, a
# look-up of its words rules most questions out, and most patterns of the rest.
_ASK_NEEDS = tuple(
    frozenset(_split(words))
    for words in (
        "what job work",
        "work job",
        "from accent",
        "live based",
        "old",
        "pet pets dog dogs cat cats animal animals",
        "kid kids child children",
        "vegetarian vegan pescatarian",
        "allergic allergies",
        "speak",
    )
)
_ASK_WORDS = frozenset().union(*_ASK_NEEDS)
_NOT_WORD = str.maketrans({c: " " for c in range(128) if not (chr(c).isalnum() or c == 95)})


def asked(before: str) -> str | None:
    """What kind of fact a message asks for ("job", "pets", ...), or None when it asks none."""
    if "?" not in before and not re.match(r"^\W*(?:what|where|how|who|do|does|anyone|any1)\b", before, re.I):
        return None
    words: frozenset[str] | None = None
    if before.isascii():
        words = frozenset(before.lower().translate(_NOT_WORD).split())
        if _ASK_WORDS.isdisjoint(words):
            return None
    for (kind, pattern), needs in zip(ASKS, _ASK_NEEDS, strict=True):
        if (words is None or not needs.isdisjoint(words)) and pattern.search(before):
            return kind
    return None


def may_answer(text: str, before: str | None) -> bool:
    """Cheap: whether `text` may state something with `before` (a short answer, or "allergic")."""
    return (
        before is not None
        and len(text) <= MAX_ANSWER
        and "?" not in text
        and ("?" in before or "allergic" in text.lower())
    )


def context_facts(text: str, before: str | None, before_is_theirs: bool) -> list[FactChange]:
    """What `text` states with the chat's message `before` it (`before_is_theirs`: by the same person)."""
    if not before or len(text) > MAX_ANSWER or "?" in text:
        return []
    out: list[FactChange] = []
    low = text.lower()
    if "allergic" in low:
        bare = _BARE_ALLERGIC.search(text)
        if bare and not _HEDGED.search(text[: bare.end()].lower().replace("allergic", "")):
            found = [_ALLERGENS[w] for w in re.findall(r"[a-z]+", before.lower()) if w in _ALLERGENS]
            if len(set(found)) == 1:  # one allergen named before: the one meant
                out.append(FactChange("allergies", found[0]))
        return out
    if before_is_theirs:
        return out
    kind = asked(before)
    if kind is None or _NO.match(text):
        return out
    part = _FIRST_PART.search(text)
    first = part.group().strip() if part else ""
    if kind == "job":
        out.extend(_job(first, text))
    elif kind in ("from", "location"):
        place = _place(first)
        if place:
            out.append(FactChange("hometown" if kind == "from" else "location", place))
    elif kind == "age":
        if re.fullmatch(r"\d{2}", first) and 12 < int(first) < 100:
            out.append(FactChange("age", first))
    elif kind in ("pets", "kids"):
        out.extend(_named(text, before, kind))
    elif kind == "diet":
        m = ASKS[7][1].search(before)
        if m and _YES.match(text):
            out.append(FactChange("diet", m.group(1).lower()))
    elif kind == "allergies":
        items = [_ALLERGENS[w] for w in re.findall(r"[a-z]+", first.lower()) if w in _ALLERGENS]
        out.extend(FactChange("allergies", i) for i in dict.fromkeys(items))
    elif kind == "languages":
        langs = [w for w in re.findall(r"[a-z]+", first.lower()) if w in LANGUAGES]
        out.extend(FactChange("languages", w.title()) for w in dict.fromkeys(langs))
    return out


def _job(first: str, text: str) -> list[FactChange]:
    rest = _LEAD.sub("", first, count=1)
    words = _JOB_WORD.findall(rest.lower())
    words = words[: next((i + 1 for i, w in enumerate(words) if w in JOBS or w in _EXTRA_JOBS), 0)]
    if not words or len(words) > 4 or rest.lower().split()[: len(words)] != words:
        return []
    out = [FactChange("job", " ".join(words))]
    org = _AT_ORG.search(text[: len(first) + 40])
    if org and org.group(1).lower() not in NOT_NAMES:
        out.append(FactChange("employer", org.group(1)))
    return out


def _place(first: str) -> str | None:
    words = first.split()
    if not 1 <= len(words) <= 3 or not all(re.fullmatch(r"[^\W\d_][\w'\-]*", w) for w in words):
        return None
    low = first.lower()
    if words[0].lower() in NOT_NAMES | PLACE_STOP | TIME_WORDS or low in JOBS:
        return None
    return " ".join(w[0].upper() + w[1:] for w in words)


def _named(text: str, before: str, kind: str) -> list[FactChange]:
    """ "two, Rex and Ash": the names in the answer, with what the question or the answer says they are."""
    lead = text.split()[0].strip(",.!").lower() if text.split() else ""
    if lead not in _NUMBER_WORDS and not lead.isdigit() and not _CAPITAL.match(text.strip()):
        return []
    names = [n for n in _CAPITAL.findall(text) if n.lower() not in NOT_NAMES and n.lower() not in SPECIES]
    if not names or len(names) > 4:
        return []
    if kind == "kids":
        return [FactChange("family", f"{n} (child)") for n in names]
    species = [SPECIES[w] for w in re.findall(r"[a-z]+", text.lower()) if w in SPECIES]
    species = species or [SPECIES[w] for w in re.findall(r"[a-z]+", before.lower()) if w in SPECIES]
    what = species[0] if len(set(species)) == 1 else "pet"
    return [FactChange("pets", f"{n} ({what})") for n in names]


_GREETED = lazy(
    r"^\W*(?:(?:lol|haha|omg|oh)\W+)?"
    r"(?:hi|hey|hiya|hello|welcome|yo|thanks|thank you|thx|ty|congrats|morning)"
    r"\s+(?:back\s+|again\s+)?([^\W\d_][\w'\-]{1,20})\s*(?:[!.,:;)]|\W*$)",
    re.I,
)
_NOT_ALIASES = frozenset(
    _split(
        "all everyone everybody guys folks yall y'all team there again back friends fam people gang "
        "you u ya man mate dude bro sis girl girls boys lads and so ok okay lol haha"
    )
)


def addressed(text: str, before_is_theirs: bool) -> str | None:
    """The name a greeting opens `text` with ("welcome seun!", "hi moose"): the previous message's
    author's (never a greeting of one's own message, never "hi all"). An @mention may name anyone
    in the chat: it is left to the platform's own mention data."""
    if before_is_theirs or len(text) > MAX_ANSWER:
        return None
    m = _GREETED.match(text)
    name = m.group(1) if m else None
    if not name or name.lower() in _NOT_ALIASES or name.lower() in NOT_NAMES or name.lower() in JOBS:
        return None
    return name


_OPENERS = tuple(_split("hi hey hello welcome yo thank thx ty congrats morning lol haha omg oh"))


def may_address(text: str) -> bool:
    """Cheap: whether `text` may open with a greeting (then `addressed` reads it)."""
    return text[:10].lstrip().lower().startswith(_OPENERS)
