"""Fact rules about the speaker: name, location, job and employer, age, birthday, pronouns."""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory_engine.facts.clauses import (
    ADV,
    I_,
    WORD,
    FactChange,
    clean,
    folded,
    is_capitalised,
    is_name_word,
    strip_leading,
    strip_trailing,
    title,
    triggers,
)
from memory_engine.facts.lexicon import (
    ABSTRACT,
    DETERMINERS,
    GREETINGS,
    ING_ADJECTIVES,
    JOB_BAD_MODIFIERS,
    JOB_STOP,
    JOBS,
    NOT_JOB_HEADS,
    NOT_NAMES,
    NOT_PROPER,
    NUMBER_WORDS,
    PLACE_STOP,
    TENS_WORDS,
    TIME_HEADS,
    TIME_WORDS,
)
from memory_engine.facts.patterns import lazy, rx

_PARTICLE = r"(?:van|von|de|da|do|del|della|di|du|dos|das|le|la|bin|ibn|al|el|der|ter|ten|y)"
_NEXT_NAME = lazy(r"\s+(?:(" + _PARTICLE + r")\s+)?([^\W\d_][\w'\-]*)", 0)
_NAME_END = lazy(r"\s*(?:$|[^\w\s']|(?:and|but|btw|by|though|from|too|here|lol|haha|now)\b)", re.I)


# -- names ---------------------------------------------------------------------------------


def _take_name(rest: str, allow_lower: bool) -> str | None:
    """A person's name at the start of `rest`, ending with its phrase, or None."""
    rest = strip_leading(rest)
    m = WORD.match(rest)
    if not m or m.group().lower() in NOT_NAMES or m.group().lower().endswith("'s"):
        return None
    capital = is_capitalised(m.group())
    if not capital and not allow_lower:
        return None
    parts, pos = [m.group()], m.end()
    while capital and len(parts) < 4:
        more = _NEXT_NAME.match(rest, pos)
        if not more or not is_name_word(more.group(2)) or more.group(2).lower().endswith("'s"):
            break
        parts += [p for p in more.groups() if p]
        pos = more.end()
    if not _NAME_END.match(rest, pos):
        return None
    name = " ".join(parts).strip("'-")
    return name if capital else title(name)


_MY_NAME = rx(r"(?:\b(?:my|the)\s+|^\W*)name(?:'s|\s+is)\s+")
_CALL_ME = rx(
    r"\b(?:call|calls)\s+me\s+|" + I_ + r"(?:'m|\s+am)\s+(?:called|known as)\s+|" + I_ + r"\s+go\s+by\s+",
    first="ci",
)
_I_AM = rx(r"^(?:(?:" + "|".join(sorted(GREETINGS)) + r")[\s,!.]+)*" + I_ + r"(?:'m|\s+am)\s+")


_HERE = rx(
    r"^(?:(?:" + "|".join(sorted(GREETINGS)) + r")[\s,!.]+)*(?:(?:this\s+is|it's)\s+(?P<a>[^\W\d_][\w'\-]*)"
    r"(?:\s+(?:speaking|here))?|(?P<b>[^\W\d_][\w'\-]*)\s+here)$"
)


_GREETED = lazy(r"^\W*(?:hi|hello|hey|hiya|howdy|greetings)\b")


_NOT_CALLED = frozenset(
    (
        "later",
        "maybe",
        "crazy",
        "anytime",
        "sometime",
        "tomorrow",
        "tonight",
        "back",
        "old",
        "myself",
        "yourself",
    )
)
_NUMBERISH = lazy(r"(?:" + "|".join([*TENS_WORDS, *NUMBER_WORDS]) + r")\b")


