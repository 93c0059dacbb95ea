"""The offline model: what answers when no language model is configured.

It says plainly that it is offline (a notice shown to the reader and never recorded as the
bot's words, so the memory and its summaries do not fill up with it) and answers a question
from the one fact, note or earlier message that matches it, about whoever the question names:
"where do I live?" gives the asker's location, "What is Ana's dog called?" Ana's dog, "Who has
a car?" whoever said so, "Where did I live before Lisbon?" the fact history. Each answer says
whose fact or message it is. A question is never evidence; when nothing matches it says so,
briefly. A message that is not a question is acknowledged.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.chat.models.base import AnswerStream, MemoryContext, ModelAnswer, ModelRequest
from bot.chat.models.offline_evidence import WHEN, from_message, one_line, stem
from bot.chat.models.offline_people import Person, fold, named_in, people, phrase, shown, tokens
from memory_engine.api import wire
from memory_engine.notes import asks_about_the_past

OFFLINE_NOTICE = (
    "I'm offline: no language model is configured, so I can only answer from memory. "
    "To talk to a real model, set OPENAI_API_KEY (and OPENAI_BASE_URL for any other "
    "OpenAI-compatible server such as OpenRouter, Ollama or vLLM) in the environment or in .env."
)
OFFLINE_SHORT = "(offline: answering from memory only)"
UNKNOWN = "I don't know that yet: tell me and I'll remember."
NO_MEMORY = "My memory is unreachable right now too, so I have nothing to add."
TOLD_LIMIT = 10000  # chats told the long notice; bounded, a long-running bot must not grow

_ANIMALS = "pet pets dog dogs puppy cat cats kitten rabbit hamster parrot bird fish horse turtle snake"
_RELATIVES = (
    "family sister sisters brother brothers mother mom mum father dad parents wife husband partner "
    "son sons daughter daughters child children kids grandmother grandma grandfather grandpa aunt "
    "uncle cousin niece nephew girlfriend boyfriend fiance fiancee twin"
)


@dataclass(frozen=True)
class _Key:
    """What a question about one fact key sounds like, and how the answer reads."""

    strong: frozenset[str]  # a word that names the key ("live" for location)
    weak: frozenset[str] = frozenset()  # a word that only hints at it ("where")
    template: str = "Your {key} is {value}."


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_KEYS: dict[str, _Key] = {
    "name": _Key(_words("name named called call"), _words("who"), "Your name is {value}."),
    "location": _Key(
        _words("live living lives based city town country located location"),
        _words("where home from"),
        "You live in {value}.",
    ),
    "hometown": _Key(_words("from originally hometown grew"), _words("where")),
    "job": _Key(_words("job occupation profession career"), _words("work do living"), "You work as {value}."),
    "employer": _Key(_words("employer company employed firm"), _words("work where"), "You work at {value}."),
    "age": _Key(_words("old age"), frozenset(), "You are {value}."),
    "birthday": _Key(_words("birthday born birth"), _words("when"), "Your birthday is {value}."),
    "pronouns": _Key(_words("pronouns pronoun"), frozenset(), "Your pronouns are {value}."),
    "likes": _Key(_words("like likes love enjoy hobby hobbies into"), frozenset(), "You like {value}."),
    "dislikes": _Key(_words("dislike dislikes hate detest"), frozenset(), "You don't like {value}."),
    "pets": _Key(_words(_ANIMALS), _words("name called"), "Your pets: {value}."),
    "family": _Key(_words(_RELATIVES), _words("name called"), "Your family: {value}."),
    "diet": _Key(
        _words("diet vegan vegetarian pescatarian halal kosher keto eat meat gluten lactose"), _words("food")
    ),
    "allergies": _Key(_words("allergic allergy allergies")),
    "health": _Key(
        _words(
            "diabetic diabetes coeliac celiac asthma asthmatic epileptic epilepsy lactose intolerant "
            "intolerance condition health"
        )
    ),
    "alias": _Key(_words("nickname nicknames alias aliases"), _words("call calls called")),
    "languages": _Key(_words("speak speaks language languages fluent")),
}
# Weights: a naming word counts three times a hint; an animal or relative word four times,
# so "my dog's name" is about the dog, not about your own name.
_STRONG, _WEAK, _SPECIFIC = 3, 1, 4
_NEGATED_LIKE = re.compile(r"\b(don'?t|do not|doesn'?t|never)\b[\w\s]{0,12}\blike\b", re.I)
# "what ... know ... about me", each searched after the one before: linear, where one pattern
# with two `.*` rescans the rest of the text from every "what".
_ABOUT_ME = (
    re.compile(r"\b(?:what|everything)\b", re.I),
    re.compile(r"\b(?:know|remember)\b", re.I),
    re.compile(r"\babout me\b", re.I),
)


def _asks_about_me(text: str) -> bool:
    at = 0
    for pattern in _ABOUT_ME:
        found = pattern.search(text, at)
        if found is None:
            return False
        at = found.end()
    return True


_QUESTION_START = re.compile(
    r"^\s*(what|what's|whats|where|who|whom|which|when|why|how|do|does|did|can|could|would|will|"
    r"is|are|am|tell me|remind me|remember|recall|say|anyone|anybody|any1|has anyone|whos|who's)\b",
    re.I,
)
# Who a question names without the chat knowing them ("what is Ahmed's cat called?" when no
# Ahmed has spoken or has a fact): nobody's answer fits, so it does not know.
_POSSESSIVE = re.compile(
    r"(?<!\bmy )(?<!\byour )(?<!\bthe )(?<!\bour )(?<!\bhis )(?<!\bher )\b(\w+)['\u2019]s\b", re.I
)
_SUBJECT_NAME = re.compile(r"\b(?:[Dd]oes|[Dd]id|[Ii]s|[Ww]as|[Hh]as|[Aa]bout)\s+([A-Z][\w'-]+)")
_NOT_PERSON = _words(
    "it that what who where there here everyone everybody anyone anybody someone somebody one "
    "today tomorrow yesterday tonight he she they this the my your our their his her i let "
    "today's everyone's nobody nobody's"
)
_STOP = _words(
    "a an the i me my mine you your yours is are am was were be been do does did what what's whats "
    "where who whom which when why how can could would will tell remind remember recall say said know "
    "of in on at to for about with and or it that this there here please again any some s d ll m re ve "
    "has have had got anyone anybody someone somebody everyone us we our called named"
)
_DOING = _words("do does doing for work living u you")
_WHO = frozenset(("who", "whose", "anyone", "anybody", "someone", "somebody", "which"))
_ME = frozenset(("i", "my", "me", "mine", "am", "myself"))
_ABOUT_SOMEONE = _words("what who do does you know about tell me is everything anything s")
_KIN_WORDS = _words(_ANIMALS) | _words(_RELATIVES)
_NOTES = frozenset(("remember", "remembered", "note", "notes", "noted", "reminder"))
SETTINGS_FACTS = frozenset(("followups", "timezone"))  # a person's choices, kept as facts: not news
# A message that is a greeting and nothing more ("hi there!", "Good morning, everyone").
_GREETING = re.compile(
    r"^\W*(?P<greeting>hi|hello|hey|hiya|howdy|yo|greetings|good (?:morning|afternoon|evening|day)|"
    r"morning|evening|hallo|hola|olá|ola|bonjour|salut|ciao|moin|servus|hej|hoi)\b"
    r"(?P<rest>[\s,!.]*(?:there|all|everyone|everybody|folks|guys|bot|again)?[\s,!.]*)",
    re.IGNORECASE,
)
# Used only when the memory worker extracted no fact: the same rules, read from old messages.
_SAID = {
    "name": re.compile(
        r"\b(?:my name is|my name's|call me|i am called|i'm called)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)",
        re.I,
    ),
    "location": re.compile(
        r"\b(?:i live in|i'm living in|i am living in|i'm from|i am from|i moved to|i'm based in)"
        r"\s+([^.,!?\n]+)",
        re.I,
    ),
    "likes": re.compile(r"\bi (?:really )?(?:like|love|enjoy)\s+([^.,!?\n]+)", re.I),
    "dislikes": re.compile(r"\bi (?:really )?(?:dislike|hate|don'?t like)\s+([^.,!?\n]+)", re.I),
}


def is_question(text: str) -> bool:
    """True for a question (a question mark, or a question word first)."""
    return "?" in text or bool(_QUESTION_START.match(text))


def _key_score(key: str, words: set[str], text: str, value: str = "") -> int:
    """How strongly a question (its `words`) asks for `key` (and its `value`, when known)."""
    if key.startswith("favorite_"):
        thing = set(key.removeprefix("favorite_").split("_"))
        if not thing & (words | {w.rstrip("s") for w in words}):
            return 0
        return _SPECIFIC + (_STRONG if "favorite" in words else 0)
    spec = _KEYS.get(key)
    if spec is None:
        named = set(key.split("_")) & words
        return _STRONG * len(named)
    if key == "likes" and _NEGATED_LIKE.search(text):
        return 0
    weight = _SPECIFIC if key in ("pets", "family") else _STRONG
    score = weight * len(spec.strong & words) + _WEAK * len(spec.weak & words)
    if key == "dislikes" and _NEGATED_LIKE.search(text):
        score += _STRONG
    if key == "job" and {"what", "do"} <= words and not words - _STOP - _DOING:
        score += _STRONG  # "what does Priya do (for work)?"
    if key == "employer" and "work" in words and words & {"where", "for"}:
        score += _STRONG  # "where do I work" asks for the place, "what is my work" the job
    if score and value:  # "what's my dog called": the dog item itself is named
        score += len(set(tokens(value)) & words)
    return score


class OfflineModel:
    """The built-in model used when no API key is set: says it is offline, answers from memory."""

    model = "offline"

    def __init__(self) -> None:
        # Chats already told the long notice in this process; later answers get a short tag.
        self._told: set[str] = set()

    def answer(self, request: ModelRequest) -> ModelAnswer:
        """The offline answer to one request: the notice apart from the words."""
        first = request.chat_key not in self._told
        if len(self._told) > TOLD_LIMIT:
            self._told.clear()
        self._told.add(request.chat_key)
        notice = OFFLINE_NOTICE if first else OFFLINE_SHORT
        return ModelAnswer(text=self.reply_to(request), model=self.model, notice=notice)

    def reply_to(self, request: ModelRequest) -> str:
        """The words of the answer (what memory records)."""
        mem = request.memory
        if mem is None:
            return NO_MEMORY
        facts = _own_facts(mem.facts, request.author_id, request.author)
        text = request.text
        greeting = _GREETING.match(text)
        if greeting and greeting.end() == len(text):  # a greeting alone gets a greeting
            return _greet(greeting.group("greeting"))
        if not is_question(text):
            said = f" {' '.join(tokens(text))} "
            learned = [
                f"{k}: {shown(k, v)}"
                for k, v in facts.items()
                if k not in SETTINGS_FACTS and tokens(v) and f" {' '.join(tokens(v))} " in said
            ]
            noted = f"Noted, I'll remember that ({'; '.join(learned)})." if learned else "Noted."
            return f"{_greet(greeting.group('greeting')).split('!')[0]}! {noted}" if greeting else noted
        if _asks_about_me(text):
            if not facts:
                return UNKNOWN
            known = "; ".join(f"{k}: {shown(k, v)}" for k, v in facts.items() if k not in SETTINGS_FACTS)
            return f"What I know about you: {known}." if known else UNKNOWN
        return _Question(request, mem, facts).answer() or UNKNOWN

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """The offline answer, instantly."""
        return self.answer(request)

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> AnswerStream:
        """The offline answer as a one-piece stream."""
        return _OneShot(self.answer(request))


def _greet(word: str) -> str:
    """A greeting back, in the greeter's words ("Good morning!"), and what the offline bot can do."""
    back = word[:1].upper() + word[1:].lower() if word.lower().startswith("good ") else "Hello"
    return f"{back}! Tell me anything and I'll remember it, or ask me what I know."


