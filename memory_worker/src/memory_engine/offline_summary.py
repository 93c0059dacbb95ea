"""The offline summarizer: an extractive summary in the anchored sections, by rules alone.

It names what the conversation was about: the people, pets, places, projects, titles and
other named things that the speakers mention ("my dog Biscuit", "a trip to Lisbon", "the
project Atlas", "\"Dune\""), ranked by how often they come up, with the key sentences that
mention them. Only what people wrote counts: the bot's own words are derived from them (and
an offline bot's replies are mostly its own boilerplate).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .text import STOPWORDS, tokens

SECTIONS = (
    "## Objective",
    "## Important Details",
    "## Work State (Completed / Active / Blocked)",
    "## Next Move",
    "## Relevant Files",
)
MAX_SUMMARY_CHARS = 12000
TOPICS_SHOWN = 10  # named things in the Objective line
KEY_SENTENCES = 6

_WORD = re.compile(r"[^\W_][\w'’\-]*")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FILE = re.compile(
    r"(?:https?://\S+|\b[\w\-./]+\.(?:py|js|ts|md|txt|json|toml|yaml|yml|csv|pdf|png|jpg|docx?|xlsx?|sql|sh|html|css|go|rs|java|c|h|cpp)\b)"
)
_QUOTED = re.compile(r"[\"“«]([^\"”»\n]{2,60})[\"”»]")

_ANIMALS = (
    "dog|cat|puppy|kitten|parrot|hamster|rabbit|bunny|horse|pony|bird|fish|turtle|tortoise|"
    "snake|lizard|pig|goat"
)
_PEOPLE = (
    "sister|brother|mom|mum|mother|dad|father|wife|husband|partner|son|daughter|friend|boss|"
    "colleague|coworker|girlfriend|boyfriend|fiancée|fiancee|fiancé|fiance|cousin|aunt|uncle|"
    "grandma|grandmother|grandpa|grandfather|niece|nephew|roommate|neighbour|neighbor|teacher"
)
_WORKS = (
    "project|app|startup|company|band|book|novel|game|podcast|blog|website|site|"
    "thesis|paper|course|show|film|movie|album|song|team|club|shop|business"
)
# Capitalised words that name nothing: months and days are dates, not topics.
_NOT_NAMES = frozenset(
    {
        *("i", "i'm", "i've", "i'll", "i'd", "ok", "okay", "yes", "no", "hi", "hello", "hey", "thanks"),
        *("dear", "mr", "mrs", "ms", "dr", "lol", "omg", "today", "tomorrow", "yesterday"),
        *("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        *("january", "february", "march", "april", "may", "june", "july", "august"),
        *("september", "october", "november", "december"),
    }
)
_NAMED = r"\s+(?:is\s+)?(?:named\s+|called\s+)?$"
_CUES: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(rf"\bmy\s+(?:little\s+|old\s+|new\s+)?({_ANIMALS}){_NAMED}", re.I), None),
    (re.compile(rf"\bmy\s+(?:little\s+|older\s+|younger\s+|big\s+|best\s+)?({_PEOPLE}){_NAMED}", re.I), None),
    (re.compile(rf"\b(?:the|a|an|my|our|new|this)\s+({_WORKS}){_NAMED}", re.I), None),
    (re.compile(rf"\b({_WORKS}){_NAMED}", re.I), None),
    (
        re.compile(
            r"\b(?:in|to|from|at|near|around|visit|visiting|visited|towards|across)\s+(?:the\s+)?$", re.I
        ),
        "place",
    ),
]
# "talked to Ana", "gave it to Ben": people after a preposition, not places.
_TO_SOMEONE = re.compile(
    r"\b(?:talk|talked|talking|speak|spoke|said|say|says|wrote|write|writing|sent|send|gave|give|"
    r"listen|listened|listening|reply|replied|explained|introduced|married|engaged|next|thanks)"
    r"(?:\s+\w+)?\s+(?:to|at|from)\s+$",
    re.I,
)
_CALLED = re.compile(r"(\b[\w ]{0,40}?)\s(?:named|called)\s+([^\W\d_][\w'’\-]*)", re.I)
_AFTER = re.compile(rf"^\s+({_WORKS})\b", re.I)  # "the Atlas project"


def _speaker(m: dict[str, Any]) -> str:
    return m.get("author") or m.get("role") or "someone"


def _is_name_word(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in STOPWORDS and word.lower() not in _NOT_NAMES


def _runs(sentence: str) -> list[tuple[int, int, str, bool]]:
    """Runs of capitalised words: (start, end, text, at sentence start)."""
    words = list(_WORD.finditer(sentence))
    out = []
    i = 0
    while i < len(words):
        if not _is_name_word(words[i].group()):
            i += 1
            continue
        j = i
        # "Bank of America", "Rio de Janeiro": a small word between two capitalised ones.
        while j + 1 < len(words):
            nxt = words[j + 1].group()
            if _is_name_word(nxt):
                j += 1
            elif nxt.lower() in ("of", "de", "da", "del", "van", "von", "la", "le") and j + 2 < len(words):
                if not _is_name_word(words[j + 2].group()):
                    break
                j += 2
            else:
                break
            if j - i >= 3:
                break
        start, end = words[i].start(), words[j].end()
        leading = not sentence[:start].strip(" \t\"'“(-*")
        out.append((start, end, sentence[start:end].strip("'’-"), leading))
        i = j + 1
    return out


def _kind(before: str, after: str) -> str | None:
    for pattern, kind in _CUES:
        m = pattern.search(before)
        if m:
            if kind == "place" and _TO_SOMEONE.search(before):
                return None
            return kind or m.group(1).lower()
    m = _AFTER.match(after)
    return m.group(1).lower() if m else None


def named_things(messages: list[dict[str, Any]]) -> list[tuple[str, str | None, int]]:
    """(name, kind or None, mentions) of what the speakers talk about, most mentioned first."""
    speakers = {_speaker(m).lower() for m in messages}
    counts: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    spelled: dict[str, str] = {}
    initial: Counter[str] = Counter()  # seen only at the start of a sentence (maybe not a name)

    def add(name: str, kind: str | None, at_start: bool) -> None:
        key = name.lower()
        if key in speakers or len(name) > 60:
            return
        spelled.setdefault(key, name)
        if at_start and kind is None:
            initial[key] += 1
            return
        counts[key] += 1
        if kind:
            kinds.setdefault(key, Counter())[kind] += 1

    for m in messages:
        if m.get("role") != "user":
            continue
        text = m.get("text", "")
        for q in _QUOTED.findall(text):
            if q.strip() and q.strip()[0].isupper():
                add(q.strip(), "title", False)
        text = _QUOTED.sub(" ", text)  # a title's words are not names of their own
        for cue, name in _CALLED.findall(text):  # typed in lower case: only an explicit "called"
            if not name[:1].isupper() and name not in STOPWORDS:
                add(name, _kind(cue + " ", "") or None, False)
        for s in _SENTENCE.findall(text):
            for start, end, name, leading in _runs(s):
                add(name, _kind(s[:start], s[end:]), leading)
    for key, n in initial.items():
        if key in counts:  # also named mid-sentence somewhere: a name after all
            counts[key] += n
    ranked = sorted(counts, key=lambda k: (-(counts[k] + 2 * bool(kinds.get(k))), k))
    out = []
    for key in ranked:
        kind = kinds[key].most_common(1)[0][0] if key in kinds else None
        out.append((spelled[key], kind, counts[key]))
    return out


# Words that say how people feel about something, not what it is.
_FILLER = frozenset(
    {
        *("wow", "great", "cool", "nice", "awesome", "amazing", "sure", "yeah", "love", "good", "glad"),
        *("totally", "definitely", "absolutely", "thanks", "called", "named", "happy", "sounds", "fun"),
    }
)


def _frequent_words(said: list[dict[str, Any]], n: int = 6) -> list[str]:
    skip = _FILLER | {w for m in said for w in tokens(_speaker(m))}
    # Bounded in length: one 60k-character "word" must not fill the summary.
    words = Counter(
        t
        for m in said
        for t in tokens(m.get("text", ""))
        if t not in STOPWORDS and t not in skip and 2 < len(t) <= 32 and not t.isdigit()
    )
    return [w for w, _ in words.most_common(n)]


def _label(name: str, kind: str | None) -> str:
    if kind == "title":
        return f"“{name}”"
    return f"{name} ({kind})" if kind else name


def _sections_of(summary: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {h: [] for h in SECTIONS}
    current = None
    for line in summary.splitlines():
        if line.strip() in out:
            current = line.strip()
        elif current and line.strip() and line.strip() != "- None":
            out[current].append(line.rstrip())
    return out


def _merge(old: list[str], new: list[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for line in old + new:
        seen.pop(line, None)
        seen[line] = None  # newest occurrence last
    return list(seen)[-limit:]


_OBJECTIVE = re.compile(r"^- Conversation with (?P<who>.+?) about: (?P<what>.+)\.$")


def _objective(old: list[str], who: list[str], labels: list[str]) -> list[str]:
    """One line naming the speakers and topics, the previous summary's folded in (newest first)."""
    prev = _OBJECTIVE.match(old[0]) if old else None
    if prev:
        who = list(dict.fromkeys(who + prev["who"].split(", ")))
        labels = list(dict.fromkeys(labels + prev["what"].split("; ")))
    people = ", ".join(w for w in who[:6] if w) or "the user"
    what = "; ".join(labels[:TOPICS_SHOWN]) or "everyday things"
    return [f"- Conversation with {people} about: {what}."]


