"""Faults on the memory host, each test ending by counting every chat: nothing lost, nothing doubled.

- `chatbot memory serve` SIGKILLed at random points under concurrent load, restarted; the
  clients retry what was not acknowledged with the same message_id: exactly once.
- SIGTERM: the in-flight requests are answered, every WAL is checkpointed, exit code 0.
- The disk full: a page cap on one chat's database (a host hook), and a real small tmpfs
  (when the tests run as root): a clear 507, no corrupted database, the other chats keep
  being served, and the same chat once space is back.
- The summarizer down over 100 compaction attempts across a host restart, with several
  chats (the single-chat case is in tests/engine/test_compaction.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from memory_engine.compaction.compact import SECTIONS
from memory_worker.local import ChatStore, EmbeddedMemoryHost
from tests.fakes.openai_server import Answer, FakeOpenAI, ServerError
from tests.support import INDEXED_OR_TAIL, ServedMemory, wait_until

TOKEN = "faults-token-9d2e7b41"
AUTH = {"authorization": f"Bearer {TOKEN}"}
TRANSPORT = (httpx.TransportError,)


def chat_db(data: Path, chat: str) -> Path:
    """The database file of a chat (the host names it by hash)."""
    path = ChatStore(data.parent / "_paths").path_for(chat)
    return data / path.relative_to(data.parent / "_paths")


@dataclass
class Audit:
    """What one chat's database holds, read straight from the file after the host stopped."""

    integrity: str
    message_ids: dict[str, int]
    usage_rows: int
    usage_calls: int
    fts_rows: int  # INDEXED_OR_TAIL: the newest messages count with or without their index rows
    messages: int = field(default=0)


def audit(data: Path, chat: str) -> Audit:
    """Integrity check and counts of one chat, from its file."""
    conn = sqlite3.connect(chat_db(data, chat))
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        ids = dict(conn.execute("SELECT message_id, COUNT(*) FROM messages GROUP BY message_id").fetchall())
        usage_rows = conn.execute("SELECT COUNT(*) FROM router_usage").fetchone()[0]
        calls = conn.execute("SELECT COALESCE(SUM(calls), 0) FROM usage_daily").fetchone()[0]
        fts = conn.execute(INDEXED_OR_TAIL).fetchone()[0]
        total = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    finally:
        conn.close()
    return Audit(integrity, ids, usage_rows, calls, fts, total)


# -- SIGKILL under load ----------------------------------------------------------------------------


@dataclass
class LoadResult:
    acked: int = 0
    retried: int = 0
    kills: int = 0
    errors_5xx: int = 0


