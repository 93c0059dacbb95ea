"""Facts as people state them in group chats, which the first-person rules leave out.

- Moves said as leaving one place for another: "left Lyon for Montreal", "moved to Oslo from
  Bergen", "galway, moved from dublin in may": the old place first, so it becomes the history
  ("where did X live before Y") and the new one the current value.
- Introductions that list several facts: "Ben here, software engineer at Acme, mostly backend",
  "Lukas. 45, Munich", "29, just moved to Oslo from Bergen", "nurse by day, reader by night".
- A job inside a joke or a denial: "i'm a plumber not a magician" (the job before "not").
- Conditions and diets with or without a date: "i'm diabetic", "coeliac", "became vegetarian
  last spring".
- Names people go by: "everyone calls me Seun", "(Dániel on paper)": an alias.

Each rule needs its own words in the message (one search of a few literals rules most messages
out); a hypothetical, negated or questioned clause states nothing. Precision first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memory_engine.facts.clauses import FactChange
from memory_engine.facts.lexicon import JOBS, NOT_NAMES, PLACE_STOP, TIME_WORDS
from memory_engine.facts.patterns import has_digit, lazy


def _split(text: str) -> list[str]:
    return text.split()


_OPENS = lazy(r"\W*\d\d\b|[^\W\d_][\w'\-]*\.\s+\d", 0)  # "29, ...", "Lukas. 45, ..."
_UNSAID = lazy(
    r"\b(?:if|would|wish|maybe|might|thinking|considering|planning|hope|should|could|wanna|gonna|"
    r"i'd|id|want to|going to|someday|one day|never|don'?t|didn'?t|doesn'?t|can'?t|cant|whether)\b",
    0,
)
_PLACE = r"[A-ZÀ-ÖØ-Þ][\w'\-]*(?:\s+(?:de|da|do|del|upon|on|am|la|le|sur)?\s*[A-ZÀ-ÖØ-Þ][\w'\-]*)?"
_LOW_PLACE = r"[^\W\d_][\w'\-]*"
_LEFT_FOR = lazy(
    r"(?:^\W*|\b(?:[Ii]|[Ww]e|just|finally|recently)\s+)left\s+(" + _PLACE + r")\s+for\s+(" + _PLACE + r")\b",
    0,
)
_TO_FROM = lazy(r"\bmoved\s+(?:here\s+)?to\s+(" + _PLACE + r")\s+from\s+(" + _PLACE + r")\b", 0)
_FROM_TO = lazy(r"\bmoved\s+(?:here\s+)?from\s+(" + _PLACE + r")\s+to\s+(" + _PLACE + r")\b", 0)
# "galway, moved from dublin in may" (the answer to "where do you live now?"): lower case is safe here
_HERE_FROM = lazy(
    r"^\W*("
    + _LOW_PLACE
    + r")\s*[,!.]+\s*(?:just\s+|recently\s+)?moved\s+(?:here\s+)?from\s+("
    + _LOW_PLACE
    + r")\b",
    0,
)
_DENIAL_JOB = lazy(r"\bi(?:'?m|\s+am)\s+(?:a|an)\s+([a-z]+(?:\s+[a-z]+)?)\s*,?\s+not\s+(?:a|an)\s+\w", re.I)
_BY_DAY = lazy(r"(?:^|[,.!]\s*|\bi'?m\s+(?:a|an)\s+)([a-z]+(?:\s+[a-z]+)?)\s+by\s+day\b", re.I)
_CONDITIONS = {
    "diabetic": "diabetic",
    "diabetes": "diabetic",
    "coeliac": "coeliac",
    "celiac": "coeliac",
    "asthmatic": "asthmatic",
    "asthma": "asthmatic",
    "epileptic": "epileptic",
    "epilepsy": "epileptic",
    "lactose intolerant": "lactose intolerant",
    "gluten intolerant": "gluten intolerant",
}
DIET_CONDITIONS = frozenset(("coeliac", "lactose intolerant", "gluten intolerant"))  # a diet says them
_CONDITION = lazy(
    r"(?:\bi(?:'?m|\s+am)\s+(?:also\s+|actually\s+|type\s+[12]\s+)?|\bi\s+have\s+(?:type\s+[12]\s+)?|^\W*|,\s*)"
    r"(diabetic|diabetes|coeliac|celiac|asthmatic|asthma|epileptic|epilepsy|lactose intolerant"
    r"|gluten intolerant)\b",
    re.I,
)
_BECAME_DIET = lazy(
    r"\b(?:i\s+)?(?:became|went|turned|gone|been|am|'m|m)\s+(?:fully\s+)?(vegetarian|vegan|pescatarian)\b",
    re.I,
)
_CALLS_ME = lazy(
    r"\b(?:everyone|everybody|people|friends|they|most people|ppl)\s+calls?\s+me\s+([A-Za-zÀ-ÿ][\w'\-]*)", 0
)
_ON_PAPER = lazy(r"^\W*([^\W\d_][\w'\-]*)\s+here\b.*\(\s*[A-ZÀ-Þ][\w'\-]*\s+on\s+paper\b", 0)
_HERE = lazy(
    r"^\W*(?:(?:hi|hey|hello|hallo|hola|oi|yo|ciao|salut)\W+){0,3}([A-ZÀ-Þa-zß-ÿ][\w'\-]*)\s+here\b", 0
)
_NAME_DOT = lazy(r"^\W*([A-ZÀ-Þ][\w'\-]+)\.\s+(?=\d)", 0)
_AGE_FIRST = lazy(r"^\W*(\d\d)\s*,\s*(?=\S)", 0)
_SEGMENT = lazy(r"[,;.!]+\s*|\s+-\s+|\s+\u2014\s+", 0)
_AGE = lazy(r"^(\d\d)(?:\s*(?:y/?o|yrs?|years?(?:\s+old)?))?$", 0)
_JOB_AT = lazy(
    r"^(?:i'?m\s+)?(?:an?\s+)?([a-z]+(?:\s+[a-z]+){0,2}?)(?:\s+(?:at|@|for)\s+(?:the\s+)?([A-ZÀ-Þ][\w&'\-]*(?:\s+[A-ZÀ-Þ][\w&'\-]*){0,2}))?$",
    re.I,
)
_JUST_MOVED = lazy(
    r"^(?:just\s+|recently\s+)?moved\s+(?:here\s+)?(?:to\s+("
    + _PLACE
    + r"))?(?:\s+from\s+("
    + _PLACE
    + r"))?",
    0,
)
_BARE_PLACE = lazy(r"^(" + _PLACE + r")$", 0)
_NOT_PLACES = NOT_NAMES | PLACE_STOP | TIME_WORDS
_EXTRA_JOBS = frozenset(("physio", "medic", "dev", "swe", "cop", "paramedic", "hygienist"))
_NOT_HERE = frozenset(
    _split(
        "same me us we everyone anyone nobody somebody someone not still back over right out in from "
        "im i'm it's its just new who whos who's nobody's all yall y'all guys lol haha van von de da le la "
        "el al the a an and or but so then there this that"
    )
)
# Every word one of the rules below needs (their literals are these words or parts of them): for
# ASCII text, a message holding none, and not opening with a number ("29, ..." or "Lukas. 45"),
# is passed by in one set lookup.
GROUP_TRIGGERS = frozenset(
    w.encode()
    for w in _split(
        "left moved not day anymore more longer started here call calls paper diabetic diabetes "
        "diabetics coeliac celiac asthma asthmatic epileptic epilepsy intolerant intolerance "
        "vegetarian vegan pescatarian"
    )
)
# Words that send a message past the extractor's first gate to these rules (with the rules'
# own words: digits, "'", "here", "moved", "vegetarian"... are there already).
GROUP_WORDS = frozenset(
    w.encode()
    for w in _split(
        "left calls diabetic diabetes coeliac celiac asthmatic asthma epileptic epilepsy intolerant "
        "anymore longer"
    )
)


def _place(word: str | None) -> str | None:
    if not word:
        return None
    word = word.strip(" '-")
    if len(word) < 2 or word.lower() in _NOT_PLACES or word.lower() in JOBS:
        return None
    return word[0].upper() + word[1:] if word[0].islower() else word


def _job(phrase: str) -> str | None:
    words = phrase.lower().split()
    if (
        not words
        or (words[-1] not in JOBS and words[-1] not in _EXTRA_JOBS)
        or any(w in ("not", "no", "ex", "former", "future") for w in words)
    ):
        return None
    return " ".join(words)


def group_facts(text: str, low: str | None = None) -> tuple[list[FactChange], list[FactChange]]:
    """(values the message says were so before, its facts): the forms of group talk above.

    `low`: `text.lower()` when the caller has it."""
    low = text.lower() if low is None else low
    rules: list[Callable[[str, list[FactChange], list[FactChange]], None]] = []
    if "left " in low or "moved" in low:
        rules.append(_moves)
    if "not a" in low or "by day" in low:
        rules.append(_job_jokes)
    if "anymore" in low or "any more" in low or "no longer" in low or "started" in low:
        rules.append(_job_change)
    if (
        "diabet" in low
        or "coeliac" in low
        or "celiac" in low
        or "asthma" in low
        or "epilep" in low
        or "intoleran" in low
        or "vegetarian" in low
        or "vegan" in low
        or "pescatarian" in low
    ):
        rules.append(_health)
    if "call" in low or "on paper" in low:
        rules.append(_aliases)
    intro = ("here" in low and _HERE.match(text) is not None) or (
        has_digit(text) and _OPENS.match(text) is not None
    )
    if not rules and not intro:
        return [], []
    first: list[FactChange] = []
    after: list[FactChange] = []
    if rules:
        for part in re.split(r"(?<=[.!?])\s+(?=[a-zA-Z])|\n", text):
            if "?" in part:
                continue  # a question states nothing here
            for rule in rules:
                rule(part, first, after)
    if intro:
        _introduction(text, first, after)
    return first, after


def _said(part: str, m: re.Match[str] | None) -> bool:
    """A match that is stated: no wish, hypothetical or negation before its end."""
    return m is not None and not _UNSAID.search(part[: m.end()].lower())


def _moves(part: str, first: list[FactChange], after: list[FactChange]) -> None:
    for pattern, old_at in ((_LEFT_FOR, 1), (_TO_FROM, 2), (_FROM_TO, 1), (_HERE_FROM, 2)):
        m = pattern.search(part)
        if m and _said(part, m):
            old, new = _place(m.group(old_at)), _place(m.group(3 - old_at))
            if old and new and old.lower() != new.lower():
                first.append(FactChange("location", old))
                after.append(FactChange("location", new))
            return


_NO_LONGER = lazy(
    r"\b(?:not\s+(?:a|an)\s+([a-z]+(?:\s+[a-z]+)?)\s+(?:anymore|any\s+more|no\s+more)|no\s+longer\s+(?:a|an)\s+([a-z]+))\b",
    re.I,
)
_STARTED_AT = lazy(
    r"\b(?:just\s+)?(?:started|starting)\s+(?:working\s+|a\s+new\s+job\s+)?at\s+"
    r"(?:(?:a|an|the)\s+([a-z]+(?:\s+[a-z]+){0,2})|([A-Z][\w&'\-]*(?:\s+[A-Z][\w&'\-]*){0,2}))",
    0,
)
_ORG_TAIL = frozenset(_split("on in at last this next since for from today yesterday tomorrow with and but"))
_QUOTE_BEFORE = lazy(r"(?:['\"\u201c\u2018]\s*\W*$|\b(?:says?|said|saying|goes|like)\W*$)", 0)


def _job_change(part: str, first: list[FactChange], after: list[FactChange]) -> None:
    """ "not a barista anymore, started at a bike shop": the old job ends, the new employer begins."""
    gone = _NO_LONGER.search(part)
    old = _job(gone.group(1) or gone.group(2)) if gone else None
    if old:
        after.append(FactChange("job", old, remove_from="job", add=False))
    began = _STARTED_AT.search(part)
    if began and _said(part, began) and (old or began.group(2)):
        words = (began.group(1) or began.group(2)).split()
        while words and words[-1].lower() in _ORG_TAIL | TIME_WORDS:
            words.pop()
        if words and " ".join(words).lower() not in NOT_NAMES:
            after.append(FactChange("employer", " ".join(words)))


def _job_jokes(part: str, first: list[FactChange], after: list[FactChange]) -> None:
    for pattern in (_DENIAL_JOB, _BY_DAY):
        m = pattern.search(part)
        if m and _QUOTE_BEFORE.search(part[: m.start()]):
            return  # "my mum always says 'I'm a doctor, not a magician'": her line, not a job
        job = _job(m.group(1)) if m and _said(part, m) else None
        if job:
            after.append(FactChange("job", job))
            return


def _health(part: str, first: list[FactChange], after: list[FactChange]) -> None:
    m = _CONDITION.search(part)
    if m and _said(part, m):
        after.append(FactChange("health", _CONDITIONS[m.group(1).lower()]))
    d = _BECAME_DIET.search(part)
    if d and _said(part, d):
        after.append(FactChange("diet", d.group(1).lower()))


def _aliases(part: str, first: list[FactChange], after: list[FactChange]) -> None:
    for pattern in (_CALLS_ME, _ON_PAPER):
        m = pattern.search(part)
        if m and _said(part, m) and m.group(1).lower() not in NOT_NAMES:
            after.append(FactChange("alias", m.group(1)))


def _introduction(text: str, first: list[FactChange], after: list[FactChange]) -> None:
    """ "Ben here, software engineer at Acme", "Lukas. 45, Munich", "29, just moved to Oslo from Bergen"."""
    here = _HERE.match(text)
    head = here or _NAME_DOT.match(text) or _AGE_FIRST.match(text)
    if head is None:
        return
    name = head.group(1)
    opened_by_age = name.isdigit()
    if not opened_by_age and (name.lower() in NOT_NAMES or name.lower() in JOBS or name.lower() in _NOT_HERE):
        return
    if opened_by_age:
        after.append(FactChange("age", name))
    elif here is not None and name[0].islower() and len(name) > 2:
        after.append(FactChange("alias", name))  # "dani here 👋": what the others call them
    segments = [s.strip() for s in _SEGMENT.split(text[head.end() :]) if s.strip()][:5]
    for seg in segments:
        low = seg.lower()
        if "?" in seg or _UNSAID.search(low):
            break
        age = _AGE.match(low)
        if age and 12 < int(age.group(1)) < 100:
            if not any(c.key == "age" for c in after):
                after.append(FactChange("age", age.group(1)))
            continue
        moved = _JUST_MOVED.match(seg)
        if moved and (moved.group(1) or moved.group(2)):
            new, old = _place(moved.group(1)), _place(moved.group(2))
            if old and not any(c.value == old for c in first):
                first.append(FactChange("location", old))
            if new and not any(c.value == new for c in after):
                after.append(FactChange("location", new))
            continue
        job = _JOB_AT.match(seg)
        if job and _job(job.group(1)):
            after.append(FactChange("job", _job(job.group(1)) or ""))
            if job.group(2):
                after.append(FactChange("employer", job.group(2)))
            continue
        place = _BARE_PLACE.match(seg)
        if place and _place(place.group(1)) and len(seg.split()) <= 2:
            if not any(c.key == "location" for c in after):
                after.append(FactChange("location", _place(place.group(1)) or ""))
            continue
