"""The offline model: what answers when no language model is configured.

It says plainly that it is offline (a notice shown to the reader and never recorded as the
bot's words, so the memory and its summaries do not fill up with it) and answers a question
from the one fact or earlier message that matches it: asked for the favourite book, it names
the book; "where do I live?" gives the location. When nothing matches it says so, briefly.
A message that is not a question is acknowledged.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.router.models import AnswerStream, ModelAnswer, ModelRequest

OFFLINE_NOTICE = (
    "I'm offline: no language model is configured, so I can only answer from memory. "
    "To talk to a real model, set OPENAI_API_KEY (and OPENAI_BASE_URL for any other "
    "OpenAI-compatible server such as OpenRouter, Ollama or vLLM) in the environment or in .env."
)
OFFLINE_SHORT = "(offline: answering from memory only)"
UNKNOWN = "I don't know that yet: tell me and I'll remember."
NO_MEMORY = "My memory is unreachable right now too, so I have nothing to add."
TOLD_LIMIT = 10000  # chats told the long notice; bounded, a long-running bot must not grow

LIST_KEYS = frozenset({"likes", "dislikes", "pets", "family"})
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
        _words("live living lives based city town country located location from"),
        _words("where home"),
        "You live in {value}.",
    ),
    "job": _Key(_words("job occupation profession career"), _words("work do living"), "You work as {value}."),
    "employer": _Key(_words("employer company employed firm"), _words("work where"), "You work at {value}."),
    "age": _Key(_words("old age"), frozenset(), "You are {value}."),
    "birthday": _Key(_words("birthday born birth"), _words("when"), "Your birthday is {value}."),
    "pronouns": _Key(_words("pronouns pronoun"), frozenset(), "Your pronouns are {value}."),
    "likes": _Key(_words("like likes love enjoy hobby hobbies into"), frozenset(), "You like {value}."),
    "dislikes": _Key(_words("dislike dislikes hate detest"), frozenset(), "You don't like {value}."),
    "pets": _Key(_words(_ANIMALS), _words("name called"), "Your pets: {value}."),
    "family": _Key(_words(_RELATIVES), _words("name called"), "Your family: {value}."),
}
# Weights: a naming word counts three times a hint; an animal or relative word four times,
# so "my dog's name" is about the dog, not about your own name.
_STRONG, _WEAK, _SPECIFIC = 3, 1, 4
_NEGATED_LIKE = re.compile(r"\b(don'?t|do not|doesn'?t|never)\b[\w\s]{0,12}\blike\b", re.I)
_ABOUT_ME = re.compile(r"\b(what|everything)\b.*\b(know|remember)\b.*\babout me\b", re.I)
_QUESTION_START = re.compile(
    r"^\s*(what|what's|whats|where|who|whom|which|when|why|how|do|does|did|can|could|would|will|"
    r"is|are|am|tell me|remind me|remember|recall|say)\b",
    re.I,
)
_STOP = _words(
    "a an the i me my mine you your yours is are am was were be been do does did what what's whats "
    "where who whom which when why how can could would will tell remind remember recall say said know "
    "of in on at to for about with and or it that this there here please again any some s d ll m re ve"
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


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower().replace("favourite", "favorite"))


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
    if key == "employer" and "work" in words and words & {"where", "for"}:
        score += _STRONG  # "where do I work" asks for the place, "what is my work" the job
    if score and value:  # "what's my dog called": the dog item itself is named
        score += len(set(_tokens(value)) & words)
    return score


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _phrase(key: str, value: str, words: set[str]) -> str:
    """The answer sentence for one fact."""
    if key.startswith("favorite_"):
        return f"Your favourite {key.removeprefix('favorite_').replace('_', ' ')} is {value}."
    items = [i.strip() for i in value.split(",") if i.strip()] if key in LIST_KEYS else [value]
    if key in ("pets", "family"):
        # "Biscuit (dog)": name it by what was asked about ("your dog is Biscuit").
        asked = [i for i in items if set(_tokens(i)) & words - {"name", "called"}]
        if asked:
            return " ".join(_member(i) for i in asked)
    spec = _KEYS.get(key)
    template = spec.template if spec else "Your " + key.replace("_", " ") + " is {value}."
    return template.format(key=key.replace("_", " "), value=_join(items or [value]))


def _member(item: str) -> str:
    match = re.fullmatch(r"(.+?)\s*\((.+)\)", item)
    if not match:
        return f"{item}."
    return f"Your {match.group(2)} is {match.group(1)}."


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
        if not is_question(text):
            learned = [f"{k}: {v}" for k, v in facts.items() if v and v.lower() in text.lower()]
            return f"Noted, I'll remember that ({'; '.join(learned)})." if learned else "Noted."
        if _ABOUT_ME.search(text):
            if not facts:
                return UNKNOWN
            return "What I know about you: " + "; ".join(f"{k}: {v}" for k, v in facts.items()) + "."
        words = set(_tokens(text))
        own = [
            m
            for m in (*mem.retrieved, *mem.recent)
            if m.get("role", "user") == "user" and str(m.get("author_id") or "") in ("", request.author_id)
        ]
        return self._from_fact(facts, words, text, own) or _from_message(own, words) or UNKNOWN

    @staticmethod
    def _from_fact(
        facts: Mapping[str, str], words: set[str], text: str, own: Sequence[Mapping[str, Any]]
    ) -> str | None:
        scored = sorted(((_key_score(k, words, text, v), k) for k, v in facts.items()), reverse=True)
        best, runner_up = [*scored, (0, ""), (0, "")][:2]
        # A key asked about that has no fact yet: an old message may still say it.
        asked = max(((_key_score(k, words, text), k) for k in _SAID), default=(0, ""))
        # A naming word decides; hints alone only when they point at one fact and no other.
        clear = best[0] >= _STRONG or (best[0] >= 2 * _WEAK and best[0] > runner_up[0])
        if clear and best[0] >= asked[0]:
            return _phrase(best[1], facts[best[1]], words)
        if asked[0] >= _STRONG:
            said = _said(own, asked[1])
            if said:
                return _phrase(asked[1], said, words)
        return None

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """The offline answer, instantly."""
        return self.answer(request)

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> AnswerStream:
        """The offline answer as a one-piece stream."""
        return _OneShot(self.answer(request))


def _own_facts(facts: Iterable[Mapping[str, Any]], author_id: str, author: str) -> dict[str, str]:
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


def _from_message(messages: Sequence[Mapping[str, Any]], words: set[str]) -> str | None:
    """The earlier message sharing the most words with the question, quoted."""
    wanted = {w for w in words if w not in _STOP and len(w) > 1}
    if not wanted:
        return None
    best: tuple[int, int, str] = (0, 0, "")
    for m in messages:
        text = str(m.get("text") or "")
        overlap = len(wanted & set(_tokens(text)))
        key = (overlap, int(m.get("id") or 0), text)
        if overlap and key[:2] > best[:2]:
            best = key
    return f"You told me: “{_one_line(best[2])}”" if best[0] else None


def _said(messages: Sequence[Mapping[str, Any]], key: str) -> str | None:
    pattern = _SAID[key]
    # Newest statement wins, like a superseding fact.
    for m in sorted(messages, key=lambda m: m.get("id") or 0, reverse=True):
        match = pattern.search(str(m.get("text", "")))
        if match:
            return match.group(1).strip()
    return None


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
