"""The local host's own duties: the engine's operation table, one retention setting, compaction
off the event loop (a child process), and forgotten words overwritten in the database file."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from bot.chat.logs import JsonFormatter
from memory_engine import Operation, Request, parse
from memory_engine.api.http_types import Response
from memory_engine.api.operations import OPERATIONS, kind, names
from memory_engine.compaction.compact import SummarizerError, offline_summary
from memory_engine.settings import retention_setting
from memory_worker.local import EmbeddedMemoryHost, JsonLogFormatter, SqliteStorage, server
from memory_worker.local.cli import settings_from_env
from memory_worker.local.offline import OfflineSummarizer
from tests.support import WorkerBackend, wait_until

TOKEN = "local-host-token-5f1c9a"
AUTH = {"authorization": f"Bearer {TOKEN}"}
WORD = b"Zorblaxium"

# Every route of the contract, the agreed additions included (those not built yet answer 404).
CONTRACT_CALLS = [
    ("POST", "/turn", {"text": "hi"}),
    ("POST", "/reply", {"text": "hi", "tier": "t", "model": "m"}),
    ("GET", "/search?q=hi", None),
    ("GET", "/facts", None),
    ("GET", "/summary", None),
    ("GET", "/usage", None),
    ("GET", "/stats", None),
    ("GET", "/settings", None),
    ("PUT", "/settings", {"mode": "full"}),
    ("POST", "/compact", None),
    ("POST", "/import", {"messages": [{"text": "hi"}]}),
    ("DELETE", "/authors/u1", None),
    ("DELETE", "", None),
    ("GET", "/export", None),
    ("POST", "/topic", {}),
    ("POST", "/notes", {"text": "remember this", "author": "A", "author_id": "a"}),
    ("DELETE", "/facts/1", None),
]


def test_every_routed_operation_is_named_in_the_engine_table():
    routed = []
    for method, suffix, body in CONTRACT_CALLS:
        path, _, query = suffix.partition("?")
        raw = b"" if body is None else json.dumps(body).encode()
        op = parse(Request(method, f"/v1/chats/c1{path}", query, AUTH, raw), TOKEN)
        if isinstance(op, Operation):
            routed.append(op.name)
            assert op.name in OPERATIONS, f"add {op.name!r} to memory_engine/api/operations.py"
    assert {"turn", "reply", "import", "forget_author", "forget_chat", "compact"} <= set(routed)


def test_operation_kinds_are_consistent():
    assert names(lambda k: k.grows) == {"turn", "reply", "import", "forget_author"}
    assert names(lambda k: k.forgets) == {"forget_author", "forget_chat"}
    for name, k in OPERATIONS.items():
        assert not (k.read_only and (k.grows or k.forgets or k.erases_chat)), name
        assert not k.erases_chat or k.forgets, name
    assert kind("not-a-route-yet") == kind("update_settings")  # unlisted: a plain write


# -- one name for the retention setting ---------------------------------------------------------


def test_retention_has_one_name_and_the_old_one_is_deprecated(caplog):
    assert settings_from_env({"RETENTION_MESSAGES": "120"}).retention == 120
    with pytest.warns(DeprecationWarning, match="MEMORY_RETENTION_MESSAGES is deprecated: use RETENTION_"):
        assert settings_from_env({"MEMORY_RETENTION_MESSAGES": "70"}).retention == 70
    with pytest.warns(DeprecationWarning, match="ignored"):
        both = settings_from_env({"RETENTION_MESSAGES": "120", "MEMORY_RETENTION_MESSAGES": "70"})
    assert both.retention == 120
    assert settings_from_env({}).retention is None
    caplog.set_level(logging.WARNING, logger="memory_worker")
    assert settings_from_env({"RETENTION_MESSAGES": "lots"}).retention is None
    assert "not a whole number" in caplog.text
    assert retention_setting({"RETENTION_MESSAGES": " 9 "}.get) == (9, [])
    assert retention_setting({"RETENTION_MESSAGES": "²"}.get)[0] is None  # a digit to isdigit(), not to int()


async def test_the_worker_reads_the_same_name(tmp_path, caplog):
    for vars, expected in (({"RETENTION_MESSAGES": "60"}, 60), ({"MEMORY_RETENTION_MESSAGES": "61"}, 61)):
        backend = await WorkerBackend(tmp_path / str(expected), vars=vars).start()
        try:
            await backend.turn("c1", "hello")
            assert backend.runtime is not None
            runtime = backend.runtime
            # The chat's object (the directory object heard of the turn too).
            (instance,) = [i for k, i in runtime.instances.items() if runtime.names.get(k) == "c1"]
            assert instance.memory().retention == expected
        finally:
            await backend.close()
    assert "MEMORY_RETENTION_MESSAGES is deprecated" in caplog.text


# -- the bot's log format ------------------------------------------------------------------------


def test_host_log_lines_have_the_bot_field_names():
    record = logging.LogRecord("memory_worker.local", logging.INFO, __file__, 1, "serving %s", ("x",), None)
    bot_line = json.loads(JsonFormatter().format(record))
    host_line = json.loads(JsonLogFormatter().format(record))
    assert host_line == bot_line and set(host_line) == {"ts", "level", "logger", "msg"}
    assert host_line["level"] == "info" and host_line["ts"].endswith("Z")
    setattr(record, "fields", {"chat": "c1", "request_id": "r1", "status": 200})  # noqa: B010
    assert json.loads(JsonLogFormatter().format(record))["chat"] == "c1"


# -- compaction off the event loop --------------------------------------------------------------


def _held_summary(flags: str, previous: str, messages: list[dict]) -> str:
    """In the summarizer's child process: say so, wait for the test's release, then summarize."""
    Path(flags, "started").write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not Path(flags, "release").exists():  # another process: a file is the signal it can see
        assert time.monotonic() < deadline, "the test never released the summarizer"
        time.sleep(0.01)
    return offline_summary(previous, messages)


def _die(previous: str, messages: list[dict]) -> str:
    os._exit(3)


async def test_a_backlog_is_summarized_in_a_child_process_while_every_chat_is_served(tmp_path):
    flags = tmp_path / "flags"
    flags.mkdir()
    summarizer = OfflineSummarizer(fn=functools.partial(_held_summary, str(flags)), inline_max_chars=0)
    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN, summarizer=summarizer) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False, timeout=10) as client,
    ):
        backlog = [{"text": f"backlog {i} about sailing", "message_id": f"b{i}"} for i in range(60)]
        r = await client.post("/v1/chats/busy/import", json={"messages": backlog})
        assert r.status_code == 200
        # An import archives all but its tail; the next message makes the compaction due.
        assert (await client.post("/v1/chats/busy/turn", json={"text": "and now?"})).status_code == 200
        await wait_until((flags / "started").exists, timeout=60, what="the summarizer's child process")
        try:
            # A summarizer held on the event loop would hang these: they are answered while it runs.
            for chat in ("other", "busy"):
                r = await client.post(f"/v1/chats/{chat}/turn", json={"text": "still there?"})
                assert r.status_code == 200
            assert (await client.get("/v1/chats/busy/summary")).json()["compactions"] == 0
        finally:
            (flags / "release").write_text("go")

        async def compacted() -> bool:
            return (await client.get("/v1/chats/busy/summary")).json()["compactions"] >= 1

        await wait_until(compacted, timeout=30, what="the released compaction")
    assert int((flags / "started").read_text()) != os.getpid()


async def test_the_offline_summarizer_inline_and_after_its_child_died():
    rows = [{"role": "user", "author": "Ann", "text": "I live in Rome.", "ts": "t"}]
    assert await OfflineSummarizer()("", rows) == offline_summary("", rows)  # small: inline
    dying = OfflineSummarizer(fn=_die, inline_max_chars=0)
    try:
        with pytest.raises(SummarizerError, match="process died"):
            await dying("", rows)
        dying.fn = offline_summary  # the next call starts a fresh child
        assert await dying("", rows) == offline_summary("", rows)
    finally:
        dying.close()


# -- forgotten words leave the file ------------------------------------------------------------


@pytest.mark.parametrize("secure", [True, False])
def test_deleted_rows_are_overwritten_in_the_file(tmp_path, secure):
    """secure_delete: a deleted row's bytes are zeroed, not left in a free page (False: the control)."""
    path = tmp_path / "chat.sqlite3"
    storage = SqliteStorage(path)
    if not secure:
        storage.conn.execute("PRAGMA secure_delete = OFF")
    storage.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT)")
    for i in range(50):
        storage.exec(
            "INSERT INTO t(text) VALUES (?)", f"row {i} " + ("Zorblaxium" if i % 7 == 0 else "filler")
        )
    storage.exec("DELETE FROM t WHERE text LIKE '%Zorblaxium%'")
    storage.close()  # checkpoints the WAL into the file
    assert (path.read_bytes().count(WORD) == 0) is secure