async def offline_summarize(previous: str, messages: list[dict[str, Any]]) -> str:
    """An extractive summary in the same sections: topics, facts, key sentences, open questions."""
    return offline_summary(previous, messages)


def offline_summary(previous: str, messages: list[dict[str, Any]]) -> str:
    """The offline summarizer's text (synchronous core of `offline_summarize`)."""
    old = _sections_of(previous) if previous else {h: [] for h in SECTIONS}
    said = [m for m in messages if m.get("role") == "user"]
    speakers = Counter(_speaker(m) for m in said)
    things = named_things(messages)
    labels = [_label(name, kind) for name, kind, _ in things]
    if len(labels) < 3:  # little is named (or everything typed in lower case): the frequent words too
        labels += [w for w in _frequent_words(said) if w not in {n.lower() for n, _, _ in things}]
    objective = _objective(old[SECTIONS[0]], [s for s, _ in speakers.most_common(6)], labels)

    from .facts import extract_facts  # the rules are compiled on first use (see engine.apply_facts)

    details: list[str] = []
    for m in said:
        for f in extract_facts(m.get("text", "")):
            details.append(f"- {_speaker(m)}: {f.key} = {f.value}")
    # Key sentences: those naming the most (and most talked-about) things, later ones first on ties.
    weight = [(re.compile(r"\b" + re.escape(name) + r"\b"), n) for name, _, n in things[: TOPICS_SHOWN * 2]]
    scored = []
    for order, m in enumerate(said):
        for s in _SENTENCE.findall(m.get("text", "")):
            s = s.strip()
            if len(s) < 12 or s.endswith("?"):
                continue
            score = sum(n for name, n in weight if name.search(s))
            if score:
                scored.append((score, order, f"- {_speaker(m)}: {s[:200]}"))
    best: dict[str, tuple[int, int, str]] = {}
    for item in scored:  # a sentence said again counts once, at its latest
        best[item[2]] = item
    picked = sorted(best.values(), reverse=True)[:KEY_SENTENCES]
    details += [line for _, _, line in sorted(picked, key=lambda x: x[1])]

    asked = [
        f"- {_speaker(m)} asked: {s.strip()[:200]}"
        for m in said
        for s in _SENTENCE.findall(m.get("text", ""))
        if s.strip().endswith("?") and len(s.strip()) > 8
    ]
    questions = _merge([], asked, 4)
    last = messages[-1].get("ts") if messages else None
    active = ", ".join(name for name, _, _ in things[:5])
    work = [
        f"- Completed: {len(messages)} more messages summarized (up to {last}).",
        "- Active: " + (active or "general conversation") + ".",
        "- Blocked: " + ("open questions below." if questions else "nothing known."),
    ]
    next_move = questions or ["- Continue the conversation; answer from memory when asked."]
    files = sorted({f[:200] for m in messages for f in _FILE.findall(m.get("text", ""))})[:10]

    merged = {
        SECTIONS[0]: objective,
        SECTIONS[1]: _merge(old[SECTIONS[1]], details, 30),
        SECTIONS[2]: work,
        SECTIONS[3]: next_move,
        SECTIONS[4]: _merge(old[SECTIONS[4]], [f"- {f}" for f in files], 15),
    }
    parts = []
    for heading in SECTIONS:
        body = merged[heading] or ["- None"]
        parts.append(heading + "\n" + "\n".join(body))
    return "\n\n".join(parts)[:MAX_SUMMARY_CHARS]
