"""Issue 40, item 14: the OpenAPI document and the API agree, checked by schemathesis.

schemathesis reads the document the local host serves (`GET /openapi.json`, generated from
the route table) and sends what it calls valid (each must be taken: no 400 for a request the
document allows), what it calls invalid (each must be refused), wrong methods (405 with
`Allow`); every answer must be the status, type and schema documented. About 1,400 cases
(most from the coverage phase: each field's bounds), a fixed seed; schemathesis's own CPU is
~16 s of it. The NUL byte in a header is checked apart (no client library sends one).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from pathlib import Path

from memory_engine.api.routes import ROUTES
from memory_worker.local import EmbeddedMemoryHost

CONFIG = Path(__file__).with_name("schemathesis.toml")
ST = str(Path(sys.executable).with_name("st"))


async def test_the_api_keeps_to_its_openapi_document(tmp_path):
    async with EmbeddedMemoryHost(tmp_path / "memory", token="contract-token", summarizer=None) as host:
        proc = await asyncio.create_subprocess_exec(
            ST, "--config-file", str(CONFIG), "--no-color", "run", f"{host.url}/openapi.json",
            "-H", "Authorization: Bearer contract-token",
            "--max-examples", "3", "--seed", "40", "--workers", "1",
            "--phases", "examples,coverage,fuzzing", "--generation-database", "none",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path,
        )  # fmt: skip
        out, _ = await proc.communicate()
    report = out.decode(errors="replace")
    assert proc.returncode == 0, report[-6000:]
    selected = re.search(r"Selected: (\d+)/(\d+)", report)
    tested = re.search(r"Tested: (\d+)", report)
    assert selected and tested, report[-2000:]
    # every operation the document names was selected and ran
    assert selected[1] == selected[2] == tested[1] and int(tested[1]) >= len(ROUTES) - 1, report[-2000:]


async def test_a_nul_byte_in_a_header_is_refused_in_one_log_line(tmp_path, caplog):
    """A NUL byte in a header logged a traceback (`Error handling request`, level error)."""
    async with EmbeddedMemoryHost(tmp_path / "memory", token="t", summarizer=None) as host:
        with caplog.at_level(logging.DEBUG):
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            writer.write(b"GET /v1/chats/c1/stats HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\x00b\r\n\r\n")
            await writer.drain()
            answer = await reader.read(200)
            writer.close()
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    records = [
        r for r in caplog.records if "malformed" in r.getMessage() or "Error handling" in r.getMessage()
    ]
    assert len(records) == 1, [r.getMessage() for r in caplog.records]
    assert records[0].levelno == logging.WARNING and records[0].exc_info is None
