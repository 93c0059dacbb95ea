"""Hostile export files (issue 24) and the peak RSS of the command that reads them.

Shared by tests/importers/test_import_hostile.py and benchmarks/import_memory.py.
"""

from __future__ import annotations

import json
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


# A small launcher runs the command under the cap and reports its peak: a child's ru_maxrss
# counts the pages of the process it was forked from (Linux keeps the old mm's high-water
# mark at exec), so it is forked from the launcher (~10 MB), never from this process, which
# may hold a 30 MB export in memory.
_LAUNCHER = """
import os, resource, subprocess, sys
cap = int(sys.argv[1])
def limit():
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
child = subprocess.Popen(sys.argv[2:], preexec_fn=limit)
_, status, usage = os.wait4(child.pid, 0)
print(f"@@peak {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}", flush=True)
"""


def peak_rss(platform: str, path: Path, cap_mb: int) -> tuple[float, int, str]:
    """Runs `chatbot import PLATFORM PATH --dry-run`; its peak RSS in MB, exit code, last line."""
    data = str(path.parent)
    cmd = [sys.executable, "-m", "bot.cli", "import", platform, str(path), "--dry-run", "--data", data]
    cap = str(cap_mb * 1024 * 1024)
    run = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, cap, *cmd], cwd=ROOT, capture_output=True, text=True, check=True
    )
    lines = (run.stdout + run.stderr).strip().splitlines()
    peak = next(line for line in lines if line.startswith("@@peak "))
    _, kib, code = peak.split()
    said = [line for line in lines if not line.startswith("@@peak ")]
    return int(kib) / 1024, int(code), (said or [""])[-1][:400]  # ru_maxrss is in KiB on Linux