def names(clause: str) -> Iterator[FactChange]:
    for pattern, lower in ((_MY_NAME, True), (_CALL_ME, False)):
        for m in triggers(clause, pattern):
            rest = clause[m.end() :]
            # "call me nico": a lower-case name when it is the last word (not "call me later")
            word = rest.strip(" .!").lower()
            alone = "call" in m.group().lower() and len(rest.split()) == 1 and word not in _NOT_CALLED
            alone = alone and word not in JOBS and word not in ABSTRACT and not _NUMBERISH.match(word)
            name = _take_name(rest, allow_lower=lower or alone)
            if name:
                yield FactChange("name", name)


def names_i_am(clause: str) -> Iterator[FactChange]:
    for m in triggers(clause, _I_AM):
        name = _take_name(clause[m.end() :], allow_lower=False)
        if name:
            yield FactChange("name", name)


def _may_be_here(clause: str) -> bool:
    """False when _HERE cannot match: it ends the clause with "here", "speaking", or a word after
    "this is"/"it's" (told on folded text, whose ASCII letters are those re.I matches)."""
    if "\n" in clause:  # $ also matches before a final newline
        return True
    low = folded(clause)
    if low.endswith(("here", "speaking")):
        return True
    parts = low.rsplit(None, 1)
    return len(parts) == 2 and parts[0].endswith(("is", "it's"))


def names_here(clause: str) -> Iterator[FactChange]:
    here = _HERE.match(clause) if _may_be_here(clause) else None
    # "Ren here", "hi, this is Carlos speaking": a sign-off or a greeting makes it the speaker
    if here and (here.group("b") or clause.lower().endswith(("speaking", "here")) or _GREETED.match(clause)):
        name = here.group("a") or here.group("b")
        if is_name_word(name) and not name.lower().endswith("'s"):
            yield FactChange("name", name)


# -- places, work, age, birthday, pronouns -------------------------------------------------

_PLACE_LINK = r"(?:de|da|do|dos|das|del|upon|on|am|im|an|der|sur|en|of|la|le|y|al|el)"
_PLACE_WORD = r"[^\W\d_][\w'\-.]*"
_CALLED = lazy(r"^(?:a|an)\s+(?:[a-z\-]+\s+){0,3}?(?:called|named)\s+")
_LOWER_STOP = TIME_WORDS | TIME_HEADS | PLACE_STOP


def _take_proper(rest: str, links: str, limit: int = 5) -> str | None:
    """A run of capitalised words (with linking words like "de", "of", "&") at the start of `rest`."""
    m = re.match(_PLACE_WORD, rest)
    if (
        not m
        or not is_capitalised(m.group())
        or (m.group().lower().rstrip(".") in NOT_PROPER and not m.group().isupper())
    ):
        return None
    words, pos = [m.group()], m.end()
    link = re.compile(r"\s+(?:(" + links + r")\s+)?(" + _PLACE_WORD + r")", re.I)
    while len(words) < limit:
        more = link.match(rest, pos)
        if not more or not (is_capitalised(more.group(2)) or more.group(2)[:1].isdigit()):
            break
        words += [p for p in more.groups() if p]
        pos = more.end()
    return " ".join(words).rstrip(".")


def take_place(rest: str, allow_lower: bool = True) -> str | None:
    """A place at the start of `rest` ("Rio de Janeiro", "the Netherlands", "austin, texas")."""
    rest = strip_leading(rest.strip())
    called = _CALLED.match(rest)
    if called:
        return _take_proper(rest[called.end() :], _PLACE_LINK)
    article = ""
    if rest.lower().startswith("the "):
        article, rest, allow_lower = "the ", rest[4:], False
    place = _take_proper(rest, _PLACE_LINK)
    if place:
        if " " not in place and place.lower() in ABSTRACT:
            return None
        tail = re.match(r",\s*(" + _PLACE_WORD + r"(?:\s+" + _PLACE_WORD + r")?)\s*$", rest[len(place) :])
        if tail and all(is_capitalised(w) for w in tail.group(1).split()):
            place += ", " + tail.group(1)  # "Austin, Texas"
        return article + place
    if not allow_lower:
        return None
    words: list[str] = []
    for w in rest.split():
        if w.lower() in _LOWER_STOP or not re.fullmatch(r"[^\W\d_][\w'\-]*", w) or len(words) == 3:
            break
        words.append(w)
    low = [w.lower() for w in words]
    if not words or any(w in ABSTRACT or w in DETERMINERS or w in NOT_NAMES for w in low):
        return None
    return " ".join(words)


