"""The Worker's own code on its real runtime: `chatbot memory serve --runtime pyodide`.

What only a real process shows: every route answers through the CLI, a `kill -9` of the
whole process group loses no acknowledged write, the compaction alarm fires, reaches the
summarizer through the runtime's `fetch`, lets other requests in while it waits, and
survives a crash; the host's storage refuses what a Durable Object refuses (Node's own
test runner, `memory_worker/pyodide/storage.test.mjs`). The contract suite runs on this
runtime too (backend "pyodide" in tests/hosts/test_memory_contract.py).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from memory_engine.api.http import MAX_BODY_BYTES
from memory_engine.compaction.compact import SECTIONS
from memory_worker.local.storage import FolderInUse, ServeLock
from memory_worker.pyodide_runtime import (
    HOST_DIR,
    PyodideHost,
    PyodideUnavailable,
    check_installed,
    node_binary,
)
from tests.fakes.gated_summarizer import GatedSummarizer
from tests.fakes.openai_server import Answer, FakeOpenAI, Hang
from tests.support import TOKEN, ServedMemory, wait_until

try:
    check_installed()
    MISSING = ""
except PyodideUnavailable as err:
    MISSING = str(err)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)

AUTH = {"authorization": f"Bearer {TOKEN}"}
SUMMARY = "\n\n".join(f"{h}\n- point {i} from the light model" for i, h in enumerate(SECTIONS))


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
    assert "# fail 0" in run.stdout and "# pass 12" in run.stdout


async def test_cli_serves_every_route_and_kill_9_loses_no_acknowledged_write(tmp_path):
    # The host binds port 0 and prints its URL (no free-port guess another process could take).
    served = ServedMemory(tmp_path / "data", TOKEN, runtime="pyodide")
    acked: dict[str, int] = {}
    try:
        await served.start(timeout=120)
        with pytest.raises(FolderInUse):  # Node holds the serve lock: `memory restore` refuses
            ServeLock(tmp_path / "data")
        async with httpx.AsyncClient(
            base_url=served.url, headers=AUTH, trust_env=False, timeout=60
        ) as client:
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
            served.kill9()  # mid-write (its whole process group): some requests were in flight
            results = await asyncio.gather(*writers, return_exceptions=True)
            assert all(isinstance(r, httpx.TransportError) for r in results), results
    finally:
        served.stop_quietly()
    ServeLock(tmp_path / "data").release()  # the kernel dropped it with Node
    try:
        await served.start(timeout=120)
        async with httpx.AsyncClient(
            base_url=served.url, headers=AUTH, trust_env=False, timeout=60
        ) as client:
            for key, count in acked.items():
                total = (await client.get(f"/v1/chats/{key}/stats")).json()["total_messages"]
                # every acknowledged turn is there; at most the one in flight landed besides
                assert count <= total <= count + 1, (key, count, total)
            assert (await client.post("/v1/chats/k0/turn", json={"text": "after"})).status_code == 200
    finally:
        served.kill9()


async def _say(client: httpx.AsyncClient, chat: str, n: int, start: int = 0) -> None:
    # Live turns: an import would archive all but its tail, making no compaction due.
    for i in range(start, start + n):
        body = {"text": f"story part {i} about the lighthouse", "message_id": f"p{i}"}
        assert (await client.post(f"/v1/chats/{chat}/turn", json=body)).status_code == 200


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
                await _say(client, "cmp", 30)  # over the threshold: the object sets its alarm
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


async def test_a_backlog_grown_during_a_compaction_gets_the_next_one_by_itself(tmp_path):
    # The turns that come in while the alarm awaits its summarizer leave the alarm alone;
    # the alarm, when it ends, sees the backlog still past the threshold and sets the next.
    async with GatedSummarizer(SUMMARY) as gated:
        host = PyodideHost(tmp_path / "data", TOKEN, env={"SUMMARY_BASE_URL": gated.url})
        await asyncio.to_thread(host.start)
        try:
            async with httpx.AsyncClient(
                base_url=host.url, headers=AUTH, trust_env=False, timeout=60
            ) as client:
                await _say(client, "bg", 30)
                await asyncio.wait_for(gated.arrived.wait(), 60)  # the alarm is in flight
                await _say(client, "bg", 26, start=30)  # 56 kept, 25 being summarized
                assert gated.calls == 1
                gated.gate.set()

                async def compacted_twice() -> bool:
                    return (await client.get("/v1/chats/bg/summary")).json()["compactions"] == 2

                await wait_until(compacted_twice, timeout=60, what="the next compaction")
                assert (await client.get("/v1/chats/bg/summary")).json()["summarized_upto"] == 51
                stats = (await client.get("/v1/chats/bg/stats")).json()
                assert (stats["total_messages"], stats["active_messages"]) == (56, 5)
                assert gated.calls == 2
        finally:
            host.stop()
        errors = host.log_path.read_text(encoding="utf-8")
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


async def test_a_client_gone_mid_body_is_a_disconnect_not_a_host_error(pyodide_host):
    # It was reported as "host: Error: aborted", which fails whichever test sees it; workerd
    # and the local host (tests/hosts/test_local_host_wire.py) see a disconnect.
    pyodide_host.control("reset")
    before = pyodide_host.control("stats")["clients_gone"]
    body = json.dumps({"text": "half of a message", "author": "Ada", "author_id": "a1"}).encode()
    head = (
        f"POST /v1/chats/gone/turn HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    _, writer = await asyncio.open_connection("127.0.0.1", int(pyodide_host.url.rsplit(":", 1)[1]))
    writer.write(head.encode() + body[: len(body) // 2])
    await writer.drain()
    writer.close()  # gone before the rest of the body
    await writer.wait_closed()

    def gone() -> dict[str, Any] | None:
        stats = pyodide_host.control("stats")
        return stats if stats["clients_gone"] == before + 1 else None

    stats = await wait_until(gone, timeout=30, what="the host to see the client gone")
    assert stats["errors"] == []
    # `stats` left the errors for the suite's own check; nothing of the half body was stored.
    assert pyodide_host.control("errors")["errors"] == []
    async with httpx.AsyncClient(base_url=pyodide_host.url, headers=AUTH, trust_env=False, timeout=60) as c:
        assert (await c.get("/v1/chats/gone/stats")).json()["total_messages"] == 0


async def test_idle_objects_are_evicted_with_their_state_on_disk_and_wrangler_vars_are_read(tmp_path):
    import tomllib

    from memory_worker.pyodide_runtime import SRC_DIR

    host = PyodideHost(tmp_path / "data", TOKEN, control=True, env={"PYODIDE_IDLE_EVICT_MS": "100"})
    host.start()
    try:
        wrangler = tomllib.loads((SRC_DIR.parent / "wrangler.toml").read_text(encoding="utf-8"))
        assert host.ready["vars"] == sorted(wrangler["vars"])  # the Worker's env has them
        async with httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=60) as client:
            body = {"text": "remember the walrus", "message_id": "w1"}
            first = await client.post("/v1/chats/idle/turn", json=body)
            assert first.status_code == 200

            def evicted() -> dict | None:
                stats = host.control("stats")
                return stats if stats["evictions"] >= 1 and stats["open"] == 0 else None

            stats = await wait_until(evicted, timeout=30, what="the idle object's eviction")
            assert stats["errors"] == []
            again = (await client.post("/v1/chats/idle/turn", json={"text": "walrus?"})).json()
            assert [m["text"] for m in again["recent"]] == ["remember the walrus"]
            assert host.control("stats")["open"] == 2  # the chat's object and the directory's
    finally:
        host.stop()


async def test_the_worker_glue_answers_like_the_local_host(pyodide_host, tmp_path):
    """Requests and answers cross as JS objects on Pyodide: the same status, body and
    content-type as the local host, whatever the header's case or the body's shape."""
    from memory_worker.local import EmbeddedMemoryHost

    pyodide_host.control("reset")
    token = f"Bearer {TOKEN}"
    plain = {"Authorization": token, "content-type": "text/plain"}  # the engine reads no content-type
    script: list[tuple[str, str, dict[str, str], bytes | str | None]] = [
        ("GET", "/health", {}, None),
        ("GET", "/v1/chats/g/stats", {"AUTHORIZATION": token}, None),  # any case of the name
        ("GET", "/v1/chats/g/stats", {"authorization": token.lower()}, None),
        ("GET", "/v1/chats/g/stats", {}, None),  # no token
        ("POST", "/v1/chats/g/turn", {"Authorization": token}, None),  # no body at all
        ("POST", "/v1/chats/g/turn", {"Authorization": token}, b""),
        ("POST", "/v1/chats/g/turn", {"Authorization": token}, b"{not json"),
        ("POST", "/v1/chats/g/turn", {"Authorization": token}, b'{"text": "' + b"a" * 70_000 + b'"}'),
        ("POST", "/v1/chats/g/turn", plain, b'{"text": "hi"}'),
        ("GET", "/v1/chats/g/stats", {"authorization": token}, b""),
        ("DELETE", "/v1/chats/g/reminders/999", {"authorization": token}, b'{"ignored": true}'),
        ("PATCH", "/v1/chats/g/turn", {"authorization": token}, b"{}"),
        ("GET", "/v1/chats/g/search?q=hi", {"authorization": token}, None),
        # Over the body limit: refused by its Content-Length, then while reading a chunked one.
        ("POST", "/v1/chats/g/import", {"authorization": token}, b" " * (MAX_BODY_BYTES + 1)),
        ("POST", "/v1/chats/g/import", {"authorization": token}, "chunked"),
    ]
    big = b" " * (1024 * 1024)

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: the size is learnt by reading
        for _ in range(MAX_BODY_BYTES // len(big) + 1):
            yield big

    async def run(url: str) -> list[tuple[int, str, Any]]:
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=60) as client:
            out = []
            for method, path, headers, body in script:
                content = chunked() if body == "chunked" else body
                r = await client.request(method, path, headers=headers, content=content)
                out.append((r.status_code, r.headers.get("content-type"), r.json()))
            return out

    async with EmbeddedMemoryHost(tmp_path / "local", token=TOKEN) as local:
        expected = await run(local.url)
    heap = pyodide_host.control("stats")["wasm"]
    got = await run(pyodide_host.url)
    # Neither oversized body (32 MiB each) was copied into Pyodide's heap to be refused.
    assert pyodide_host.control("stats")["wasm"] - heap < 16 * 1024 * 1024
    assert [s for s, _, _ in expected] == [
        200,
        200,
        200,
        401,
        400,
        400,
        400,
        413,
        200,
        200,
        404,
        405,
        200,
        413,
        413,
    ]
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        # A refusal's body is the same; a 200 carries times and the runtime's name.
        assert want[:2] == have[:2] and (want[0] == 200 or want == have), (script[i][:2], want, have)
        assert have[1] == "application/json; charset=utf-8", script[i][:2]
