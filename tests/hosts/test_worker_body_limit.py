"""The Worker refuses a body over the API's 32 MiB limit before it holds it in memory.

A Python Worker's memory is Pyodide's heap: reading a whole upload with `arrayBuffer()`
before checking its size lets one request exhaust it. Here the client streams its body
(`JsReadableStream` in the fake workerd, generated chunk by chunk) and the test counts how
much of it the Worker pulled: nothing when Content-Length already says it is too large, at
most the limit and one chunk when the length is missing or lies. The answer is the local
host's 413, and nothing is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from memory_engine.api.http import MAX_BODY_BYTES
from tests.fakes.workers._js import JsReadableStream
from tests.support import TOKEN, WORKER_ORIGIN, WorkerBackend

CHUNK = 1024 * 1024
OVER = MAX_BODY_BYTES + 8 * CHUNK  # 40 MiB
AUTH = {"authorization": f"Bearer {TOKEN}"}
IMPORT = WORKER_ORIGIN + "/v1/chats/big/import"
REFUSAL = {"error": f"request body over {MAX_BODY_BYTES} bytes"}


def chunks(total: int, size: int = CHUNK) -> Iterator[bytes]:
    """`total` bytes of a JSON-looking upload, made only as they are pulled."""
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield b" " * n
        sent += n


async def _post(w: WorkerBackend, stream: JsReadableStream, headers: dict[str, str]) -> tuple[int, object]:
    assert w.runtime is not None
    status, _, data = await w.runtime.fetch("POST", IMPORT, {**AUTH, **headers}, stream)
    assert not w.runtime.errors, w.runtime.errors[-1]
    return status, json.loads(data)


async def test_a_declared_length_over_the_limit_is_refused_unread(worker):
    stream = JsReadableStream(chunks(OVER))
    assert await _post(worker, stream, {"content-length": str(OVER)}) == (413, REFUSAL)
    assert stream.pulled == 0  # was 40 MiB: read whole by arrayBuffer() first
    # Refused before the token is looked at, as the local host refuses it while reading.
    stream = JsReadableStream(chunks(OVER))
    status, _, data = await worker.runtime.fetch("POST", IMPORT, {"content-length": str(OVER)}, stream)
    assert (status, json.loads(data), stream.pulled) == (413, REFUSAL, 0)
    assert (await worker.stats("big"))["total_messages"] == 0


@pytest.mark.parametrize(
    "declared", [None, "100", "4²"], ids=["no-length", "length-that-lies", "not-a-length"]
)
async def test_a_body_that_turns_out_too_large_is_dropped_while_reading(worker, declared):
    stream = JsReadableStream(chunks(OVER))
    headers = {} if declared is None else {"content-length": declared}
    assert await _post(worker, stream, headers) == (413, REFUSAL)
    assert MAX_BODY_BYTES < stream.pulled <= MAX_BODY_BYTES + CHUNK  # was 40 MiB
    assert (await worker.stats("big"))["total_messages"] == 0


async def test_a_streamed_body_within_the_limit_arrives_whole(worker):
    messages = [{"role": "user", "text": f"streamed line {i}", "message_id": f"s{i}"} for i in range(300)]
    body = json.dumps({"messages": messages}).encode()
    pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]  # many chunks, no length
    status, answer = await _post(worker, JsReadableStream(pieces), {})
    assert status == 200 and answer["imported"] == 300
    # With its length: the same body in one piece, and its repeat is acknowledged, not stored.
    status, answer = await _post(worker, JsReadableStream([body]), {"content-length": str(len(body))})
    assert status == 200 and answer == {**answer, "imported": 0, "skipped": 300}
    assert (await worker.stats("big"))["total_messages"] == 300