_LIVE = rx(
    r"\b(?:" + I_ + r"|we|" + I_ + r"\s+and\s+(?:my|our)\s+[a-z\-]+)\s+" + ADV + r"(?:live|reside)\s+"
    r"(?:with\s+[^,.;]{1,40}?\s+)?in\s+"
    r"|\b(?:" + I_ + r"(?:'m|\s+am)|we(?:'re|\s+are))\s+" + ADV + r"(?:living|based|settled|residing)\s+"
    r"(?:in|out\s+of)\s+"
    r"|\b(?:" + I_ + r"|we)(?:'ve|\s+have)\s+" + ADV + r"been\s+" + ADV + r"(?:living|based|residing)\s+in\s+"
    r"|\b(?:" + I_ + r"|we)(?:'ve|\s+have)?\s+" + ADV + r"(?:moved|relocated)\s+"
    r"(?:(?:here|away|over)\s+)?(?:from\s+[^,;]{1,60}?\s+)?(?:back\s+|over\s+|out\s+|down\s+|up\s+)?to\s+",
    first="iw",
)
_LIVED_SINCE = rx(r"\b(?:" + I_ + r"|we)(?:'ve|\s+have)\s+" + ADV + r"(?:lived|been)\s+in\s+", first="iw")
_FROM = rx(
    I_ + r"(?:'m|\s+am)\s+" + ADV + r"from\s+|" + I_ + r"\s+" + ADV + r"come\s+from\s+",
    first="i",
)


def places(clause: str) -> Iterator[FactChange]:
    for m in triggers(clause, _LIVE):
        place = take_place(clause[m.end() :])
        if place:
            yield FactChange("location", place)
    for m in triggers(clause, _LIVED_SINCE):
        rest = clause[m.end() :]
        been = " been " in clause[m.start() : m.end()].lower()  # "I've been in Oslo since 2020"
        place = take_place(rest, allow_lower=not been)
        if place and re.match(
            r"\s*,?\s+since\b" if been else r"\s*,?\s+(?:since|for)\b", rest[len(place) :], re.I
        ):
            yield FactChange("location", place)  # "I've lived in Athens since 2015": still there
    for m in triggers(clause, _FROM):
        place = take_place(clause[m.end() :], allow_lower=False)
        if place:
            yield FactChange("location", place, remove_from="from")


_WORK_WORDS: tuple[str, ...] = (
    "m",
    "am",
    "been",
    "work",
    "working",
    "employed",
    "job",
    "occupation",
    "profession",
)
_WORK_WORDS += ("started", "began", "hired")
_I_AM_A = rx(
    I_ + r"(?:'m|\s+am)\s+" + ADV + r"(?:[^\W\d_][\w'\-]*,\s+)?(?:an?)\s+",
    first="i",
)
_BEEN_A = rx(I_ + r"(?:'ve|\s+have)\s+" + ADV + r"been\s+(?:an?)\s+", first="i")
_WORK_AS = rx(
    I_ + r"(?:'m|\s+am|'ve\s+been|\s+have\s+been)?\s+" + ADV + r"(?:work|working|employed)\s+as\s+(an?\s+)?",
    first="i",
)
_MY_JOB = rx(
    r"\bmy\s+(?:job|occupation|profession|day\s+job)\s+is\s+(an?\s+)?",
    first="m",
)
_EMPLOYER = rx(
    I_ + r"(?:'m|\s+am|'ve\s+been|\s+have\s+been|\s+was)?\s+" + ADV + r"(?:work|working|"
    r"(?:started|began)(?:\s+(?:working|a\s+(?:new\s+)?job|a\s+position))?|got\s+(?:a\s+|my\s+)?(?:new\s+|first\s+)?job|"
    r"(?:got\s+)?hired)\s+(?:at|for)\s+|" + I_ + r"(?:'m|\s+am)\s+" + ADV + r"employed\s+(?:at|by)\s+",
    first="i",
)
_ORG_LINK = r"(?:&|of|and|de|for|und)"