def _own_facts(facts: Iterable[wire.Fact], author_id: str, author: str) -> dict[str, str]:
    """The speaker's current facts, key -> value (the first value of a key wins)."""
    facts = list(facts)
    mine = [f for f in facts if str(f.get("author_id") or "") == author_id] or [
        f for f in facts if not f.get("author_id") and f.get("author") == author
    ]
    by_key: dict[str, str] = {}
    for f in mine:
        if f.get("kind", "fact") == "fact":
            by_key.setdefault(str(f.get("key", "")).lower(), str(f.get("value", "")))
    return by_key


class _Question:
    """One question, answered from the facts of whoever it is about, the notes, then the messages."""

    def __init__(self, request: ModelRequest, mem: MemoryContext, own: dict[str, str]) -> None:
        self.request, self.mem, self.own = request, mem, own
        self.text = request.text
        self.tokens = tokens(request.text)
        self.messages = [
            m
            for m in (*mem.retrieved, *mem.recent)
            if m.get("role", "user") == "user" and not is_question(str(m.get("text") or ""))
        ]  # a question is never evidence
        self.everyone = people(mem.facts, [*mem.recent, *mem.retrieved])
        named = named_in(self.tokens, self.everyone, request.author_id)
        self.other = named if named and named.author_id != request.author_id else None
        self.stranger = named is None and _names_a_stranger(request.text, self.everyone)
        names = self.other.names() if self.other else set()
        self.words = {w for w in self.tokens if w not in names and not any(w in n.split() for n in names)}

    def answer(self) -> str | None:
        """The answer, or None when nothing in memory matches."""
        if self.stranger:
            return None  # someone the chat does not know: nothing here is about them
        if asks_about_the_past(self.text):  # the same test decides whether a turn returns the history
            before = self._from_history()
            if before:
                return before
        if self.words & _NOTES and self.mem.notes:
            return self._notes(listing=True)
        job_question = {"what", "do"} <= self.words and not self.words & {"know", "about", "tell"}
        if (
            self.other is not None
            and self.other.facts
            and not self.words - _ABOUT_SOMEONE
            and not job_question
        ):
            facts = "; ".join(f"{k}: {shown(k, v)}" for k, v in self.other.facts.items())  # "about Ben"
            return f"What I know about {self.other.label()}: {facts}."
        if self.other is not None:
            mine = [m for m in self.messages if str(m.get("author_id") or "") == self.other.author_id]
            return (
                _from_fact(self.other.facts, self.words, self.text, [], self.other)
                or self._notes()
                or _from_message(mine, self.words, self.request.author_id)
            )
        if self.words & _ME or not self.words & _WHO:
            own = [m for m in self.messages if str(m.get("author_id") or "") in ("", self.request.author_id)]
            found = _from_fact(self.own, self.words, self.text, own, None) if self.words & _ME else None
            if found or self.words & _ME:
                return found or self._notes() or _from_message(own, self.words, self.request.author_id)
        return self._who() or self._note_or_message()

    def _note_or_message(self) -> str | None:
        """The note or the message that shares more of the question's words (a tie: the note)."""
        note = self._notes()
        said = _from_message(self.messages, self.words, self.request.author_id)
        if note and said and _overlap(said, self.words) > _overlap(note, self.words):
            return said
        return note or said

    def _who(self) -> str | None:
        """ "Who has a dog?": the facts of anyone that match, each named."""
        content = {w for w in self.words if w not in _STOP and w not in _WHO and len(w) > 1}
        scored: list[tuple[int, str, str, Person]] = []
        for person in self.everyone.values():
            for key, value in person.facts.items():
                overlap = len(content & {*tokens(value), *tokens(key)})
                score = _key_score(key, self.words, self.text, value) + _STRONG * overlap
                if overlap or score > _STRONG:
                    scored.append((score, key, value, person))
        if not scored:
            return None
        top = max(s[0] for s in scored)
        best = [s for s in scored if s[0] == top][:3]
        return " ".join(
            phrase(k, v, self.words, None if p.author_id == self.request.author_id else p)
            for _, k, v, p in best
        )

    def _notes(self, listing: bool = False) -> str | None:
        """A /remember note that matches the question (or, asked for notes, all of them)."""
        notes = list(self.mem.notes)
        if self.other is not None:
            notes = [n for n in notes if str(n.get("author_id") or "") == self.other.author_id] or notes
        wanted = {w for w in self.words if w not in _STOP and w not in _NOTES and len(w) > 1}
        scored = sorted(
            ((len(wanted & set(tokens(str(n.get("value") or "")))), i, n) for i, n in enumerate(notes)),
            key=lambda t: (t[0], t[1]),
            reverse=True,
        )
        if listing and (not scored or scored[0][0] == 0):
            chosen = notes[-3:]
        else:
            chosen = [n for score, _, n in scored[:1] if score and score * 2 >= len(wanted)]
        if not chosen:
            return None
        return " ".join(
            f"{_whose_note(n, self.request.author_id)}: “{one_line(str(n.get('value')))}”" for n in chosen
        )

    def _from_history(self) -> str | None:
        """ "Where did I live before Lisbon?": the value a fact held before the one named."""
        who = self.other
        aid = who.author_id if who else self.request.author_id
        current = who.facts if who else self.own
        keys = {str(h.get("key")) for h in self.mem.fact_history if str(h.get("author_id") or "") == aid}
        scored = sorted(((_key_score(k, self.words, self.text), k) for k in keys), reverse=True)
        if not scored or scored[0][0] < _WEAK:
            return None
        key = scored[0][1]
        values = [
            str(h.get("value"))
            for h in self.mem.fact_history
            if str(h.get("author_id") or "") == aid and h.get("key") == key
        ]
        if key in current:
            values.append(current[key])
        if len(values) < 2:
            return None
        named = [i for i, v in enumerate(values) if set(tokens(v)) & self.words]
        at = named[-1] if named else len(values) - 1
        if at == 0:
            return None
        subject = "you" if who is None else who.label()
        past = {"location": "lived in", "job": "worked as", "employer": "worked at"}.get(key)
        before, then = shown(key, values[at - 1]), values[at] if key == "job" else shown(key, values[at])
        said = f"{subject} {past} {before}" if past else f"{subject}: {before}"
        return f"Before {then}, {said}."


