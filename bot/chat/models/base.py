"""The chat model interface: the request, the answer, the attempt record and `ModelFailure`.

A `ChatModel` turns a `ModelRequest` (chat messages in the OpenAI format, plus the memory
they were built from) into a `ModelAnswer`, or raises `ModelFailure` saying what went wrong
and whether trying again could help. It never retries by itself: the tier fallback
(fallback.py, itself a `ChatModel`) does, so that every attempt is seen and recorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypedDict

from bot.errors import FailureKind, ModelFailure
from memory_engine.api import wire

__all__ = [
    "AnswerStream",
    "Attempt",
    "ChatMessage",
    "ChatModel",
    "FailureKind",
    "MemoryContext",
    "ModelAnswer",
    "ModelFailure",
    "ModelRequest",
]


@dataclass(frozen=True)
class MemoryContext:
    """What the memory worker returned for the current message (the parts of its turn answer
    the pipeline reads, in the API's own types)."""

    prompt: str = ""
    recent: tuple[wire.Message, ...] = ()
    retrieved: tuple[wire.ScoredMessage, ...] = ()
    facts: tuple[wire.Fact, ...] = ()
    summary: str = ""
    usage_today: Mapping[str, wire.TierUsage] = field(default_factory=dict)
    usage_today_author: wire.AuthorUsage | None = None  # for the daily caps
    persona: str = ""  # the chat's own instructions (/persona), "" for the default
    notes: tuple[wire.Fact, ...] = ()  # /remember: kept in every prompt
    fact_history: tuple[wire.Fact, ...] = ()  # superseded facts, oldest first
    topic_started_at: str | None = None  # /new: the recent window begins there

    @classmethod
    def of(cls, turn: wire.TurnAnswer) -> MemoryContext:
        """The context of a turn's answer."""
        return cls(
            turn["prompt"],
            tuple(turn["recent"]),
            tuple(turn["retrieved"]),
            tuple(turn["facts"]),
            turn["summary"],
            turn["usage_today"],
            turn["usage_today_author"],
            turn["persona"],
            tuple(turn["notes"]),
            tuple(turn["fact_history"]),
            turn["topic_started_at"],
        )


class TextPart(TypedDict):
    """The text of a message with pictures."""

    type: Literal["text"]
    text: str


class ImageUrl(TypedDict):
    """Where a picture is: a data URL (`data:image/png;base64,...`)."""

    url: str


class ImagePart(TypedDict):
    """One picture of a message."""

    type: Literal["image_url"]
    image_url: ImageUrl


class ChatMessage(TypedDict):
    """One chat message in the OpenAI format: text, or (a message with pictures) content parts."""

    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart | ImagePart]


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model: the messages to send and who asked what.

    A message's `content` is text, or a list of content parts (text and image_url) for a photo.
    """

    messages: tuple[ChatMessage, ...]
    chat_key: str
    author: str
    author_id: str
    text: str
    memory: MemoryContext | None = None  # None: the memory worker was unreachable
    # The tiers that may answer, in order (the tier router's choice first); read by the tier
    # fallback, empty: its own order. A single model ignores it.
    tiers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attempt:
    """One model call, good or failed: what gets recorded as a routerUsage row."""

    tier: str
    model: str
    number: int  # 1-based, over the whole message
    ok: bool
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    text: str = ""  # the answer, for a good non-streaming attempt
    # A failure's kind ("": a good attempt) and HTTP status: what to fix (failures.py).
    kind: FailureKind | Literal[""] = ""
    status: int | None = None

    def reply_request(
        self,
        text: str,
        *,
        cost_usd: float,
        message_id: str,
        author_id: str,
        reply_to_message_id: str | None = None,
    ) -> wire.ReplyRequest:
        """This attempt as the memory worker records it: its usage row, and `text` as the
        answer when it is ok. The answer remembers whose message it answers (`author_id`, and
        `reply_to_message_id` when given), so forgetting that person removes it too."""
        record: wire.ReplyRequest = {
            "text": text if self.ok else "",
            "tier": self.tier,
            "model": self.model,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "latency_ms": round(self.latency_ms, 3),
            "cost_usd": cost_usd,
            "ok": self.ok,
            "author_id": author_id,
            "reply_to_author_id": author_id,
            "message_id": message_id,
        }
        if reply_to_message_id is not None:
            record["reply_to_message_id"] = reply_to_message_id
        if self.error:
            record["error"] = self.error
        return record


@dataclass(frozen=True)
class ModelAnswer:
    """A model's answer with the token counts the API reported."""

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notice: str = ""  # shown to the reader before the answer, never recorded as the bot's words
    # The tier fallback's attempts for this answer, the good one last (a single model: none).
    attempts: tuple[Attempt, ...] = ()


class AnswerStream(Protocol):
    """A started stream: iterate for text pieces; token counts are known once it ends."""

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens the API reported (0 until the stream ended)."""

    @property
    def completion_tokens(self) -> int:
        """Completion tokens the API reported (0 until the stream ended)."""

    @property
    def model(self) -> str:
        """The model that answers."""

    @property
    def notice(self) -> str:
        """Shown to the reader before the answer, never recorded as the bot's words."""

    def __aiter__(self) -> AsyncIterator[str]:
        """The text pieces, first one included; raises `ModelFailure` if the stream breaks."""

    async def aclose(self) -> None:
        """Stop reading and release the connection."""


class ChatModel(Protocol):
    """A chat model behind one tier.

    `complete` returns the whole answer. `start_stream` returns once the first piece of text
    has arrived (so failures before the first token can still be retried or fall back);
    both raise `ModelFailure`, and both must give up after `timeout` seconds.
    """

    @property
    def model(self) -> str:
        """The model's name (as recorded with each attempt)."""

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """The whole answer to `request`."""

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> AnswerStream:
        """A stream of the answer, started (first text already received)."""