_AGE_BEFORE_JOB = lazy(r"^\s*\d{1,3}\s*-?\s*(?:y/?o|yrs?|years?)(?:\s*-?\s*old)?\s+")


def take_job(rest: str, need_lexicon: bool) -> tuple[str, str] | None:
    """A job phrase at the start of `rest` and what follows it, or None."""
    rest = _AGE_BEFORE_JOB.sub("", rest, count=1)  # "a 28 yo designer": the age is not the job
    words: list[str] = []
    for w in rest.split():
        bare = w.strip(",.!?")
        if bare.lower() in JOB_STOP or len(words) == 6 or not re.fullmatch(r"[\w\-&/]+", bare):
            break
        words.append(bare)
        if bare != w:
            break
    if not words:
        return None
    head, mods = words[-1].lower(), [w.lower() for w in words[:-1]]
    if head in NOT_JOB_HEADS or any(m in JOB_BAD_MODIFIERS for m in mods) or head in NOT_NAMES:
        return None
    if need_lexicon and head not in JOBS:
        return None
    phrase = " ".join(words)
    return phrase, rest[rest.find(words[-1]) + len(words[-1]) :]


def take_org(rest: str) -> str | None:
    """A company or school name at the start of `rest` ("Acme Corp", "the BBC")."""
    rest = strip_leading(rest.strip())
    called = _CALLED.match(rest)
    if called:
        rest = rest[called.end() :]
    article = ""
    if rest.lower().startswith("the "):
        article, rest = rest[:4], rest[4:]
    first = re.match(r"[\w&'\-.]+", rest)
    if not first or not (is_capitalised(first.group()) or first.group()[:1].isdigit()):
        return None
    org = _take_proper(rest, _ORG_LINK, limit=6) or first.group()
    if org.lower() in NOT_NAMES or org.lower() in ("myself", "home"):
        return None
    return article + org


def after_job(rest: str) -> Iterator[FactChange]:
    """ "... at Stripe", "... from Porto" after a job phrase."""
    at = re.match(r"\s*+,?\s*(?:at|for|with)\s+", rest, re.I)  # *+: linear on a run of spaces
    if at:
        org = take_org(rest[at.end() :])
        if org:
            yield FactChange("employer", org)
    came = re.match(r"\s*+,?\s*from\s+", rest, re.I)
    if came:
        place = take_place(rest[came.end() :], allow_lower=False)
        if place:
            yield FactChange("location", place, remove_from="from")


def work(clause: str) -> Iterator[FactChange]:
    for m in triggers(clause, _I_AM_A):
        job = take_job(clause[m.end() :], need_lexicon=True)
        if job:
            yield FactChange("job", job[0])
            yield from after_job(job[1])
    for m in triggers(clause, _BEEN_A):
        job = take_job(clause[m.end() :], need_lexicon=True)
        if job and re.match(r"(?:\s*+,\s+|\s+)(?:for|since)\b", job[1], re.I):
            yield FactChange("job", job[0])  # "I've been a plumber for 20 years": still one
    for pattern in (_WORK_AS, _MY_JOB):
        for m in triggers(clause, pattern):
            rest = clause[m.end() :]
            first = rest.split()[0].lower() if rest.split() else ""
            if pattern is _MY_JOB and first.endswith("ing") and first not in ING_ADJECTIVES:
                value = clean(rest)
                if 2 <= len(value.split()) <= 6:
                    yield FactChange("job", value)  # "my job is teaching kids to swim"
                continue
            job = take_job(rest, need_lexicon=not m.group(1))
            if job:
                yield FactChange("job", job[0])
                yield from after_job(job[1])
    for m in triggers(clause, _EMPLOYER):
        rest = clause[m.end() :]
        org = take_org(rest)
        if org:
            yield FactChange("employer", org)
            role = re.search(r"\bas\s+(an?\s+)?", rest[rest.find(org.split()[-1]) :], re.I)
            if role:
                job = take_job(
                    rest[rest.find(org.split()[-1]) + role.end() :], need_lexicon=not role.group(1)
                )
                if job:
                    yield FactChange("job", job[0])


