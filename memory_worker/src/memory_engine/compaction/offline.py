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

from memory_engine.api import wire
from memory_engine.facts.extract import extract_facts, is_list_key, merge_list
from memory_engine.facts.patterns import LazyRe, lazy
from memory_engine.index.names import name_words
from memory_engine.index.text import STOPWORDS, tokens

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

_WORD = lazy(r"[^\W_][\w'’\-]*", 0)
_SENTENCE = lazy(r"[^.!?\n]+[.!?]?", 0)
_FILE = lazy(
    r"(?:https?://\S+|\b[\w\-./]+\.(?:py|js|ts|md|txt|json|toml|yaml|yml|csv|pdf|png|jpg|docx?|xlsx?|sql|sh|html|css|go|rs|java|c|h|cpp)\b)",
    0,
)
_URL = lazy(r"https?://[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]", 0)
_QUOTED = lazy(r"[\"“«]([^\"”»\n]{2,60})[\"”»]", 0)

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
_CUES: list[tuple[LazyRe, str | None]] = [
    (lazy(rf"\bmy\s+(?:little\s+|old\s+|new\s+)?({_ANIMALS}){_NAMED}", re.I), None),
    (lazy(rf"\bmy\s+(?:little\s+|older\s+|younger\s+|big\s+|best\s+)?({_PEOPLE}){_NAMED}", re.I), None),
    (lazy(rf"\b(?:the|a|an|my|our|new|this)\s+({_WORKS}){_NAMED}", re.I), None),
    (lazy(rf"\b({_WORKS}){_NAMED}", re.I), None),
    (
        lazy(r"\b(?:in|to|from|at|near|around|visit|visiting|visited|towards|across)\s+(?:the\s+)?$", re.I),
        "place",
    ),
]
# "talked to Ana", "gave it to Ben": people after a preposition, not places.
_TO_SOMEONE = lazy(
    r"\b(?:talk|talked|talking|speak|spoke|said|say|says|wrote|write|writing|sent|send|gave|give|"
    r"listen|listened|listening|reply|replied|explained|introduced|married|engaged|next|thanks)"
    r"(?:\s+\w+)?\s+(?:to|at|from)\s+$",
    re.I,
)
_CALLED = lazy(r"(\b[\w ]{0,40}?)\s(?:named|called)\s+([^\W\d_][\w'’\-]*)", re.I)
_AFTER = lazy(rf"^\s+({_WORKS})\b", re.I)  # "the Atlas project"


def _speaker(m: wire.Message) -> str:
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


def named_things(
    messages: list[wire.Message], people: frozenset[str] = frozenset()
) -> list[tuple[str, str | None, int]]:
    """(name, kind or None, mentions) of what the speakers talk about, most mentioned first.

    `people`: the folded words of the speakers' names and aliases: a name of theirs is no topic.
    """
    speakers = {_speaker(m).lower() for m in messages}
    counts: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = {}
    spelled: dict[str, str] = {}
    initial: Counter[str] = Counter()  # seen only at the start of a sentence (maybe not a name)

    def add(name: str, kind: str | None, at_start: bool) -> None:
        key = name.lower()
        if key in speakers or len(name) > 60 or (people and name_words(name) <= people):
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
        text = _URL.sub(" ", m.get("text", ""))
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
        *("lol", "haha", "lmao", "omg", "gonna", "wanna", "gotta", "yep", "nope", "okay", "just", "like"),
        *("really", "also", "still", "even", "much", "well", "got", "get", "know", "think", "one", "thing"),
        *("things", "tbh", "btw", "idk", "imo", "pls", "please", "thx", "today", "tomorrow", "yesterday"),
        *("anyone", "everyone", "someone", "something", "anything", "everything", "would", "could", "should"),
        *("going", "want", "need", "make", "made", "back", "time", "now", "yeah", "yes", "right", "see"),
    }
)


def _split(text: str) -> list[str]:
    return text.split()


# Question words and chat's function words: never a topic.
_NOT_TOPICS = frozenset(
    _split(
        "what whats where when which who whom whose why how does did do anyone anybody everyone "
        "someone somebody u ur ya yall guys pls plz thanks thank sorry oops btw lol haha hahaha lmao "
        "ok okay yes yeah nope nah maybe dont cant wont isnt im ive youre thats theres "
        # the verbs and nouns people state things with ("my name is", "I live in"): the thing
        # they state is the topic, not these
        "name names live lives living work works working say said says tell told feel feels "
        "mean means guess actually pretty kinda lot bit way stuff take took come came went "
        "look looks looking"
    )
)


