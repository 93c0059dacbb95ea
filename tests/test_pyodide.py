"""The Worker's own code on its real runtime: `chatbot memory serve --runtime pyodide`.

What only a real process shows: every route answers through the CLI, a `kill -9` of the
whole process group loses no acknowledged write, the compaction alarm fires, reaches the
summarizer through the runtime's `fetch`, lets other requests in while it waits, and
survives a crash; the host's storage refuses what a Durable Object refuses (Node's own
test runner, `memory_worker/pyodide/storage.test.mjs`). The contract suite runs on this
runtime too (backend "pyodide" in tests/test_memory_contract.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from memory_engine.compaction import SECTIONS

from memory_worker.pyodide_runtime import (
    HOST_DIR,
    PyodideHost,
    PyodideUnavailable,
    check_installed,
    node_binary,
)
from tests.fakes.openai_server import Answer, FakeOpenAI, Hang
from tests.memory_backends import TOKEN
from tests.support import wait_until

try:
    check_installed()
    MISSING = ""
except PyodideUnavailable as err:
    MISSING = str(err)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)

AUTH = {"authorization": f"Bearer {TOKEN}"}
SUMMARY = "\n\n".join(f"{h}\n- point {i} from the light model" for i, h in enumerate(SECTIONS))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_cli(data: Path, port: int) -> subprocess.Popen:
    chatbot = Path(sys.executable).with_name("chatbot")
    argv = [str(chatbot), "memory", "serve", "--runtime", "pyodide", "--port", str(port), "--data", str(data)]
    return subprocess.Popen(
        argv,
        env=dict(os.environ, MEMORY_API_TOKEN=TOKEN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, killed whole below
    )


async def _healthy(client: httpx.AsyncClient, proc: subprocess.Popen) -> None:
    async def up() -> bool:
        assert proc.poll() is None, "the Pyodide host exited"
        try:
            return (await client.get("/health")).status_code == 200
        except httpx.TransportError:
            return False

    await wait_until(up, timeout=120, what="the Pyodide host answering /health")


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_node_storage_limits():
    """The host's storage under Node's test runner: limits, cursor, transactions, alarms."""
    run = subprocess.run(
        [str(node_binary()), "--no-warnings", "--test", "storage.test.mjs"],
        cwd=HOST_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass 7" in run.stdout


async def test_cli_serves_every_route_and_kill_9_loses_no_acknowledged_write(tmp_path):
    port, data = _free_port(), tmp_path / "data"
    proc = _serve_cli(data, port)
    acked: dict[str, int] = {}
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=AUTH, trust_env=False, timeout=60
        ) as client:
            await _healthy(client, proc)
            chat = "/v1/chats/telegram:-1001"
            reply = {
                "text": "hi",
                "tier": "fast",
                "model": "m",
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            }
            imported = {
                "messages": [{"role": "user", "text": f"old {i}", "message_id": f"o{i}"} for i in range(3)]
            }
            every_route = [
                ("POST", f"{chat}/turn", {"text": "my name is Ada and I like chess", "author_id": "u1"}),
                ("POST", f"{chat}/reply", reply),
                ("GET", f"{chat}/search?q=chess", None),
                ("GET", f"{chat}/facts?history=1", None),
                ("GET", f"{chat}/summary", None),
                ("GET", f"{chat}/usage", None),
                ("GET", f"{chat}/stats", None),
                ("PUT", f"{chat}/settings", {"mode": "full"}),
                ("POST", f"{chat}/compact", None),
                ("POST", f"{chat}/import", imported),
                ("DELETE", f"{chat}/authors/u1", None),
                ("DELETE", chat, None),
            ]
            for method, path, body in every_route:
                r = await client.request(method, path, json=body)
                assert r.status_code == 200, (method, path, r.status_code, r.text)
                assert isinstance(r.json(), dict)
            assert (await client.get("/v1/chats/x/nope")).status_code == 404
            assert (
                await client.get("/v1/chats/x/stats", headers={"authorization": "Bearer no"})
            ).status_code == 401

            async def writer(key: str) -> None:
                for i in range(1000):
                    r = await client.post(
                        f"/v1/chats/{key}/turn", json={"text": f"durable {i}", "message_id": f"m{i}"}
                    )
                    assert r.status_code == 200
                    acked[key] = acked.get(key, 0) + 1

            writers = [asyncio.create_task(writer(f"k{c}")) for c in range(3)]
            await wait_until(lambda: sum(acked.values()) >= 60, timeout=120, what="60 acknowledged turns")
            _kill_group(proc)  # mid-write: some requests were in flight
            results = await asyncio.gather(*writers, return_exceptions=True)
            assert all(isinstance(r, httpx.TransportError) for r in results), results
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    proc = _serve_cli(data, port)
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=AUTH, trust_env=False, timeout=60
        ) as client:
            await _healthy(client, proc)
            for key, count in acked.items():
                total = (await client.get(f"/v1/chats/{key}/stats")).json()["total_messages"]
                # every acknowledged turn is there; at most the one in flight landed besides
                assert count <= total <= count + 1, (key, count, total)
            assert (await client.post("/v1/chats/k0/turn", json={"text": "after"})).status_code == 200
    finally:
        _kill_group(proc)


async def _import(client: httpx.AsyncClient, chat: str, n: int) -> None:
    msgs = [
        {"role": "user", "text": f"story part {i} about the lighthouse", "message_id": f"p{i}"}
        for i in range(n)
    ]
    r = await client.post(f"/v1/chats/{chat}/import", json={"messages": msgs})
    assert r.json()["imported"] == n


async def test_alarm_compacts_through_fetch_lets_turns_in_and_survives_kill_9(tmp_path):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(Hang())  # the first summarizer call never answers: the host dies meanwhile
        env = {"SUMMARY_BASE_URL": fake.url, "SUMMARY_MODEL": "light-1", "SUMMARY_API_KEY": "sk-test-key"}
        host = PyodideHost(tmp_path / "data", TOKEN, env=env)
        await asyncio.to_thread(host.start)
        try:
            async with httpx.AsyncClient(
                base_url=host.url, headers=AUTH, trust_env=False, timeout=60
            ) as client:
                await _import(client, "cmp", 30)  # over the threshold: the object sets its alarm
                await fake.wait_requests(1, timeout=60)  # the alarm fired and called out via fetch
                assert fake.requests[0].model == "light-1"
                assert fake.requests[0].headers.get("Authorization") == "Bearer sk-test-key"
                # While the object awaits its summarizer, other requests get in (input gate).
                for i in range(3):
                    r = await client.post("/v1/chats/cmp/turn", json={"text": f"meanwhile {i}"})
                    assert r.status_code == 200
                summary = (await client.get("/v1/chats/cmp/summary")).json()
                assert summary["compactions"] == 0
        finally:
            host.kill()  # the alarm had not finished: it is still persisted
            host.stop()
        restarted = PyodideHost(tmp_path / "data", TOKEN, env=env)
        await asyncio.to_thread(restarted.start)
        try:
            async with httpx.AsyncClient(
                base_url=restarted.url, headers=AUTH, trust_env=False, timeout=60
            ) as client:

                async def compacted() -> bool:
                    return (await client.get("/v1/chats/cmp/summary")).json()["compactions"] == 1

                await wait_until(compacted, timeout=60, what="the re-run alarm compacting")
                assert len(fake.requests) == 2
                assert "story part 0 about" in json.dumps(fake.requests[1].messages)
                summary = (await client.get("/v1/chats/cmp/summary")).json()
                assert summary["summary"] == SUMMARY and summary["summarized_upto"] == 28
                stats = (await client.get("/v1/chats/cmp/stats")).json()
                # the turns that got in during the first try are kept (and counted in the re-run)
                assert stats["total_messages"] == 33 and stats["active_messages"] == 5
        finally:
            restarted.stop()
        errors = restarted.log_path.read_text(encoding="utf-8")
        assert "Traceback" not in errors, errors[-2000:]


async def test_state_survives_eviction_of_every_object(pyodide_host):
    pyodide_host.control("reset")
    async with httpx.AsyncClient(
        base_url=pyodide_host.url, headers=AUTH, trust_env=False, timeout=60
    ) as client:
        r = await client.post("/v1/chats/ev/turn", json={"text": "remember the walrus", "message_id": "w1"})
        assert r.status_code == 200
        assert pyodide_host.control("evict") == {
            "ok": "evict",
            "errors": [],
        }  # fresh instances, files reopened
        got = (await client.post("/v1/chats/ev/turn", json={"text": "walrus?"})).json()
        assert [m["text"] for m in got["recent"]] == ["remember the walrus"]
        assert (await client.get("/v1/chats/ev/stats")).json()["total_messages"] == 2