def _overlap(answer: str, words: set[str]) -> int:
    """How many of the question's content words an answer holds."""
    return len({stem(w) for w in words if w not in _STOP} & {stem(t) for t in tokens(answer)})


def _whose_note(note: wire.Fact, asker: str) -> str:
    if str(note.get("author_id") or "") == asker:
        return "You asked me to remember"
    return f"{note.get('author') or 'Someone'} asked me to remember"


def _from_fact(
    facts: Mapping[str, str], words: set[str], text: str, own: Sequence[wire.Message], who: Person | None
) -> str | None:
    """The one fact a question asks for, phrased for whose it is."""
    scored = sorted(((_key_score(k, words, text, v), k) for k, v in facts.items()), reverse=True)
    best, runner_up = [*scored, (0, ""), (0, "")][:2]
    # A key asked about that has no fact yet: an old message may still say it.
    asked = max(((_key_score(k, words, text), k) for k in _SAID), default=(0, ""))
    # A naming word decides; hints alone only when they point at one fact and no other.
    clear = best[0] >= _STRONG or (best[0] >= 2 * _WEAK and best[0] > runner_up[0])
    if words & _KIN_WORDS and best[1] not in ("pets", "family"):
        return None  # "what is Mateo's dog called?" is not asking for Mateo's name
    if clear and best[0] >= asked[0]:
        return phrase(best[1], facts[best[1]], words, who)
    if asked[0] >= _STRONG:
        said = _said(own, asked[1])
        if said:
            return phrase(asked[1], said, words, who)
    return None