def _frequent_words(said: list[wire.Message], n: int = 6, people: frozenset[str] = frozenset()) -> list[str]:
    skip = _FILLER | _NOT_TOPICS | people | {w for m in said for w in tokens(_speaker(m))}
    # Bounded in length: one 60k-character "word" must not fill the summary.
    words = Counter(
        t
        for m in said
        for t in tokens(_URL.sub(" ", m.get("text", "")))
        if t not in STOPWORDS
        and t not in skip
        and 2 < len(t) <= 32
        and not t.isdigit()
        and name_words(t) - skip
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
        elif current and line.strip() and line.strip().lower() != "- none":
            out[current].append(line.rstrip())
    return out


def _merge(old: list[str], new: list[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for line in old + new:
        seen.pop(line, None)
        seen[line] = None  # newest occurrence last
    return list(seen)[-limit:]


_OBJECTIVE = lazy(r"^- Conversation with (?P<who>.+?) about: (?P<what>.+)\.$", 0)


def _objective(old: list[str], who: list[str], labels: list[str]) -> list[str]:
    """One line naming the speakers and topics, the previous summary's folded in (newest first)."""
    prev = _OBJECTIVE.match(old[0]) if old else None
    if prev:
        who = list(dict.fromkeys(who + prev["who"].split(", ")))
        labels = list(dict.fromkeys(labels + prev["what"].split("; ")))
    people = ", ".join(w for w in who[:6] if w) or "the user"
    what = "; ".join(labels[:TOPICS_SHOWN]) or "everyday things"
    return [f"- Conversation with {people} about: {what}."]


async def offline_summarize(previous: str, messages: list[wire.Message]) -> str:
    """An extractive summary in the same sections: topics, facts, key sentences, open questions."""
    return offline_summary(previous, messages)


def offline_summary(previous: str, messages: list[wire.Message]) -> str:
    """The offline summarizer's text (synchronous core of `offline_summarize`)."""
    old = _sections_of(previous) if previous else {h: [] for h in SECTIONS}
    said = [m for m in messages if m.get("role") == "user"]
    speakers = Counter(_speaker(m) for m in said)
    current, changes = _people_facts(old[SECTIONS[1]], said)
    # The speakers' names, first names and the names they go by are people, not topics.
    people = frozenset().union(
        *(name_words(s) for s in speakers),
        *(name_words(v.replace(",", " ")) for (_, key), v in current.items() if key in ("name", "alias")),
    )
    things = named_things(messages, people)
    labels = [_label(name, kind) for name, kind, _ in things]
    if len(labels) < 3:  # little is named (or everything typed in lower case): the frequent words too
        labels += [
            w for w in _frequent_words(said, people=people) if w not in {n.lower() for n, _, _ in things}
        ]
    objective = _objective(old[SECTIONS[0]], [s for s, _ in speakers.most_common(6)], labels)

    details = [f"- {who}: {key} = {value}" for (who, key), value in current.items()]
    details += changes
    stale = {(who, v.casefold()) for who, v in _superseded(said, current)}
    # Key sentences: those naming the most (and most talked-about) things, later ones first on ties;
    # none that states a value since replaced ("I live in Lisbon" after a move to Porto).
    weight = [(re.compile(r"\b" + re.escape(name) + r"\b"), n) for name, _, n in things[: TOPICS_SHOWN * 2]]
    scored = []
    for order, m in enumerate(said):
        for s in _SENTENCE.findall(_URL.sub(" ", m.get("text", ""))):
            s = s.strip()
            if (
                len(s) < 12
                or s.endswith("?")
                or any(w == _speaker(m) and v in s.casefold() for w, v in stale)
            ):
                continue
            score = sum(n for name, n in weight if name.search(s))
            if score:
                scored.append((score, order, f"- {_speaker(m)}: {s[:200]}"))
    best: dict[str, tuple[int, int, str]] = {}
    for item in scored:  # a sentence said again counts once, at its latest
        best[item[2]] = item
    picked = sorted(best.values(), reverse=True)[:KEY_SENTENCES]
    kept = [  # the previous summary's key sentences, but none stating a replaced value
        line
        for line in old[SECTIONS[1]]
        if not _FACT_LINE.match(line)
        and " moved from " not in line
        and not any(line.startswith(f"- {w}:") and v in line.casefold() for w, v in stale)
    ]
    sentences = _merge(kept, [line for _, _, line in sorted(picked, key=lambda x: x[1])], 30)
    details += sentences[-max(0, 30 - len(details)) :] if len(details) < 30 else []

    questions = _merge([], _open_questions(said, people), 4)
    last = messages[-1].get("ts") if messages else None
    total = _summarized_before(old[SECTIONS[2]]) + len(messages)
    active = ", ".join(name for name, _, _ in things[:5])
    work = [f"- Completed: {total} messages summarized (up to {last})."]
    if active:
        work.append(f"- Active: {active}.")
    if questions:
        work.append("- Blocked: the open questions below.")
    next_move = questions
    files = _files(messages)

    merged = {
        SECTIONS[0]: objective,
        SECTIONS[1]: details[:40],
        SECTIONS[2]: work,
        SECTIONS[3]: next_move,
        SECTIONS[4]: _merge(old[SECTIONS[4]], [f"- {f}" for f in files], 15),
    }
    parts = []
    for heading in SECTIONS:
        body = merged[heading] or ["- none"]
        parts.append(heading + "\n" + "\n".join(body))
    return "\n\n".join(parts)[:MAX_SUMMARY_CHARS]


_FACT_LINE = lazy(r"^- (?P<who>.+?): (?P<key>[a-z_]+) = (?P<value>.+)$", 0)
_MOVED = {"location": "moved from {old} to {new}"}


def _people_facts(old: list[str], said: list[wire.Message]) -> tuple[dict[tuple[str, str], str], list[str]]:
    """Each speaker's current facts (the previous summary's, then the messages'), and the moves."""
    current: dict[tuple[str, str], str] = {}
    changes: list[str] = []
    for line in old:
        stated = _FACT_LINE.match(line)
        if stated:
            current[(stated["who"], stated["key"])] = stated["value"]
        elif " moved from " in line:
            changes.append(line)
    previous: dict[str, str] = {}
    for message in said:
        who, text = _speaker(message), message.get("text", "")
        for f in extract_facts(text, previous=previous.get(who)):
            slot = (who, f.key)
            if is_list_key(f.key) or f.remove_from:
                if f.remove_from:
                    gone = merge_list(current.get((who, f.remove_from)), remove=f.value)
                    current[(who, f.remove_from)] = gone
                if f.add:
                    current[slot] = merge_list(current.get(slot), add=f.value)
                continue
            was = current.get(slot)
            if was and was.casefold() != f.value.casefold() and f.key in _MOVED:
                changes.append(f"- {who}: " + _MOVED[f.key].format(old=was, new=f.value))
            current[slot] = f.value
        previous[who] = text
    return {k: v for k, v in current.items() if v}, changes[-10:]


def _superseded(said: list[wire.Message], current: dict[tuple[str, str], str]) -> list[tuple[str, str]]:
    """(speaker, value) of every value a speaker stated that is no longer theirs."""
    out: list[tuple[str, str]] = []
    for m in said:
        for f in extract_facts(m.get("text", "")):
            now = current.get((_speaker(m), f.key), "")
            if f.value.casefold() not in now.casefold():
                out.append((_speaker(m), f.value))
    return out


_COMPLETED = lazy(r"Completed: (\d+) (?:more )?messages", 0)


def _summarized_before(work: list[str]) -> int:
    """How many messages the previous summary said it covered."""
    for line in work:
        m = _COMPLETED.search(line)
        if m:
            return int(m.group(1))
    return 0


def _content(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in STOPWORDS and t not in _FILLER and len(t) > 2}


_ANSWER_START = lazy(
    r"^\W*(?:me|yes|yep|yeah|yup|no|nope|nah|not|sure|i|i'?m|im|my|we|two|one|three|\d)\b", re.I
)


def _open_questions(said: list[wire.Message], people: frozenset[str] = frozenset()) -> list[str]:
    """The questions nobody answered.

    Answered: a later message of someone else shares its words; or the person it names (by a
    word of their name or an alias) speaks within the next few messages; or the next message of
    someone else answers at once ("me!", "two, Rex and Ash", "nope").
    """
    out: list[str] = []
    for i, m in enumerate(said):
        for s in _SENTENCE.findall(_URL.sub(" ", m.get("text", ""))):
            s = s.strip()
            if not s.endswith("?") or len(s) <= 8:
                continue
            words = _content(s)
            others = [n for n in said[i + 1 : i + 6] if _speaker(n) != _speaker(m)]
            later = [_content(n.get("text", "")) for n in others]
            if any(len(words & w) * 2 >= max(1, len(words)) for w in later) or (not words and later):
                continue
            asked = name_words(s) & people
            last = tokens(s)[-1] if tokens(s) else ""  # "... dani?": a short form of a name, said last
            short = min(name_words(last), default="") if len(last) >= 3 else ""
            if short:
                asked |= {p for p in people if p.startswith(short)}
            if asked and any(
                name_words(_speaker(n)) & asked and "?" not in n.get("text", "") for n in others
            ):
                continue  # "what do you do ahmed?": Ahmed spoke next
            first = others[0].get("text", "") if others else ""
            if first and "?" not in first and said.index(others[0]) <= i + 2 and _ANSWER_START.match(first):
                continue
            out.append(f"- {_speaker(m)} asked: {s[:200]}")
    return out


def _files(messages: list[wire.Message]) -> list[str]:
    """Whole URLs and file names mentioned, never a piece of a URL."""
    found: set[str] = set()
    for m in messages:
        text = m.get("text", "")
        urls = _URL.findall(text)
        found.update(u[:200] for u in urls)
        found.update(f[:200] for f in _FILE.findall(_URL.sub(" ", text)))
    return sorted(found)[:10]
