"""The local host at the edges of HTTP, over raw sockets on 127.0.0.1: bodies that never come whole.

A client that goes away mid-body is a disconnect, not a storage failure (it was logged as an
ERROR with a 503), and nothing of its request is stored. Nothing sleeps: the tests wait on
the socket or poll with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from memory_engine.validation import MAX_BODY_BYTES

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
