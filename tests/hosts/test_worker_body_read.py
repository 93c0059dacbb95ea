"""The Worker reads a body with a declared length into one buffer, and the same bytes arrive.

`entry._read_body` joined the stream's chunks: the chunks and then their join, about twice
the body at the peak, in a Durable Object of 128 MB. With a Content-Length the chunks are
copied into one buffer of that size; without one they are still joined. The bytes must be
the same whatever the chunks' shapes: a reminder's text (multi-byte UTF-8 cut across
chunks) comes back as it was sent, with and without a length, and with a length that lies.
The peak is measured with tracemalloc on a body the Worker reads and then refuses (401),
so nothing but the read is held; the ratio is against the unknown-length read, same run.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest

from tests.fakes.workers._js import JsReadableStream
from tests.support import TOKEN, WORKER_ORIGIN, WorkerBackend

AUTH = {"authorization": f"Bearer {TOKEN}"}
TEXT = "Größe 😀 — напомни: " + "x" * 200 + " ✓"


def _shapes(body: bytes) -> dict[str, list[bytes]]:
    return {
        "one": [body],
        "bytes": [body[i : i + 1] for i in range(len(body))],
        "sevens": [body[i : i + 7] for i in range(0, len(body), 7)],
        "empty-chunks": [b"", body[:5], b"", body[5:], b""],
        "uneven": [body[:1], body[1:100], body[100:101], body[101:]],
    }


async def _add(w: WorkerBackend, chat: str, pieces: list[bytes], headers: dict[str, str]):
    assert w.runtime is not None
    url = f"{WORKER_ORIGIN}/v1/chats/{chat}/reminders"
    status, _, data = await w.runtime.fetch("POST", url, {**AUTH, **headers}, JsReadableStream(pieces))
    assert not w.runtime.errors, w.runtime.errors[-1]
    return status, json.loads(data)


@pytest.mark.parametrize("length", ["exact", "none", "says-more"])
@pytest.mark.parametrize("shape", ["one", "bytes", "sevens", "empty-chunks", "uneven"])
async def test_the_same_bytes_arrive_whatever_the_chunks(worker, shape, length):
    due = worker.entry.now_ms() + 3_600_000
    body = json.dumps({"text": TEXT, "due_at": due}, ensure_ascii=False).encode()
    headers = {
        "exact": {"content-length": str(len(body))},
        "none": {},
        "says-more": {"content-length": str(len(body) + 50)},  # the stream ends first: what came
    }[length]
    status, answer = await _add(worker, "shapes", _shapes(body)[shape], headers)
    assert status == 200, answer
    assert answer["reminder"]["text"] == TEXT and answer["reminder"]["due_at"] == due


async def test_a_length_that_says_less_than_the_stream_keeps_reading_as_before(worker):
    due = worker.entry.now_ms() + 3_600_000
    body = json.dumps({"text": TEXT, "due_at": due}, ensure_ascii=False).encode()
    # No chunk ends at the declared length: the whole stream is read, as it was.
    pieces = [body[:10], body[10:]]
    status, answer = await _add(worker, "less", pieces, {"content-length": "5"})
    assert status == 200 and answer["reminder"]["text"] == TEXT
    # A chunk ends there: the declared length frames the body, as in HTTP (400: cut JSON).
    status, answer = await _add(worker, "less", pieces, {"content-length": "10"})
    assert status == 400 and "JSON" in answer["error"]


async def _peak_of_a_read(w: WorkerBackend, size: int, headers: dict[str, str]) -> int:
    """Bytes allocated at the peak while the Worker reads `size` bytes in 1 MiB chunks (then 401)."""
    assert w.runtime is not None
    chunk = 1024 * 1024
    stream = JsReadableStream(b" " * min(chunk, size - i) for i in range(0, size, chunk))
    url = f"{WORKER_ORIGIN}/v1/chats/big/import"
    tracemalloc.start()
    try:
        status, _, _ = await w.runtime.fetch("POST", url, headers, stream)  # no token: read, refused
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 401 and stream.pulled == size
    return peak


async def test_a_declared_length_reads_into_one_buffer_about_the_body_once(worker):
    size = 16 * 1024 * 1024
    joined = await _peak_of_a_read(worker, size, {})
    buffered = await _peak_of_a_read(worker, size, {"content-length": str(size)})
    print(f"peak while reading {size} bytes: joined {joined}, buffered {buffered} ({buffered / joined:.2f}x)")
    assert buffered < 1.25 * size  # was about 2x: the chunks, then their join
    assert buffered < 0.7 * joined
