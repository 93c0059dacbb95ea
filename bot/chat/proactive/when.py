"""Reminders in plain words: "remind me tomorrow at 9 to call the bank" -> what and when.

Dates and clock times are read by `dateparser` (many languages); what it does not do is
ours: finding which words are the time and which the task, durations counted in real time
("in 20 minutes" is 20 minutes from now even across a DST change), and recurrence ("every
Monday at 8"), whose occurrences are wall-clock times in the person's zone (`zoneinfo`), so
"8:00" stays 8:00 through a DST change. Nothing is guessed: what cannot be read is refused
with an example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.errors import ReminderParseError
from memory_engine.reminders.wire import Every, Reminder
from memory_engine.reminders.zones import known_zone

EXAMPLE = (
    "For example: /remind tomorrow at 9 to call the bank, /remind in 20 minutes to take the bread "
    "out, /remind on Friday at 18:00 to book the table, or /remind every Monday at 8 to put the bins out."
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "ten": 10, "half an": 0.5}
_UNITS = {
    "sec": 1, "second": 1, "min": 60, "minute": 60, "hour": 3600, "hr": 3600, "day": 86400, "week": 7 * 86400,
}  # fmt: skip
_LEAD = re.compile(
    r"^\s*(?:/remind\S*\s+)?(?:(?:hey|hi|ok|okay)[, ]+)?(?:please[, ]+)?(?:can you |could you )?"
    r"(?:remind (?:me|us)|reminder:?|set a reminder)\b[:,]?\s*",
    re.IGNORECASE,
)
_RECALL = re.compile(r"(?:what|who|whom|whose|how|where|why|which|whether|if)\b", re.IGNORECASE)
_REMIND_INSIDE = re.compile(r"\bremind (?:me|us)\b[:,]?", re.IGNORECASE)
_IN = re.compile(
    r"\b(?:in|after)\s+(\d+(?:[.,]\d+)?|an?|one|two|three|four|five|ten|half an)\s*"
    r"(sec(?:ond)?s?|min(?:ute)?s?|hours?|hrs?|days?|weeks?)\b",
    re.IGNORECASE,
)
# "in -5 minutes": a duration into the past (a hyphen, a minus sign or a dash before it).
_IN_PAST = re.compile(
    r"\b(?:in|after)\s+[-\u2212\u2013\u2014]\s*\d+(?:[.,]\d+)?\s*(?:sec|min|hour|hr|day|week)", re.I
)
# Clock times a reader sees as such, checked for being a time of day: "25:00", "24h30",
# "at 25", "13pm" ("25.12" is left alone: it is a date in much of the world).
_CLOCK_SAID = re.compile(
    r"\b(\d{1,3})(?::|h(?=\d))(\d{2})\b|\b(\d{1,3})\s*(am|pm)\b"
    r"|\b(?:at|um|à|a las)\s+(\d{1,3})\b(?!\s*[:h.]\d)",
    re.I,
)
LATEST = timedelta(days=366 * 100)  # a reminder further off than this is refused


def _impossible_clock(body: str) -> str | None:
    """The first clock time in `body` that is no time of day ("25:00"), as said; None if none."""
    for m in _CLOCK_SAID.finditer(body):
        if m.group(1) is not None:
            hour, minute = int(m.group(1)), int(m.group(2))
            if hour > 24 or minute > 59 or (hour == 24 and minute > 0):
                return m.group(0)
        elif m.group(3) is not None:
            if not 1 <= int(m.group(3)) <= 12:
                return m.group(0).replace(" ", "")
        elif int(m.group(5)) > 24:
            return m.group(5)
    return None


_EVERY = re.compile(
    r"\bevery\s+(day|morning|evening|weekday|" + "|".join(WEEKDAYS) + r")s?\b"
    r"(?:\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?)?",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"\d{1,2}[:h.]\d{2}|\d\s*(?:am|pm)\b|\bat \d|\b(?:noon|midnight|tonight)\b", re.I)
_TIME_WORDS = re.compile(
    r"\d|\b(?:today|tonight|tomorrow|noon|midnight|morning|evening|afternoon|next|week|month|"
    + "|".join(WEEKDAYS)
    + r")\b",
    re.IGNORECASE,
)
_BARE_AT = re.compile(r"\b(at|um|à|a las)\s+(\d{1,2})\b(?!\s*[:h.]\d)(?!\s*(?:am|pm))", re.IGNORECASE)
MAX_WORDS = 40
# Quotes a request or its task may be wrapped in (`/remind "in 3 minutes to call mum"`).
_PAIRS = {'"': '"', "“": "”", "”": "”", "„": "“", "«": "»", "»": "«", "'": "'", "‘": "’", "「": "」"}
_DOUBLE = '"“”„«»「」'  # a lone one of these at an edge is a stray (a lone ' may be an apostrophe)


def every_of(r: Reminder) -> Every | None:
    """A kept reminder's `every`: what the bot wrote, back from the worker."""
    return r.get("every")


