"""Finding a dated plan of the speaker's own in a message, offline and without a model.

A small rule set, in order: the message is not a question, not negated, not hypothetical and
not told in the past; it speaks of the speaker's own plan ("my interview", "I have an exam",
"I'm flying to Oslo", not "my sister's interview" nor "your exam"); it names an event (a noun or a verb of a
small list); and it has a date phrase ("on Thursday at 10", "tomorrow", "next monday",
"on 12 December") that `dateparser` reads as a day in the person's time zone, today or
later. What fails any rule is not a plan: a follow-up is asked only when all hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from bot.chat.proactive.when import WEEKDAYS, zone

_NOUNS = (
    "interview|exam|test|appointment|meeting|flight|trip|presentation|surgery|operation|"
    "date|match|game|race|marathon|concert|gig|wedding|party|talk|deadline|audition|"
    "check-up|checkup|hearing|defense|defence|pitch|demo|recital|performance|move|holiday|vacation"
)
_VERBS = {  # first-person verb forms -> the event they name
    "flying": "flight",
    "fly": "flight",
    "travelling": "trip",
    "traveling": "trip",
    "moving": "move",
    "presenting": "presentation",
    "interviewing": "interview",
    "running": "race",
    "performing": "performance",
    "getting married": "wedding",
    "sitting": "exam",
}
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    r"\b(?:(?:on|this|next|coming)\s+)?(?:"
    r"today|tonight|tomorrow|day after tomorrow|"
    rf"(?:{'|'.join(WEEKDAYS)})|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})(?:,?\s+\d{{4}})?|"
    rf"(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    r")\b",  # the day alone: the clock time does not move a day-after check-in
    re.IGNORECASE,
)
_NOUN = re.compile(rf"\b(?:my|our)\s+(?:[\w'-]+\s+)?({_NOUNS})\b", re.I)
_HAVE = re.compile(
    rf"\b(?:i|i've|i'?ll|i'?m)\s+(?:have|has|got|have got|'ve got|am having|having|will have|"
    rf"going to have|gonna have|off to(?: an?| my)?|at(?: an?| my)?)\s+(?:an?\s+|my\s+|the\s+)?"
    rf"(?:\w+\s+)?({_NOUNS})\b",
    re.I,
)
_VERB = re.compile(
    r"(?:^\s*|\b(?:i'?m|i am|i'll be|i will be|i'?ll|i will|i)\s+)(?:going to\s+|gonna\s+)?("
    + "|".join(_VERBS)
    + r")\b",
    re.I,
)
_BARE = re.compile(rf"\s*(?:(?:big|job|driving|final)\s+)?({_NOUNS})\b", re.I)  # "exam next monday"
# Someone else's plan: a possessive other than the speaker's right before the event.
_OTHERS = re.compile(rf"\b(?:your|his|her|their|its|\w+'s)\s+(?:\w+\s+)?({_NOUNS})\b", re.I)
_QUESTION = re.compile(
    r"\?\s*$|^\s*(?:do|does|did|is|are|was|were|will|would|should|can|could|when|what|where|how|why|"
    r"who|which|have|has)\b",
    re.I,
)
_NEGATION = re.compile(
    r"\b(?:not|no|never|don't|dont|doesn't|didn't|won't|isn't|aren't|wasn't|cancel(?:l)?ed|"
    r"called off|postponed|no longer|nothing)\b|n't\b",
    re.I,
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|maybe|perhaps|might|may|would|could|should|suppose|supposing|imagine|in case|unless|"
    r"hope to|wish|wonder|thinking about|considering|someday|one day)\b",
    re.I,
)
# Told in the past ("I went to a castle during my trip last Friday"): nothing left to ask about.
_PAST = re.compile(r"\b(?:last|ago|yesterday|went|was|were|had|did|been)\b", re.I)
MAX_CHARS = 400  # a long message is not read: a plan is said in a sentence


@dataclass(frozen=True)
class Plan:
    """A dated plan of the speaker's: what (an event noun) and on which local day."""

    event: str
    day: date


def candidate(text: str) -> str | None:
    """The event a message names as the speaker's own plan with a date phrase, before any
    date is parsed (cheap: no dateparser); None when a rule says it is not a plan."""
    if len(text) > MAX_CHARS or not _DATE.search(text):
        return None
    if any(rule.search(text) for rule in (_QUESTION, _NEGATION, _HYPOTHETICAL, _PAST)):
        return None
    own = _NOUN.search(text) or _HAVE.search(text) or _BARE.match(text)
    if own is not None:
        event = own.group(1).lower()
        other = _OTHERS.search(text)
        if (
            other is not None
            and other.group(1).lower() == event
            and not other.group(0).lower().startswith(("my ", "our "))
        ):
            return None
        return event
    verb = _VERB.search(text)
    return _VERBS[verb.group(1).lower()] if verb else None


def detect_plan(text: str, now: datetime, tz: str, languages: tuple[str, ...] = ("en",)) -> Plan | None:
    """The speaker's dated plan in `text` said at `now` (aware) in zone `tz`, or None."""
    event = candidate(text)
    if event is None:
        return None
    found = _DATE.search(text)
    if found is None:  # pragma: no cover - candidate() found one
        return None
    import dateparser  # only for a message that passed every rule

    local_now = now.astimezone(zone(tz))
    phrase = re.sub(r"^(?:on|this|coming)\s+", "", found.group(0).strip(), flags=re.I)
    settings: Any = {"PREFER_DATES_FROM": "future", "RELATIVE_BASE": local_now.replace(tzinfo=None)}
    parsed = dateparser.parse(phrase, languages=list(languages), settings=settings)
    if parsed is None or parsed.date() < local_now.date():
        return None
    return Plan(event, parsed.date())
