"""A long run of the Worker on its real runtime (Pyodide under Node): `make soak`.

Thousands of turns over hundreds of chats, several at a time, with idle objects evicted
all along (as workerd does) and the whole host killed with `kill -9` between rounds.
Every acknowledged turn is still there after the restarts, a repeated message_id is not
stored twice, the host reports no error, and it never dies on its own (the user-data
cases once lost their host in the whole suite: a V8 crash, see memory_worker/pyodide_runtime.py).
The sizes can be changed with SOAK_CHATS, SOAK_TURNS and SOAK_ROUNDS.
"""

from __future__ import annotations

import asyncio
import os
import random

import httpx
import pytest

from memory_worker.pyodide_runtime import PyodideHost, PyodideUnavailable, check_installed
from tests.support import TOKEN

try:
    check_installed()
    MISSING = ""
except PyodideUnavailable as err:
    MISSING = str(err)
# The full size takes minutes on a shared machine: past the suite's per-test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(MISSING), reason=MISSING), pytest.mark.timeout(3600)]

AUTH = {"authorization": f"Bearer {TOKEN}"}
CHATS = int(os.environ.get("SOAK_CHATS", "200"))
TURNS = int(os.environ.get("SOAK_TURNS", "3000"))
ROUNDS = int(os.environ.get("SOAK_ROUNDS", "3"))
CONCURRENCY = 8
WORDS = ["walrus", "kayak", "lantern", "harbour", "comet", "violin", "meadow", "orchard", "glacier"]


async def _round(
    host: PyodideHost, turns: int, rng: random.Random, acked: dict[str, set[str]], n0: int
) -> None:
    """`turns` turns spread over the chats, CONCURRENCY at a time; records each acknowledged one."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(n0, n0 + turns):
        queue.put_nowait(n)

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            n = queue.get_nowait()
            chat = f"soak:{rng.randrange(CHATS)}"
            text = f"turn {n}: " + " ".join(rng.sample(WORDS, 3))
            r = await client.post(f"/v1/chats/{chat}/turn", json={"text": text, "message_id": f"m{n}"})
            assert r.status_code == 200, r.text
            acked.setdefault(chat, set()).add(f"m{n}")

    async with httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=120) as client:
        await asyncio.gather(*(worker(client) for _ in range(CONCURRENCY)))


async def test_thousands_of_turns_over_hundreds_of_chats_with_kill_9_between(tmp_path):
    rng = random.Random(22)
    acked: dict[str, set[str]] = {}
    env = {"PYODIDE_IDLE_EVICT_MS": "300"}
    per_round = TURNS // ROUNDS
    evictions = 0
    for round_no in range(ROUNDS):
        host = PyodideHost(tmp_path / "data", TOKEN, control=True, env=env).start(timeout_s=300)
        try:
            await _round(host, per_round, rng, acked, round_no * per_round)
            stats = host.control("stats")
            assert stats["errors"] == [], stats["errors"][-1]
            evictions += stats["evictions"]
            assert host.proc is not None and host.proc.poll() is None  # alive all along
        finally:
            host.kill()  # kill -9 of the whole process group, mid-life
    assert evictions > 0  # idle objects were evicted and built again from their files
    host = PyodideHost(tmp_path / "data", TOKEN, control=True, env=env).start(timeout_s=300)
    try:
        async with httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=120) as client:
            for chat, ids in sorted(acked.items()):
                stats = (await client.get(f"/v1/chats/{chat}/stats")).json()
                assert stats["total_messages"] == len(ids), chat
            chat, ids = next(iter(sorted(acked.items())))
            body = {"text": "again", "message_id": min(ids)}
            again = await client.post(f"/v1/chats/{chat}/turn", json=body)
            assert again.status_code == 200
            assert (await client.get(f"/v1/chats/{chat}/stats")).json()["total_messages"] == len(ids)
        assert host.control("errors")["errors"] == []
    finally:
        host.stop()
    assert sum(len(ids) for ids in acked.values()) == per_round * ROUNDS