@dataclass(frozen=True)
class ParsedReminder:
    """What to remind of and when (UTC), in which zone, and how it repeats (None: once)."""

    task: str
    due: datetime  # aware, UTC
    tz: str
    every: Every | None = None


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` (Europe/Lisbon, any case); ReminderParseError when no such zone
    exists. The names are the API's too (memory_engine.reminders.zones), so both agree; a
    folder of the database ("Europe") or an overlong name never reaches the file system."""
    known = known_zone(name)
    try:
        if known is None:
            raise ZoneInfoNotFoundError(name)
        return ZoneInfo(known)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        shown = name.strip()[:40] + ("..." if len(name.strip()) > 40 else "")
        raise ReminderParseError(
            f"I don't know the time zone {shown!r}. Use a name like Europe/Lisbon or America/New_York."
        ) from None


def looks_like_request(text: str) -> bool:
    """True when a message addressed to the bot asks for a reminder ("remind me ..."), not
    a question about the past ("remind me what we said")."""
    lead = _LEAD.match(text)
    rest = text[lead.end() :] if lead else ""
    # "remind me to ..." always; otherwise only with a time in it ("remind me of the plan?" is
    # a question for the model, "remind me tomorrow at 9 ..." a reminder).
    if lead and not _RECALL.match(rest) and (re.match(r"to\b", rest, re.I) or _TIME_WORDS.search(rest)):
        return True
    return bool(_EVERY.search(text) and _REMIND_INSIDE.search(text))


def parse_reminder(
    text: str, now: datetime, tz: str, languages: tuple[str, ...] = ("en",), date_only_time: str = "09:00"
) -> ParsedReminder:
    """Read "remind me WHEN to WHAT" (or WHAT WHEN) said at `now` (aware) by someone in zone `tz`."""
    where = zone(tz)
    body = _LEAD.sub("", unquote(text), count=1)
    body = unquote(_REMIND_INSIDE.sub(" ", body, count=1))
    if len(body.split()) > MAX_WORDS:
        raise ReminderParseError(f"That is too long for a reminder. {EXAMPLE}")
    if _IN_PAST.search(body):
        raise ReminderParseError(f"A reminder cannot be set in the past: say how long from now. {EXAMPLE}")
    wrong = _impossible_clock(body)
    if wrong is not None:
        raise ReminderParseError(f"{wrong} is not a time of day (00:00 to 23:59). {EXAMPLE}")
    every_match = _EVERY.search(body)
    if every_match:
        return _recurring(body, every_match, now, tz, date_only_time)
    in_match = _IN.search(body)
    if in_match:
        seconds = _amount(in_match.group(1)) * _unit(in_match.group(2))
        if seconds <= 0:
            raise ReminderParseError(f"That is now, not later: say how long from now. {EXAMPLE}")
        if seconds > LATEST.total_seconds():
            raise ReminderParseError(f"That is too far off (more than 100 years). {EXAMPLE}")
        task = _task(body[: in_match.start()] + " " + body[in_match.end() :])
        return ParsedReminder(task, (now + timedelta(seconds=seconds)).astimezone(UTC), tz)
    found = _split_time(body, now.astimezone(where), where, languages, date_only_time)
    if found is None:
        raise ReminderParseError(f"I couldn't tell when to remind you. {EXAMPLE}")
    local, task = found
    due = local.astimezone(UTC)
    if due <= now:
        raise ReminderParseError(
            f"{format_when(due, tz)} has already passed. Give a time in the future. {EXAMPLE}"
        )
    return ParsedReminder(task, due, tz)


def _amount(word: str) -> float:
    word = word.lower().replace(",", ".")
    return float(_NUMBERS[word]) if word in _NUMBERS else float(word)


def _unit(word: str) -> int:
    word = word.lower().rstrip("s")
    return next(v for k, v in _UNITS.items() if word.startswith(k))


def unquote(text: str) -> str:
    """`text` without the quotes around all of it, nor a stray quote at either edge."""
    text = text.strip()
    while len(text) >= 2 and _PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    if text[:1] and text[0] in _DOUBLE and sum(text.count(q) for q in _DOUBLE) % 2:
        text = text[1:].strip()
    if text[-1:] and text[-1] in _DOUBLE and sum(text.count(q) for q in _DOUBLE) % 2:
        text = text[:-1].strip()
    return text


def _task(words: str) -> str:
    task = unquote(words.strip(" ,.;:"))
    task = re.sub(r"^\s*(?:to|that|about|of)\b\s*", "", task, flags=re.IGNORECASE)
    task = unquote(re.sub(r"\s+", " ", task).strip(" ,.;:"))
    if not task:
        raise ReminderParseError(f"What should I remind you of? {EXAMPLE}")
    return task


def _split_time(
    body: str, local_now: datetime, where: ZoneInfo, languages: tuple[str, ...], date_only_time: str
) -> tuple[datetime, str] | None:
    """The longest run of words at the start or end of `body` that reads as a time; the rest: the task."""
    words = body.split()
    best: tuple[int, datetime, str] | None = None
    for i in range(1, len(words) + 1):
        n = len(words) - i
        for time_words, task_words in ((words[:i], words[i:]), (words[n:], words[:n])):
            phrase = " ".join(time_words)
            if best is not None and len(time_words) <= best[0]:
                continue
            if not _TIME_WORDS.search(phrase) or not task_words:
                continue
            when = _read_time(phrase, local_now, where, languages, date_only_time)
            if when is not None:
                best = (len(time_words), when, " ".join(task_words))
    if best is None:
        return None
    return best[1], _task(best[2])


def _read_time(
    phrase: str, local_now: datetime, where: ZoneInfo, languages: tuple[str, ...], date_only_time: str
) -> datetime | None:
    import dateparser  # ~0.3 s to import: only when a reminder is read

    cleaned = re.sub(r"^(?:on|at|by)\s+", "", phrase.strip(" ,.;:"), flags=re.IGNORECASE)
    cleaned = _BARE_AT.sub(lambda m: f"{m.group(1)} {m.group(2)}:00", cleaned)
    settings: Any = {
        "PREFER_DATES_FROM": "future",
        "RELATIVE_BASE": local_now.replace(tzinfo=None),
        "RETURN_AS_TIMEZONE_AWARE": False,
    }
    parsed = dateparser.parse(cleaned, languages=list(languages), settings=settings)
    if parsed is None:
        return None
    if not _CLOCK.search(cleaned):  # a date alone: the configured time of that day
        hour, minute = (int(x) for x in date_only_time.split(":"))
        parsed = parsed.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return _local(parsed.date(), parsed.time().replace(microsecond=0), where)


def _local(day: date, at: time, where: ZoneInfo) -> datetime:
    """The wall-clock time `at` on `day` in zone `where` (a time skipped by DST moves past the gap)."""
    naive = datetime.combine(day, at)
    aware = naive.replace(tzinfo=where)
    # A time in the spring-forward gap does not exist: round-tripping through UTC moves it on.
    return aware.astimezone(UTC).astimezone(where)


def _recurring(body: str, m: re.Match[str], now: datetime, tz: str, date_only_time: str) -> ParsedReminder:
    unit = m.group(1).lower()
    hour_s, minute_s, ampm = m.group(2), m.group(3), (m.group(4) or "").lower()
    if hour_s is None:
        default_h, default_m = (int(x) for x in date_only_time.split(":"))
        hour, minute = {"morning": (8, 0), "evening": (19, 0)}.get(unit, (default_h, default_m))
    else:
        hour, minute = int(hour_s), int(minute_s or 0)
        if ampm == "pm" and hour < 12:
            hour += 12
        elif ampm == "am" and hour == 12:
            hour = 0
    if hour > 23 or minute > 59:
        raise ReminderParseError(f"{hour_s}:{minute_s or '00'} is not a time of day. {EXAMPLE}")
    rest = body[: m.start()] + " " + body[m.end() :]
    rest = re.sub(r"\bat\s+\d{1,2}(?::\d{2})?\s*(?:am|pm)?\b", " ", rest, flags=re.IGNORECASE)
    every: Every = {"at": f"{hour:02d}:{minute:02d}"}
    if unit in WEEKDAYS:
        every["weekday"] = WEEKDAYS.index(unit)
    elif unit == "weekday":
        every["weekdays"] = [0, 1, 2, 3, 4]
    return ParsedReminder(_task(rest), next_occurrence(every, tz, now), tz, every)


def next_occurrence(every: Every, tz: str, after: datetime) -> datetime:
    """The first occurrence of a recurrence strictly after `after` (UTC), at its wall-clock time in `tz`."""
    where = zone(tz)
    hour, minute = (int(x) for x in str(every["at"]).split(":"))
    days = every.get("weekdays") or ([every["weekday"]] if "weekday" in every else list(range(7)))
    local_after = after.astimezone(where)
    for offset in range(0, 8):
        day = local_after.date() + timedelta(days=offset)
        if day.weekday() not in days:
            continue
        when = _local(day, time(hour, minute), where)
        if when.astimezone(UTC) > after.astimezone(UTC):
            return when.astimezone(UTC)
    raise ReminderParseError(f"That repetition never happens. {EXAMPLE}")  # pragma: no cover


def format_when(due: datetime, tz: str) -> str:
    """ "Friday 4 December 2026 at 18:00 (Europe/Lisbon)": the date and clock time in the zone."""
    local = due.astimezone(zone(tz))
    return f"{local.strftime('%A')} {local.day} {local.strftime('%B %Y')} at {local.strftime('%H:%M')} ({tz})"


def format_every(every: Every) -> str:
    """ "every Monday at 08:00" for a recurrence."""
    if "weekday" in every:
        return f"every {WEEKDAYS[int(every['weekday'])].capitalize()} at {every['at']}"
    if every.get("weekdays"):
        return f"every weekday at {every['at']}"
    return f"every day at {every['at']}"
