"""Chat models: one small interface and an OpenAI-compatible client (the offline model: offline.py).

A `ChatModel` turns a `ModelRequest` (chat messages in the OpenAI format, plus the memory
they were built from) into a `ModelAnswer`, or raises `ModelFailure` saying what went wrong
and whether trying again could help. It never retries by itself: the tier fallback
(fallback.py, itself a `ChatModel`) does, so that every attempt is seen and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

from memory_engine.api import wire
from memory_engine.backoff import retry_after_s

if TYPE_CHECKING:  # the openai SDK takes ~0.8 s to import: offline chats never load it
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionMessageParam


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


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model: the messages to send and who asked what.

    A message's `content` is text, or a list of content parts (text and image_url) for a photo.
    """

    messages: tuple[dict[str, Any], ...]
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
    kind: str = ""  # a failure's ModelFailure.kind and HTTP status: what to fix (model_errors.py)
    status: int | None = None


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


class ModelFailure(Exception):
    """One failed attempt: `kind` is rate_limit, server, timeout, connection, malformed or refused."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


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


# ---------------------------------------------------------------------------------------
# OpenAI-compatible endpoints


def failure_from(exc: BaseException) -> ModelFailure | None:
    """Classify a transport, HTTP or malformed-answer error of the openai SDK; None for
    anything else, which is a bug (never retried: the tier fallback logs it and stops)."""
    if isinstance(exc, ModelFailure):
        return exc
    import httpx
    import openai  # already loaded whenever an OpenAI-compatible model exists

    if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError, httpx.TimeoutException)):
        return ModelFailure("timeout", "the model did not answer in time", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = retry_after_s(getattr(exc.response, "headers", None))
        if status == 429:
            return ModelFailure(
                "rate_limit", "rate limited", retryable=True, retry_after=retry_after, status=status
            )
        if status >= 500 or status in (408, 409):
            return ModelFailure(
                "server", f"HTTP {status}", retryable=True, retry_after=retry_after, status=status
            )
        # 400/401/403/404/422: this tier will not work however often we ask.
        return ModelFailure("refused", f"HTTP {status}", retryable=False, status=status)
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return ModelFailure("connection", "could not reach the model", retryable=True)
    if isinstance(exc, (openai.APIResponseValidationError, json.JSONDecodeError, httpx.DecodingError)):
        return ModelFailure("malformed", "the model's answer was malformed", retryable=True)
    return None


def _raise_failure(exc: BaseException) -> NoReturn:
    """Raise `exc` as a ModelFailure, or as itself when it is a bug."""
    failure = failure_from(exc)
    if failure is None:
        raise exc
    raise failure from exc


def _messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    # Our messages are plain {"role", "content"} dicts: exactly the SDK's typed dicts at run time.
    return cast("list[ChatCompletionMessageParam]", list(request.messages))


def _usage_of(obj: Any) -> tuple[int, int]:
    usage = getattr(obj, "usage", None)
    if usage is None:
        return 0, 0
    try:  # server data: counts that are not numbers count as unknown
        return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)
    except (TypeError, ValueError):
        return 0, 0


class OpenAICompatModel:
    """A model on an OpenAI-compatible endpoint, called with a shared `AsyncOpenAI` client."""

    def __init__(self, client: AsyncOpenAI, model: str) -> None:
        self.client = client
        self.model = model

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelAnswer:
        """One non-streaming chat completion."""
        try:
            async with asyncio.timeout(timeout):
                resp = await self.client.chat.completions.create(
                    model=self.model, messages=_messages(request), timeout=timeout
                )
        except Exception as exc:
            _raise_failure(exc)
        # The SDK hands back whatever the server sent (a str, an object without choices):
        # anything but a non-empty assistant text is a malformed answer.
        try:
            text = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError, KeyError) as exc:
            raise ModelFailure("malformed", "no choices in the answer", retryable=True) from exc
        if not isinstance(text, str) or not text.strip():
            raise ModelFailure("malformed", "empty answer", retryable=True)
        prompt_tokens, completion_tokens = _usage_of(resp)
        return ModelAnswer(
            text=text,
            model=getattr(resp, "model", None) or self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )

    async def start_stream(self, request: ModelRequest, *, timeout: float) -> AnswerStream:
        """Open a stream (`stream=True`, usage in the last chunk) and wait for its first text."""
        stream = _OpenAIStream(self.model)
        try:
            async with asyncio.timeout(timeout):
                raw = await self.client.chat.completions.create(
                    model=self.model,
                    messages=_messages(request),
                    stream=True,
                    stream_options={"include_usage": True},
                    timeout=timeout,
                )
                stream.raw = raw
                await stream.first_piece()
        except BaseException as exc:
            await stream.aclose()
            if not isinstance(exc, Exception):  # cancelled, or the process is stopping
                raise
            _raise_failure(exc)
        return stream


class _OpenAIStream:
    """An SDK stream, started: it holds the first text piece until the reader asks for it."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.notice = ""
        self.raw: Any = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._first: str | None = None
        self._iter: Any = None

    async def _next_piece(self) -> str | None:
        """The next non-empty text piece, or None at the end of the stream."""
        if self._iter is None:
            self._iter = self.raw.__aiter__()
        while True:
            try:
                chunk = await self._iter.__anext__()
            except StopAsyncIteration:
                return None
            if getattr(chunk, "usage", None) is not None:
                self.prompt_tokens, self.completion_tokens = _usage_of(chunk)
            if getattr(chunk, "model", None):
                self.model = chunk.model
            choices = getattr(chunk, "choices", None) or []
            if not choices:
                continue
            try:  # the SDK builds chunks from whatever the server sent, unchecked
                piece = getattr(choices[0].delta, "content", None)
            except (AttributeError, IndexError, TypeError, KeyError) as exc:
                raise ModelFailure("malformed", "a chunk without a delta", retryable=True) from exc
            if piece:
                return piece

    async def first_piece(self) -> None:
        """Read until the first text (a stream that ends without text is malformed)."""
        piece = await self._next_piece()
        if piece is None:
            raise ModelFailure("malformed", "the stream ended without text", retryable=True)
        self._first = piece

    async def __aiter__(self) -> AsyncIterator[str]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        while True:
            try:
                piece = await self._next_piece()
            except Exception as exc:
                _raise_failure(exc)
            if piece is None:
                return
            yield piece

    async def aclose(self) -> None:
        """Release the HTTP connection."""
        if self.raw is not None:
            # Closing a broken stream may fail again; there is nothing to save.
            with contextlib.suppress(Exception):
                await self.raw.close()