async def _exactly_once_under_kills(
    tmp_path: Path, chats: int, turns: int, kills: int, seed: int
) -> LoadResult:
    rng = random.Random(seed)
    data = tmp_path / "data"
    served = ServedMemory(data, TOKEN)
    result = LoadResult()
    total = chats * turns * 2
    # Kill points: random counts of acknowledged writes, spread over the run.
    points = sorted(rng.sample(range(total // 10, total * 9 // 10), kills))
    up = asyncio.Event()
    acked_changed = asyncio.Condition()
    await served.start()
    up.set()
    try:
        async with httpx.AsyncClient(
            headers=AUTH,
            trust_env=False,
            timeout=10,
            limits=httpx.Limits(max_connections=64),
        ) as client:

            async def send(path: str, body: dict) -> None:
                """POST until acknowledged; retries reuse the same message_id (each restart has its URL)."""
                while True:
                    await up.wait()
                    try:
                        r = await client.post(served.url + path, json=body)
                    except TRANSPORT:
                        result.retried += 1
                        continue
                    if r.status_code >= 500:
                        result.errors_5xx += 1
                        result.retried += 1
                        continue
                    assert r.status_code == 200, (path, r.status_code, r.text)
                    async with acked_changed:
                        result.acked += 1
                        acked_changed.notify_all()
                    return

            async def client_for(c: int) -> None:
                chat = f"load:{c}"
                for i in range(turns):
                    await send(
                        f"/v1/chats/{chat}/turn",
                        {
                            "text": f"turn {i} of chat {c} about item{i}",
                            "author": "u",
                            "author_id": "u",
                            "message_id": f"u{i}",
                        },
                    )
                    await send(
                        f"/v1/chats/{chat}/reply",
                        {
                            "text": f"reply {i}",
                            "tier": "fast",
                            "model": "m",
                            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
                            "message_id": f"a{i}",
                        },
                    )

            async def killer() -> None:
                for point in points:
                    async with acked_changed:
                        await acked_changed.wait_for(lambda point=point: result.acked >= point)
                    up.clear()
                    served.kill9()
                    result.kills += 1
                    await served.start()
                    up.set()

            kill_task = asyncio.create_task(killer())
            await asyncio.gather(*(client_for(c) for c in range(chats)))
            await asyncio.wait_for(kill_task, 30)
        assert served.terminate() == 0
    finally:
        served.stop_quietly()
    for c in range(chats):
        a = audit(data, f"load:{c}")
        assert a.integrity == "ok"
        expected = {f"u{i}" for i in range(turns)} | {f"a{i}" for i in range(turns)}
        assert set(a.message_ids) == expected, f"chat {c}: lost {expected - set(a.message_ids)}"
        assert all(n == 1 for n in a.message_ids.values()), f"chat {c}: doubled"
        assert a.messages == a.fts_rows == 2 * turns
        assert a.usage_rows == a.usage_calls == turns, (c, a.usage_rows, a.usage_calls)
    assert result.acked == total and result.kills == kills
    return result


async def test_sigkill_under_load_loses_and_doubles_nothing(tmp_path, capsys):
    seed = random.randrange(10**6)
    r = await _exactly_once_under_kills(tmp_path, chats=8, turns=30, kills=3, seed=seed)
    with capsys.disabled():
        print(
            f"\n[faults] kill -9 x{r.kills} under load (seed {seed}): {r.acked} writes acked, "
            f"{r.retried} retried, 0 lost, 0 doubled"
        )


@pytest.mark.slow
@pytest.mark.timeout(3600)
async def test_sigkill_under_load_soak(tmp_path, capsys):
    seed = random.randrange(10**6)
    r = await _exactly_once_under_kills(tmp_path, chats=32, turns=60, kills=12, seed=seed)
    with capsys.disabled():
        print(
            f"\n[faults] kill -9 x{r.kills} under load (seed {seed}): {r.acked} writes acked, "
            f"{r.retried} retried, 0 lost, 0 doubled"
        )


# -- SIGTERM ------------------------------------------------------------------------------------------


def _summary_text() -> str:
    return "\n\n".join(f"{h}\n- summarized while shutting down" for h in SECTIONS)


async def test_sigterm_answers_in_flight_requests_checkpoints_and_exits_0(tmp_path):
    async with FakeOpenAI(default=Answer(text=_summary_text(), delay=1.5)) as fake:
        data = tmp_path / "data"
        served = ServedMemory(data, TOKEN, env={"SUMMARY_BASE_URL": fake.url, "SUMMARY_MODEL": "light"})
        await served.start()
        acked: dict[str, set[str]] = {}
        failed: dict[str, set[str]] = {}
        stop_sending = asyncio.Event()
        try:
            async with httpx.AsyncClient(
                base_url=served.url, headers=AUTH, trust_env=False, timeout=30
            ) as client:
                for i in range(10):
                    r = await client.post(
                        "/v1/chats/term:slow/turn", json={"text": f"slow chat {i}", "message_id": f"s{i}"}
                    )
                    assert r.status_code == 200

                async def writer(chat: str) -> None:
                    acked[chat], failed[chat] = set(), set()
                    i = 0
                    while not stop_sending.is_set():
                        mid = f"w{i}"
                        try:
                            r = await client.post(
                                f"/v1/chats/{chat}/turn", json={"text": f"w {i}", "message_id": mid}
                            )
                        except TRANSPORT:
                            failed[chat].add(mid)
                            return
                        assert r.status_code == 200, r.text  # never a 5xx while stopping
                        acked[chat].add(mid)
                        i += 1

                writers = [asyncio.create_task(writer(f"term:{c}")) for c in range(8)]
                # A compaction waiting on the (slow) summarizer: surely in flight at SIGTERM.
                compact = asyncio.create_task(client.post("/v1/chats/term:slow/compact"))
                await fake.wait_requests(1)
                await wait_until(lambda: _any(acked), timeout=20, what="writes flowing")
                served.proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(served.proc.wait, 30)
                stop_sending.set()
                await asyncio.gather(*writers)
                r = await compact
        finally:
            served.stop_quietly()
        assert code == 0, served.log.read_text()[-3000:]
        assert r.status_code == 200 and r.json()["compactions"] == 1  # the in-flight request finished
        assert sum(len(v) for v in acked.values()) > 0
    # Every WAL was checkpointed into its database on the way out.
    wal = [p for p in data.rglob("*-wal") if p.stat().st_size > 0]
    assert wal == [], wal
    for chat in acked:
        a = audit(data, chat)
        assert a.integrity == "ok"
        # exactly what was acknowledged: graceful shutdown leaves nothing half-done
        assert set(a.message_ids) == acked[chat], (chat, set(a.message_ids) ^ acked[chat])
        assert a.messages == a.fts_rows == len(acked[chat])
    slow = audit(data, "term:slow")
    assert len(slow.message_ids) == 10
    lines = [json.loads(line) for line in served.log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "stopped cleanly" for line in lines)
    requests = [line for line in lines if line.get("logger") == "memory_worker.access"]
    assert requests and all({"request_id", "chat", "status", "ms", "route"} <= set(line) for line in requests)
    assert TOKEN not in served.log.read_text() and "slow chat" not in served.log.read_text()


async def _any(acked: dict[str, set[str]]) -> bool:
    return sum(len(v) for v in acked.values()) >= 20


# -- the disk full ------------------------------------------------------------------------------------


async def _turn(client: httpx.AsyncClient, chat: str, mid: str, size: int = 2000) -> int:
    r = await client.post(
        f"/v1/chats/{chat}/turn", json={"text": f"{mid} " + "fill words " * (size // 11), "message_id": mid}
    )
    if r.status_code != 200:
        assert r.status_code == 507, (r.status_code, r.text)
        assert r.json()["error"].startswith("storage is full")
    return r.status_code


async def test_disk_full_page_cap_is_a_clear_507_and_recovers(tmp_path, capsys):
    data = tmp_path / "data"
    async with (
        EmbeddedMemoryHost(data, token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=10) as client,
    ):
        assert await _turn(client, "full:a", "a0") == 200
        assert await _turn(client, "full:b", "b0") == 200
        memory = host.host.store.open("full:a")
        pages = memory.sql.exec("PRAGMA page_count")[0]["page_count"]
        memory.sql.conn.execute(f"PRAGMA max_page_count = {pages + 8}")  # chat a's disk: nearly full
        acked, refused = {"a0"}, []
        for i in range(1, 60):
            status = await _turn(client, "full:a", f"a{i}")
            (acked.add(f"a{i}") if status == 200 else refused.append(f"a{i}"))
            # the other chat keeps being served throughout
            assert await _turn(client, "full:b", f"b{i}") == 200
        assert len(refused) >= 20, "the cap never filled"
        r = await client.get("/v1/chats/full:a/stats")  # reads still answer
        assert r.status_code == 200 and r.json()["total_messages"] == len(acked)
        r = await client.get("/v1/chats/full:a/search", params={"q": "fill words"})
        assert r.status_code == 200
        # space is back: the refused ones are retried with their ids, exactly once
        memory.sql.conn.execute("PRAGMA max_page_count = 1073741823")
        for mid in [*refused, "a1"]:
            assert await _turn(client, "full:a", mid) == 200
        r = await client.get("/v1/chats/full:a/stats")
        assert r.json()["total_messages"] == 60
    a, b = audit(data, "full:a"), audit(data, "full:b")
    assert a.integrity == b.integrity == "ok"
    assert set(a.message_ids) == {f"a{i}" for i in range(60)} and set(a.message_ids.values()) == {1}
    assert a.messages == a.fts_rows == 60 and b.messages == b.fts_rows == 60
    with capsys.disabled():
        print(
            f"\n[faults] disk full (page cap): {len(refused)} of 59 turns answered 507, other chat 59/59 "
            f"served, all retried once space was back: 60 stored, 0 lost, 0 doubled, integrity ok"
        )


async def test_disk_full_cap_for_every_chat_via_the_store_hook(tmp_path):
    data = tmp_path / "data"
    async with (
        EmbeddedMemoryHost(data, token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=10) as client,
    ):
        assert await _turn(client, "cap:a", "a0") == 200
        host.host.store.limit_pages(1)  # below any database's size: no new page anywhere
        assert await _turn(client, "cap:a", "a1", size=20_000) == 507  # (a small one fits in a page)
        assert await _turn(client, "cap:new", "n0") == 507  # a new chat cannot even be created
        r = await client.get("/v1/chats/cap:a/stats")
        assert r.status_code == 200 and r.json()["total_messages"] == 1
        host.host.store.limit_pages(None)
        assert await _turn(client, "cap:a", "a1", size=20_000) == 200
        assert await _turn(client, "cap:new", "n0") == 200
    assert audit(data, "cap:a").message_ids == {"a0": 1, "a1": 1}
    assert audit(data, "cap:new").message_ids == {"n0": 1}


def _can_mount_tmpfs(path: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir(parents=True, exist_ok=True)
    ok = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True
        ).returncode
        == 0
    )
    return ok


async def test_disk_full_on_a_real_small_filesystem(tmp_path, capsys):
    mnt = tmp_path / "small"
    if not _can_mount_tmpfs(mnt):
        pytest.skip("needs root to mount a 4 MiB tmpfs")
    served = ServedMemory(mnt / "data", TOKEN, log=tmp_path / "serve.log")
    try:
        await served.start()
        async with httpx.AsyncClient(
            base_url=served.url, headers=AUTH, trust_env=False, timeout=10
        ) as client:
            for chat in ("disk:a", "disk:b"):
                assert await _turn(client, chat, f"{chat}-0") == 200
            filler = mnt / "filler.bin"
            with open(filler, "wb") as f:  # take almost all the space that is left
                free = shutil.disk_usage(mnt).free
                f.write(b"\0" * max(0, free - 96 * 1024))
            acked = {"disk:a": {"disk:a-0"}, "disk:b": {"disk:b-0"}}
            refused = {"disk:a": [], "disk:b": []}
            for i in range(1, 200):
                chat = ("disk:a", "disk:b")[i % 2]
                mid = f"{chat}-{i}"
                status = await _turn(client, chat, mid, size=4000)
                (acked[chat].add(mid) if status == 200 else refused[chat].append(mid))
                if len(refused["disk:a"]) >= 5 and len(refused["disk:b"]) >= 5:
                    break
            assert refused["disk:a"] and refused["disk:b"], "the disk never filled"
            health = (await client.get("/health", params={"detail": "1"})).json()
            assert "storage" in health
            for chat in acked:  # reads keep working on a full disk
                r = await client.get(f"/v1/chats/{chat}/stats")
                assert r.status_code == 200 and r.json()["total_messages"] == len(acked[chat])
            filler.unlink()  # space is back
            for chat in acked:
                for mid in refused[chat]:
                    assert await _turn(client, chat, mid, size=4000) == 200
                    acked[chat].add(mid)
            assert (await client.get("/health")).json()["ok"] is True
        assert served.terminate() == 0
        for chat in acked:
            a = audit(mnt / "data", chat)
            assert a.integrity == "ok"
            assert set(a.message_ids) == acked[chat] and set(a.message_ids.values()) == {1}
            assert a.messages == a.fts_rows
        with capsys.disabled():
            n = sum(len(v) for v in refused.values())
            print(
                f"\n[faults] disk full (4 MiB tmpfs): {n} turns answered 507 in 2 chats, reads served, "
                f"{sum(len(v) for v in acked.values())} stored after retry, 0 lost, 0 doubled, integrity ok"
            )
    finally:
        served.stop_quietly()
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- the summarizer down, several chats, a restart in the middle ------------------------------------------


@pytest.mark.timeout(300)  # a few seconds when idle; room for a loaded machine
async def test_summarizer_down_100_attempts_across_a_restart_then_back(tmp_path, capsys):
    async with asyncio.timeout(240):  # a hang fails here, clearly, not at pytest's timeout
        data = tmp_path / "data"
        chats = [f"sum:{c}" for c in range(3)]
        async with FakeOpenAI(default=ServerError(503)) as fake:
            opts = dict(
                token=TOKEN,
                summary_base_url=fake.url,
                summary_model="light",
                summary_timeout_s=5,
                backoff_base_ms=1,
                backoff_max_ms=10,
            )
            async with (
                EmbeddedMemoryHost(data, **opts) as host,
                httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client,
            ):
                for i in range(30):
                    for chat in chats:
                        r = await client.post(
                            f"/v1/chats/{chat}/turn",
                            json={"text": f"{chat} note {i}", "message_id": f"m{i}"},
                        )
                        assert r.status_code == 200
                await fake.wait_requests(60, timeout=90)
                health = (await client.get("/health", params={"detail": "1"})).json()
                assert health["storage"]["pending_alarms"] == 3
            # Restarted with the summarizer still down: the persisted alarms keep retrying.
            async with (
                EmbeddedMemoryHost(data, **opts) as host,
                httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client,
            ):
                await fake.wait_requests(100, timeout=90)
                for chat in chats:
                    s = (await client.get(f"/v1/chats/{chat}/stats")).json()
                    assert (s["total_messages"], s["archived_messages"]) == (30, 0)
                fake.default = Answer(text=_summary_text())

                async def all_compacted() -> bool:
                    sums = [(await client.get(f"/v1/chats/{c}/summary")).json() for c in chats]
                    return all(s["compactions"] >= 1 for s in sums)

                await wait_until(all_compacted, timeout=20, what="compaction after the summarizer came back")
                health = (await client.get("/health", params={"detail": "1"})).json()
                assert health["storage"]["pending_alarms"] == 0
        failed = sum(1 for r in fake.requests if r.action == "ServerError")
        assert failed >= 100
        with capsys.disabled():
            print(
                f"\n[faults] summarizer down: {failed} failed compactions over 3 chats and a restart, "
                f"then all compacted; 90 messages, 0 lost, 0 doubled"
            )
        for chat in chats:
            a = audit(data, chat)
            assert a.integrity == "ok" and set(a.message_ids) == {f"m{i}" for i in range(30)}
            assert set(a.message_ids.values()) == {1} and a.messages == a.fts_rows == 30


async def test_an_alarm_that_cannot_be_rescheduled_is_held_back_not_spun(tmp_path):
    """The alarm table on a full disk: a failed reschedule must not rerun the compaction at once."""
    from memory_engine.compaction.compact import SummarizerError
    from memory_worker.local.scheduler import now_ms

    calls = 0

    async def down(previous, messages):
        nonlocal calls
        calls += 1
        raise SummarizerError("down")

    async with EmbeddedMemoryHost(
        tmp_path / "data", token=TOKEN, summarizer=down, backoff_base_ms=10**6, backoff_max_ms=10**6
    ) as host:
        real_set = host.host.alarms.set

        def full_disk_set(chat_key, due_ms, keep_earlier=False):
            if due_ms > now_ms() + 1000:  # a reschedule, not the first alarm
                raise sqlite3.OperationalError("database or disk is full")
            return real_set(chat_key, due_ms, keep_earlier)

        host.host.alarms.set = full_disk_set
        async with httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client:
            for i in range(26):
                r = await client.post(
                    "/v1/chats/held/turn", json={"text": f"note {i}", "message_id": f"m{i}"}
                )
                assert r.status_code == 200

            async def compacted_once() -> bool:
                return calls >= 1

            await wait_until(compacted_once, timeout=20, what="the first (failed) compaction")
            for i in range(26, 56):  # each turn gives the alarm loop its chance to spin
                r = await client.post(
                    "/v1/chats/held/turn", json={"text": f"note {i}", "message_id": f"m{i}"}
                )
                assert r.status_code == 200
            assert calls == 1, f"the compaction was rerun {calls - 1} times at once"
            assert "held" in host.host.scheduler.held
            assert (await client.get("/v1/chats/held/stats")).json()["total_messages"] == 56


async def test_health_says_503_when_the_data_folder_cannot_be_written(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, trust_env=False) as client,
    ):
        assert (await client.get("/health")).json() == {"ok": True, "version": "1"}
        host.host.data_dir = tmp_path / "gone" / "data"  # as if the disk went away
        r = await client.get("/health")
        assert r.status_code == 503
        body = r.json()
        assert body["ok"] is False and body["storage"]["data_dir_writable"] is False
        assert body["storage"]["error"]
        host.host.data_dir = tmp_path / "data"
        assert (await client.get("/health")).status_code == 200