def _fts_residue(path: Path) -> int:
    """How often the indexed (lower-case) term is in the full-text index's segments."""
    conn = sqlite3.connect(path)
    try:
        return sum(
            bytes(b).count(WORD.lower()) for (b,) in conn.execute("SELECT block FROM messages_fts_data")
        )
    finally:
        conn.close()


async def test_a_forgotten_persons_words_are_overwritten_in_the_file_and_the_wal(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path / "data", token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, headers=AUTH, trust_env=False) as client,
    ):
        for i in range(30):
            who = ("Marta", "m") if i % 3 == 0 else ("Bob", "b")
            text = f"my dog Zorblaxium chewed rope {i}" if who[1] == "m" else f"weather note {i}"
            r = await client.post(
                "/v1/chats/g/turn", json={"text": text, "author": who[0], "author_id": who[1]}
            )
            assert r.status_code == 200
        path = host.host.store.path_for("g")
        wal = Path(str(path) + "-wal")
        assert WORD in path.read_bytes() + wal.read_bytes()  # the words were written
        assert (await client.delete("/v1/chats/g/authors/m")).status_code == 200
        # Read while the host still has the chat open: the forget emptied the WAL itself.
        assert not wal.exists() or WORD.lower() not in wal.read_bytes().lower()
        raw = path.read_bytes()
        found = (await client.get("/v1/chats/g/search", params={"q": "Zorblaxium"})).json()
        assert found["results"] == []
    # Their text is in no row and no free page (the host's part: secure_delete, the WAL
    # emptied), and the index's lower-case terms are not in its segments either (the
    # engine's part: it merges them, 'optimize', in the Durable Object too).
    assert raw.count(WORD) == 0
    assert _fts_residue(path) == 0 and raw.lower().count(WORD.lower()) == 0


