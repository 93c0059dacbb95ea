"""Hostile export files (issue 24) and the peak RSS of the command that reads them.

Shared by tests/test_import_hostile.py and benchmarks/import_memory.py.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def nested(depth: int) -> bytes:
    """The probe's Telegram export: a header field nested `depth` brackets deep."""
    head = b'{"name":"x","type":"private_group","id":1,"junk":'
    return head + b"[" * depth + b"]" * depth + b',"messages":[]}'


def nested_discord(depth: int) -> bytes:
    """The same in a Discord export's header."""
    return b'{"guild":' + b"[" * depth + b"]" * depth + b',"channel":{"id":"5"},"messages":[]}'


def mentions() -> bytes:
    """One Discord message whose 5,000 mentions name a person with 100,000 characters."""
    message = {
        "id": "1",
        "type": "Default",
        "timestamp": "2024-03-01T10:00:00Z",
        "content": "<@1>" * 5000,
        "author": {"id": "2", "name": "b"},
        "mentions": [{"id": "1", "name": "x" * 100_000}],
    }
    return json.dumps({"guild": {}, "channel": {"id": "5"}, "messages": [message]}).encode()


def genuine(size: int) -> bytes:
    """A plain Telegram export of about `size` bytes (the baseline)."""
    one = {"id": 0, "type": "message", "date_unixtime": "1700000000", "from": "a", "from_id": "user1"}
    messages, total, i = [], 0, 0
    while total < size:
        i += 1
        m = dict(one, id=i, text=f"message number {i} about the trail and the summit")
        messages.append(m)
        total += len(json.dumps(m)) + 1
    return json.dumps({"name": "g", "type": "private_supergroup", "id": 7, "messages": messages}).encode()


def peak_rss(platform: str, path: Path, cap_mb: int) -> tuple[float, int, str]:
    """Runs `chatbot import PLATFORM PATH --dry-run`; its peak RSS in MB, exit code, last line."""

    def limit() -> None:
        cap = cap_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    cmd = [
        sys.executable,
        "-m",
        "bot.cli",
        "import",
        platform,
        str(path),
        "--dry-run",
        "--data",
        str(path.parent),
    ]
    child = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=limit, text=True
    )
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    last = (output.strip().splitlines() or [""])[-1][:400]
    return usage.ru_maxrss / 1024, child.returncode, last  # ru_maxrss is in KiB on Linux
