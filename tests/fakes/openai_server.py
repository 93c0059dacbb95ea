"""A fake OpenAI-compatible chat-completions server (aiohttp.web on 127.0.0.1) for tests.

It is scriptable per request: queue actions (an answer, a 429 with Retry-After, a 5xx, a
hang past the client's timeout, a garbage body, an SSE stream that breaks or never starts)
globally or per model name; whatever is not scripted gets the default answer. Every request
it receives is recorded (`server.requests`), so tests can check what the bot sent and in
which order the tiers were tried; image content parts are decoded (`request.images`).

`POST /v1/audio/transcriptions` (multipart, as the openai SDK sends it) answers
`{"text": ...}`; script it with `script_transcription(Transcript("hi"), ServerError(), Hang())`
and read what arrived in `server.transcriptions`.

    async with FakeOpenAI() as fake:
        fake.script(RateLimit(retry_after=0.1), Answer("hi"), model="gpt-4.1-mini")
        ... AsyncOpenAI(base_url=fake.url, api_key="test") ...
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Answer:
    """A normal completion (streamed as SSE chunks when the request asks for stream=True)."""

    text: str = "ok"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    chunk_size: int = 8  # characters per SSE chunk when streaming
    delay: float = 0.0  # seconds before answering (or between chunks when streaming)
    until: asyncio.Event | None = None  # answer only once the test sets it (a held answer)


@dataclass(frozen=True)
class Echo:
    """Answer with the last user message, prefixed: handy to see what the bot sent.

    Streamed in one chunk unless `chunk_size` says otherwise, so a streamed echo is shown
    whole from its first message on: tests of memory and commands never read a half-shown
    answer. Streaming pace is tested with chunked `Answer`s.
    """

    prefix: str = "echo: "
    chunk_size: int | None = None


@dataclass(frozen=True)
class RateLimit:
    """HTTP 429 with a Retry-After header (seconds, may be fractional)."""

    retry_after: float | None = 1.0


@dataclass(frozen=True)
class ServerError:
    """An HTTP 5xx (or any status) with an OpenAI-shaped error body."""

    status: int = 500
    message: str = "internal error"


@dataclass(frozen=True)
class Hang:
    """Accept the request and never answer (until the server stops or `seconds` pass)."""

    seconds: float | None = None


@dataclass(frozen=True)
class Garbage:
    """HTTP 200 with a body that is not a chat completion."""

    body: str = "<html>this is not json</html>"
    content_type: str = "application/json"


@dataclass(frozen=True)
class StreamBreak:
    """Stream some chunks of `text`, then cut the connection (no usage, no [DONE])."""

    text: str = "The answer starts well and then"
    after_chunks: int = 2
    chunk_size: int = 8


@dataclass(frozen=True)
class NoFirstToken:
    """Send the SSE headers, then never a token."""


@dataclass(frozen=True)
class Transcript:
    """A transcription answer (`POST /audio/transcriptions`)."""

    text: str = "hello from a voice message"
    delay: float = 0.0


Action = Answer | Echo | RateLimit | ServerError | Hang | Garbage | StreamBreak | NoFirstToken
TranscriptionAction = Transcript | ServerError | Hang | Garbage | RateLimit


def _text_of(content: Any) -> str:
    """The words of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, list):
        return " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content or "")


@dataclass
class RecordedRequest:
    """One request the fake received."""

    path: str
    model: str | None
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool
    at: float
    action: str = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request."""
        return list(self.body.get("messages") or [])

    @property
    def image_parts(self) -> list[dict[str, Any]]:
        """Every image_url content part of the request's messages."""
        return [
            part
            for m in self.messages
            if isinstance(m.get("content"), list)
            for part in m["content"]
            if isinstance(part, dict) and part.get("type") == "image_url"
        ]

    @property
    def images(self) -> list[tuple[str, bytes]]:
        """The images sent as data URLs, decoded: (mime, bytes)."""
        found = []
        for part in self.image_parts:
            url = str((part.get("image_url") or {}).get("url") or "")
            head, _, data = url.partition(",")
            if head.startswith("data:") and head.endswith(";base64"):
                found.append((head[5:-7], base64.b64decode(data)))
        return found

    def text(self) -> str:
        """Every message's words, one per line (image parts left out)."""
        return "\n".join(_text_of(m.get("content")) for m in self.messages)


@dataclass
class RecordedTranscription:
    """One `POST /audio/transcriptions` the fake received."""

    model: str
    filename: str
    content_type: str
    data: bytes
    fields: dict[str, str]
    action: str = ""