# -- the start: /health first, the engine after, nothing of the bot --------------------------------

# What `chatbot memory serve` never loads: the bot, its HTTP clients and platforms, the settings
# reader, the OpenAPI tools (a crash under load costs clients the whole start).
NOT_IN_THE_HOST = (
    "bot.chat",
    "bot.adapters",
    "bot.app",
    "bot.config",
    "httpx",
    "openai",
    "telegram",
    "discord",
    "dotenv",
    "tomllib",
    "openapi_core",
    "jsonschema",
    "memory_engine.api.openapi",
)


async def test_memory_serve_loads_nothing_of_the_bot(tmp_path):
    # The process prints the modules it loaded as it exits, after it answered /health and a turn.
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('MODULES', *sorted(sys.modules), flush=True))\n"
        "from bot.cli import main\n"
        f"sys.exit(main(['memory', 'serve', '--port', '0', '--data', {str(tmp_path / 'memory')!r}]))\n"
    )
    env = dict(os.environ, MEMORY_API_TOKEN=TOKEN)
    env.pop("SUMMARY_BASE_URL", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            first = (await proc.stdout.readline()).decode()
        url = first.rsplit(" on ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:"), first
        async with httpx.AsyncClient(base_url=url, headers=AUTH, trust_env=False, timeout=30) as client:
            assert (await client.get("/health")).status_code == 200
            turn = await client.post("/v1/chats/c1/turn", json={"text": "I live in Porto", "author": "u"})
            assert turn.status_code == 200, turn.text
        proc.terminate()
        async with asyncio.timeout(30):
            out = (await proc.stdout.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    # A clean exit on SIGTERM shows as the atexit line below. Its status is not asserted: in a
    # long test process asyncio's child watcher reports 255 when another waiter reaped the
    # child first (seen once in CI: "Unknown child process pid"; pids recycle at 32768 here).
    exits = [line for line in out.splitlines() if line.startswith("MODULES ")]
    assert exits, f"no clean exit (status {proc.returncode})"
    modules = exits[0].split()[1:]
    assert "memory_engine.engine" in modules  # the turn ran on the engine, loaded after the start
    loaded = [m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IN_THE_HOST)]
    assert loaded == []
    assert [m for m in modules if m.startswith("bot.")] == ["bot.cli"]


async def test_health_answers_while_the_engine_loads_and_api_requests_wait_for_it(tmp_path, monkeypatch):
    release = threading.Event()
    real_load = server.load_engine

    def held_load() -> None:  # the engine's import, held until the test lets it go
        assert release.wait(30)
        real_load()

    monkeypatch.setattr(server, "load_engine", held_load)
    embedded = EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN)
    entering = asyncio.create_task(embedded.__aenter__())
    try:
        await wait_until(lambda: embedded.url or entering.done(), what="the host listening")
        client = httpx.AsyncClient(base_url=embedded.url, headers=AUTH, trust_env=False, timeout=30)
        async with client:
            health = await client.get("/health")
            assert health.status_code == 200 and health.json()["ok"] is True
            turn = asyncio.create_task(client.post("/v1/chats/c1/turn", json={"text": "hi", "author": "u"}))
            assert embedded.host is not None
            await wait_until(lambda: embedded.host.in_flight == 1, what="the turn waiting for the engine")
            assert not turn.done() and not entering.done()
            release.set()
            assert (await turn).status_code == 200
            assert await entering is embedded
    finally:
        release.set()
        if not entering.done():
            await entering
        await embedded.__aexit__(None, None, None)


def test_answers_are_the_workers_json_and_what_orjson_refuses_still_is():
    payload = {"text": "é \u2028 😀", "scores": [0.5, 1e-06], "none": None, "big": 2**70}
    body = server.json_body(Response(200, payload))  # an int past 64 bits: the engine's encoder
    assert json.loads(body) == payload
    del payload["big"]
    body = server.json_body(Response(200, payload))
    assert json.loads(body) == json.loads(Response(200, payload).body())
    keyed = {"per_id": {7: "a", 8: "b"}}  # keys that are not text: written as json.dumps does
    assert json.loads(server.json_body(Response(200, keyed))) == json.loads(Response(200, keyed).body())
