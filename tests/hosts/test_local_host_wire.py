"""The local host at the edges of HTTP, over raw sockets on 127.0.0.1: bodies that never come whole.

A client that goes away mid-body is a disconnect, not a storage failure (it was logged as an
ERROR with a 503), and nothing of its request is stored. A body whose declared length is over
the limit is refused at once, unread, as the Worker refuses it; one without a length is
refused while it is read. Nothing sleeps: the tests wait on the socket or poll with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from memory_engine.api.validation import MAX_BODY_BYTES
from memory_worker.local import EmbeddedMemoryHost
from tests.support import TOKEN, wait_until

CHAT = "telegram:-100"
REFUSAL = {"error": f"request body over {MAX_BODY_BYTES} bytes"}


@pytest.fixture
async def host(tmp_path):
    async with EmbeddedMemoryHost(tmp_path / "data", token=TOKEN) as h:
        yield h


def port_of(host: EmbeddedMemoryHost) -> int:
    """The port the host listens on."""
    return int(host.url.rsplit(":", 1)[1])


def head(length: int | None, *extra: str) -> bytes:
    """A turn request's head, with a Content-Length unless `length` is None (then chunked)."""
    lines = [f"POST /v1/chats/{CHAT}/turn HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {TOKEN}"]
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode()


def answer_of(raw: bytes) -> tuple[int, dict[str, str], object]:
    """(status, lower-cased headers, JSON body) of one HTTP answer."""
    top, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(payload) if payload else None


async def test_a_client_gone_mid_body_is_a_disconnect_not_a_storage_error(host, caplog):
    caplog.set_level(logging.DEBUG)
    body = json.dumps({"text": "half of a message", "author": "Ada", "author_id": "a1"}).encode()
    _, writer = await asyncio.open_connection("127.0.0.1", port_of(host))
    writer.write(head(len(body)) + body[: len(body) // 2])
    await writer.drain()
    writer.close()  # gone before the rest of the body
    await writer.wait_closed()

    def access_lines() -> list[dict]:
        return [r.fields for r in caplog.records if r.name == "memory_worker.access"]

    await wait_until(access_lines, timeout=10, what="the request's access line")
    assert [a["status"] for a in access_lines()] == [499]  # was 503: "storage is unavailable"
    # Was "ERROR storage error ... Connection lost".
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    gone = [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelno == logging.INFO and gone[0].exc_info is None
    # Nothing of the half body was stored: the chat does not even exist.
    assert host.host is not None and not host.host.store.exists(CHAT)


async def test_a_declared_length_over_the_limit_is_refused_at_once_and_the_connection_closed(host):
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(host))
    try:
        writer.write(head(MAX_BODY_BYTES + 1))  # and not a byte of the body
        await writer.drain()
        async with asyncio.timeout(10):  # main: waited for the 32 MiB that never came
            raw = await reader.readuntil(b"}")
        status, headers, payload = answer_of(raw)
        assert (status, payload) == (413, REFUSAL)
        assert headers["connection"] == "close"
        writer.write_eof()  # the client has no more to say: the host closes its side
        async with asyncio.timeout(10):
            assert await reader.read() == b""
    finally:
        writer.close()


async def test_an_oversized_body_expecting_100_continue_gets_413_instead(host):
    # curl waits for "100 Continue" before a large upload: it is told 413 and sends nothing.
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(host))
    try:
        writer.write(head(MAX_BODY_BYTES + 1, "Expect: 100-continue"))
        await writer.drain()
        async with asyncio.timeout(10):
            raw = await reader.readuntil(b"}")
    finally:
        writer.close()
    assert raw.startswith(b"HTTP/1.1 413 ") and answer_of(raw)[2] == REFUSAL


async def test_a_body_without_a_length_is_still_refused_while_it_is_read(host):
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(host))
    chunk = b" " * (1024 * 1024)
    try:
        writer.write(head(None))
        async with asyncio.timeout(30):
            for _ in range(MAX_BODY_BYTES // len(chunk) + 1):  # one MiB past the limit
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            raw = await reader.readuntil(b"}")
    finally:
        writer.close()
    assert answer_of(raw)[0] == 413 and answer_of(raw)[2] == REFUSAL


async def test_a_request_in_flight_when_the_host_drains_is_answered_and_its_connection_closed(host):
    body = json.dumps({"text": "said as the host stops", "author": "Ada", "author_id": "a1"}).encode()
    inner = host.host
    assert inner is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(host))
    try:
        writer.write(head(len(body)) + body[:10])
        await writer.drain()
        await wait_until(lambda: inner.in_flight == 1, timeout=10, what="the request in flight")
        drained = asyncio.create_task(inner.drain(10))  # the shutdown starts mid-body
        writer.write(body[10:])
        async with asyncio.timeout(10):
            raw = await reader.read()  # to the end: the host closes the connection
            assert await drained
    finally:
        writer.close()
    status, headers, _ = answer_of(raw)
    assert status == 200 and headers["connection"] == "close"