class FakeOpenAI:
    """The fake server; an async context manager that listens on 127.0.0.1:<free port>."""

    def __init__(self, default: Action | None = None) -> None:
        self.default: Action = default or Answer()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Action | None] | None = None
        self._global: deque[Action] = deque()
        self._per_model: dict[str, deque[Action]] = {}
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._request_seen = asyncio.Condition()
        self.transcriptions: list[RecordedTranscription] = []
        self._transcription_queue: deque[TranscriptionAction] = deque()
        self.port = 0

    @property
    def url(self) -> str:
        """Base URL to give AsyncOpenAI (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *actions: Action, model: str | None = None) -> None:
        """Queue actions for the next requests (of one model, or of any model)."""
        queue = self._global if model is None else self._per_model.setdefault(model, deque())
        queue.extend(actions)

    def script_transcription(self, *actions: TranscriptionAction) -> None:
        """Queue answers for the next transcription requests (default: `Transcript()`)."""
        self._transcription_queue.extend(actions)

    def models_called(self) -> list[str | None]:
        """The model of every request so far, in order."""
        return [r.model for r in self.requests]

    async def wait_requests(self, count: int, timeout: float = 5.0) -> None:
        """Wait until at least `count` requests arrived (no sleeping: a condition)."""
        async with asyncio.timeout(timeout):
            async with self._request_seen:
                await self._request_seen.wait_for(lambda: len(self.requests) >= count)

    async def __aenter__(self) -> FakeOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the port the system chose for port 0
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def _next_action(self, req: RecordedRequest) -> Action:
        if self.responder is not None:
            chosen = self.responder(req)
            if chosen is not None:
                return chosen
        queue = self._per_model.get(req.model or "")
        if queue:
            return queue.popleft()
        if self._global:
            return self._global.popleft()
        return self.default

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": []})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except Exception:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        req = RecordedRequest(
            path=request.path,
            model=body.get("model"),
            body=body,
            headers=dict(request.headers),
            stream=bool(body.get("stream")),
            at=time.monotonic(),
        )
        action = self._next_action(req)
        req.action = type(action).__name__
        async with self._request_seen:
            self.requests.append(req)
            self._request_seen.notify_all()
        return await self._perform(request, req, action)

    async def _transcribe(self, request: web.Request) -> web.Response:
        fields: dict[str, str] = {}
        filename, content_type, data = "", "", b""
        reader = await request.multipart()
        async for part in reader:
            if part.filename is not None:
                filename = part.filename
                content_type = part.headers.get("Content-Type", "")
                data = await part.read()
            else:
                fields[part.name or ""] = await part.text()
        if not data or not fields.get("model"):
            return web.json_response({"error": {"message": "file and model are required"}}, status=400)
        action = self._transcription_queue.popleft() if self._transcription_queue else Transcript()
        rec = RecordedTranscription(
            fields["model"], filename, content_type, data, fields, type(action).__name__
        )
        async with self._request_seen:
            self.transcriptions.append(rec)
            self._request_seen.notify_all()
        if isinstance(action, Transcript):
            if action.delay:
                await self._wait_stop(action.delay)
            return web.json_response({"text": action.text})
        if isinstance(action, Hang):
            await self._wait_stop(action.seconds)
            return web.json_response({"text": "too late"})
        if isinstance(action, ServerError):
            return web.json_response(
                {"error": {"message": action.message, "type": "server_error"}}, status=action.status
            )
        if isinstance(action, RateLimit):
            return web.json_response({"error": {"message": "Rate limit reached"}}, status=429)
        return web.Response(text=action.body, content_type=action.content_type)

    async def _wait_stop(self, seconds: float | None) -> None:
        # asyncio.timeout, not wait_for: wait_for on 3.11 can swallow a cancellation.
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            pass

    async def _perform(
        self, request: web.Request, req: RecordedRequest, action: Action
    ) -> web.StreamResponse:
        if isinstance(action, Echo):
            last = next((m for m in reversed(req.messages) if m.get("role") == "user"), {})
            text = action.prefix + _text_of(last.get("content", ""))
            action = Answer(text=text, chunk_size=action.chunk_size or max(len(text), 1))
        if isinstance(action, Answer):
            if action.until is not None:
                await action.until.wait()
            if action.delay and not req.stream:
                await self._wait_stop(action.delay)
            if req.stream:
                return await self._stream(request, req, action)
            return web.json_response(_completion(req.model, action))
        if isinstance(action, RateLimit):
            headers = {} if action.retry_after is None else {"Retry-After": _fmt(action.retry_after)}
            return web.json_response(
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "rate_limit_error",
                        "code": "rate_limit",
                    }
                },
                status=429,
                headers=headers,
            )
        if isinstance(action, ServerError):
            return web.json_response(
                {"error": {"message": action.message, "type": "server_error"}}, status=action.status
            )
        if isinstance(action, Hang):
            await self._wait_stop(action.seconds)
            return web.json_response(_completion(req.model, Answer("too late")))
        if isinstance(action, Garbage):
            return web.Response(text=action.body, content_type=action.content_type)
        if isinstance(action, StreamBreak):
            resp = await self._sse_start(request)
            chunks = _split(action.text, action.chunk_size)[: action.after_chunks]
            cid = "chatcmpl-" + uuid.uuid4().hex[:12]
            for i, piece in enumerate(chunks):
                await _sse(resp, _chunk(cid, req.model, piece, first=i == 0))
            # Cut the connection mid-stream: no usage chunk, no [DONE].
            if request.transport is not None:
                request.transport.close()
            return resp
        if isinstance(action, NoFirstToken):
            resp = await self._sse_start(request)
            await self._wait_stop(None)
            return resp
        raise AssertionError(f"unknown action {action!r}")

    async def _sse_start(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        return resp

    async def _stream(self, request: web.Request, req: RecordedRequest, action: Answer) -> web.StreamResponse:
        resp = await self._sse_start(request)
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        for i, piece in enumerate(_split(action.text, action.chunk_size)):
            if action.delay and i:
                await self._wait_stop(action.delay)
            await _sse(resp, _chunk(cid, req.model, piece, first=i == 0))
        await _sse(resp, _chunk(cid, req.model, None, finish="stop"))
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage"))
        if include_usage:
            await _sse(
                resp,
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": req.model,
                    "choices": [],
                    "usage": _usage(action),
                },
            )
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _fmt(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


def _split(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _usage(a: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "total_tokens": a.prompt_tokens + a.completion_tokens,
    }


def _completion(model: str | None, a: Answer) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": a.text},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(a),
    }


def _chunk(
    cid: str, model: str | None, piece: str | None, first: bool = False, finish: str | None = None
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if first:
        delta["role"] = "assistant"
    if piece is not None:
        delta["content"] = piece
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model or "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _sse(resp: web.StreamResponse, payload: dict[str, Any]) -> None:
    await resp.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