def _from_message(messages: Sequence[wire.Message], words: set[str], asker: str) -> str | None:
    """The earlier statement sharing the most of the question's words, quoted with its author."""
    wanted = {stem(w) for w in words if w not in _STOP and w not in _WHO and len(w) > 1}
    return from_message(messages, wanted, asker, WHEN if "when" in words else None)


def _names_a_stranger(text: str, everyone: Mapping[str, Person]) -> bool:
    """True when a question names someone ("Ahmed's cat", "does Ahmed") the chat does not know."""
    known = {n for p in everyone.values() for n in p.names()}
    named = [m.group(1) for m in _POSSESSIVE.finditer(text)] + [
        m.group(1) for m in _SUBJECT_NAME.finditer(text)
    ]
    for name in named:
        low = fold(name)
        if low in _NOT_PERSON or low in _STOP or low in known or low in _KIN_WORDS or low.isdigit():
            continue
        if not any(low in spec.strong for spec in _KEYS.values()):
            return True
    return False


def _said(messages: Sequence[wire.Message], key: str) -> str | None:
    pattern = _SAID[key]
    # Newest statement wins, like a superseding fact.
    for m in sorted(messages, key=lambda m: m.get("id") or 0, reverse=True):
        match = pattern.search(str(m.get("text", "")))
        if match:
            return match.group(1).strip()
    return None


class _OneShot:
    """A finished answer dressed as a stream (the notice kept apart, like a non-streamed one)."""

    def __init__(self, answer: ModelAnswer) -> None:
        self.text = answer.text
        self.notice = answer.notice
        self.model = answer.model
        self.prompt_tokens = 0
        self.completion_tokens = 0

    async def __aiter__(self) -> AsyncIterator[str]:
        yield self.text

    async def aclose(self) -> None:
        """Nothing to release."""