_NUMBERS = {w: i for i, w in enumerate(NUMBER_WORDS)}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(TENS_WORDS)}
_NUM = r"(\d{1,3}|(?:" + "|".join([*_TENS, *_NUMBERS]) + r")(?:[\s\-](?:" + "|".join(_NUMBERS) + r"))?)"
_AGE = rx(
    I_ + r"(?:'m|\s+am)\s+" + ADV + _NUM + r"(?:\s*(?:years?|yrs?)(?:\s+old)?|\s*y/?o\b|(?-i:[mfMF])\b)?"
    r"|" + I_ + r"(?:'ve)?\s+" + ADV + r"turned\s+" + _NUM + r"\b",
    first="i",
)
_AGE_END = lazy(r"\s*(?:$|[^\w\s'%\"’]|(?:and|but|btw|though|so|lol|haha|this year|myself|yet|not\s+\d+)\b)")


def _number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    parts = re.split(r"[\s\-]", text.lower())
    total = sum(_TENS.get(p, _NUMBERS.get(p, 0)) for p in parts)
    return total if all(p in _TENS or p in _NUMBERS for p in parts) else None


def age(clause: str) -> Iterator[FactChange]:
    for m in triggers(clause, _AGE):
        after = strip_trailing(clause[m.end() :])
        n = _number(m.group(1) or m.group(2))
        if n is not None and 0 < n <= 120 and _AGE_END.match(after):
            yield FactChange("age", str(n))


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE = (
    r"(?P<date>(?:the\s+)?" + _DAY + r"(?:\s+of)?\s+" + _MONTH + r"(?:,?\s+\d{4})?"
    r"|" + _MONTH + r"\.?\s+(?:the\s+)?" + _DAY + r"\b(?:,?\s+\d{4})?"
    r"|" + _MONTH + r"(?:\s+\d{4})?"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?)"
)
_BIRTH_WORDS = ("birthday", "bday", "b", "birth", "birthdate", "born")
_BIRTHDAY = rx(
    r"(?:\bmy\s+(?:birthday|bday|b-day|birth\s*date|date\s+of\s+birth)(?:'s|\s+is)\s+|"
    + I_
    + r"\s+was\s+born\s+)(?:on\s+|in\s+)?"
    + _DATE,
    first="mi",
)
_PRONOUNS = (
    r"(?P<p>(?:she|he|they|xe|ze|fae|ey|it)/(?:her|him|them|hers|his|theirs|xem|xir|zir|hir|faer|em|its|"
    r"she|he|they)(?:/(?:hers|his|theirs|them|her|him|they|she|he))?)\b"
)
_PRONOUN = rx(
    r"(?:\bmy\s+pronouns\s+are\s+|" + I_ + r"\s+" + ADV + r"(?:use|go\s+by|prefer)\s+)" + _PRONOUNS,
    first="mi",
)


def dates_and_pronouns(clause: str) -> Iterator[FactChange]:
    for m in triggers(clause, _BIRTHDAY):
        yield FactChange("birthday", " ".join(m.group("date").split()))
    for m in triggers(clause, _PRONOUN) if "/" in clause else ():  # every set of pronouns has a "/"
        yield FactChange("pronouns", m.group("p").lower())
