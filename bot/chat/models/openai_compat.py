"""`OpenAICompatModel`: a `ChatModel` on an OpenAI-compatible endpoint, through the openai SDK.

It classifies the SDK's errors into `ModelFailure`s (`failure_from`) and never retries by
itself: the tier fallback (fallback.py) does, so that every attempt is seen and recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from bot.chat.models.base import AnswerStream, ModelAnswer, ModelRequest
from bot.errors import ModelFailure
from memory_engine.backoff import retry_after_s

if TYPE_CHECKING:  # the openai SDK takes ~0.8 s to import: offline chats never load it
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

T = TypeVar("T")


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
        retry_after = retry_after_s(exc.response.headers)
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
    # Our ChatMessages are the SDK's typed dicts of a system, user or assistant message.
    return cast("list[ChatCompletionMessageParam]", list(request.messages))


def _sent(read: Callable[[], T]) -> T | None:
    """A field the server sent, or None where it left it out: the SDK builds its objects from
    whatever the server sent, unchecked, so a declared field may be missing."""
    try:
        return read()
    except AttributeError:
        return None


def _usage_of(obj: ChatCompletion | ChatCompletionChunk) -> tuple[int, int]:
    usage = _sent(lambda: obj.usage)
    if usage is None:
        return 0, 0
    try:  # server data: counts that are not numbers count as unknown
        return int(_sent(lambda: usage.prompt_tokens) or 0), int(_sent(lambda: usage.completion_tokens) or 0)
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
            model=_sent(lambda: resp.model) or self.model,
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
            piece = self._take(chunk)
            if piece:
                return piece

    def _take(self, chunk: ChatCompletionChunk) -> str | None:
        """The text of one chunk, if any; its usage and model noted."""
        if _sent(lambda: chunk.usage) is not None:
            self.prompt_tokens, self.completion_tokens = _usage_of(chunk)
        if model := _sent(lambda: chunk.model):
            self.model = model
        choices = _sent(lambda: chunk.choices) or []
        if not choices:
            return None
        try:  # the SDK builds chunks from whatever the server sent, unchecked
            delta = choices[0].delta
        except (AttributeError, IndexError, TypeError, KeyError) as exc:
            raise ModelFailure("malformed", "a chunk without a delta", retryable=True) from exc
        return _sent(lambda: delta.content)

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
