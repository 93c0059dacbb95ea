"""Keeps the fake `workers` module honest: the runtime behaviour entry.py relies on."""

from __future__ import annotations

import sys
from http import HTTPMethod
from typing import ClassVar

import pytest
from aiohttp import web

from tests.fakes import workers as fw
from tests.fakes.workers import real_sdk, rpc
from tests.fakes.workers._js import JsException, JsProxy, JsRequest, JsUint8Array, array_from, jsnull
from tests.fakes.workers.runtime import DurableObjectId, DurableObjectState, DurableObjectStorage
from tests.support import TcpGate


@pytest.fixture
def storage(tmp_path):
    alarms: dict[str, int] = {}
    s = DurableObjectStorage(tmp_path / "o.sqlite3", alarms, "k")
    yield s
    s._sql.close()


def test_installed_only_inside_the_context():
    assert "workers" not in sys.modules
    with fw.installed():
        import workers
        from pyodide.ffi import jsnull as imported_null

        assert workers.DurableObject is fw.DurableObject and imported_null is jsnull
    assert "workers" not in sys.modules and "pyodide.ffi" not in sys.modules


@pytest.mark.parametrize(
    "query",
    [
        "BEGIN",
        "begin transaction",
        "COMMIT",
        "END",
        "ROLLBACK",
        "SAVEPOINT s1",
        "RELEASE s1",
        "/* hidden */ BEGIN IMMEDIATE",
        "ATTACH DATABASE 'x.db' AS x",
        "PRAGMA journal_mode=DELETE",
        "SELECT load_extension('evil')",
        "CREATE TABLE _cf_mine(a)",
        "PRAGMA synchronous=OFF",
    ],
)
def test_sql_refuses_what_a_durable_object_refuses(storage, query):
    with pytest.raises(JsException):
        storage.sql.exec(query)


def test_sql_allows_fts5_json_math_and_table_info(storage):
    sql = storage.sql
    sql.exec("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    sql.exec("INSERT INTO t(rowid, body) VALUES (?, ?)", 1, "running dogs")
    row = sql.exec("SELECT rowid AS id, bm25(t) AS r FROM t WHERE t MATCH ?", '"run"').one().to_py()
    assert row["id"] == 1 and row["r"] < 0
    assert sql.exec("SELECT json_extract(?, '$.a') AS a, sqrt(16.0) AS s", '{"a": 3}').one().to_py() == {
        "a": 3,
        "s": 4,
    }
    assert sql.exec("PRAGMA table_info(t)").toArray().length >= 1


def test_rows_are_js_objects_with_pyodide_conversions(storage):
    sql = storage.sql
    sql.exec("CREATE TABLE x (i INTEGER, r REAL, t TEXT, n TEXT)")
    sql.exec("INSERT INTO x VALUES (?, ?, ?, ?)", 7, 2.0, "a\x00b", None)
    arr = sql.exec("SELECT * FROM x").toArray()
    assert isinstance(arr, JsProxy) and arr.constructor.name == "Array"
    row = arr.to_py()[0]
    assert row == {"i": 7, "r": 2, "t": "a\x00b", "n": jsnull}  # REAL 2.0 arrives as int 2
    assert type(row["r"]) is int
    assert sql.exec("SELECT * FROM x").one().n is None  # attribute access maps null to None
    raw = sql.exec("SELECT i FROM x").raw()
    assert not hasattr(raw, "toArray")  # workerd's raw() is a bare iterator
    assert array_from(raw).to_py() == [[7]]
    with pytest.raises(JsException):
        sql.exec("SELECT * FROM x WHERE 0").one()


@pytest.mark.parametrize("bad", [True, 2**60])
def test_sql_bindings_must_be_js_sql_values(storage, bad):
    with pytest.raises(JsException) as info:
        storage.sql.exec("SELECT ? AS v", bad)
    assert info.value.name == "TypeError"
    assert storage.sql.exec("SELECT ? AS v", b"\x00\x01").one().v.to_bytes() == b"\x00\x01"


def test_transaction_sync_rolls_back_and_nests(storage):
    sql = storage.sql
    sql.exec("CREATE TABLE x (v INTEGER)")

    def boom():
        sql.exec("INSERT INTO x VALUES (1)")
        storage.transactionSync(lambda: sql.exec("INSERT INTO x VALUES (2)"))
        raise ValueError("no")

    # Pyodide hands the original Python exception back through transactionSync.
    with pytest.raises(ValueError, match="no"):
        storage.transactionSync(boom)
    assert sql.exec("SELECT COUNT(*) AS n FROM x").one().n == 0
    storage.transactionSync(lambda: sql.exec("INSERT INTO x VALUES (3)"))
    assert sql.exec("SELECT COUNT(*) AS n FROM x").one().n == 1


def _ctx(storage):
    return DurableObjectState(DurableObjectId("ab" * 32, "chat"), storage, lambda: None)


@pytest.mark.parametrize("wrap", [True, False])
async def test_entry_sql_adapter_under_both_runtimes(storage, wrap):
    with fw.installed(wrap_storage=wrap):
        entry = fw.load_entry()

        class Probe(fw.DurableObject):
            pass

        obj = Probe(_ctx(storage), JsProxy("Object", {}, kind="object"))
        assert type(obj.ctx.storage).__name__ == ("_BindingWrapper" if wrap else "DurableObjectStorage")
        seen = len(rpc.PROXIED_CALLABLES)
        sql = entry.DurableObjectSql(obj.ctx.storage)
        sql.exec("CREATE TABLE x (v INTEGER, t TEXT)")
        sql.exec("INSERT INTO x VALUES (?, ?)", True, None)
        assert sql.exec("SELECT v, t FROM x") == [{"v": 1, "t": None}]

        def fail():
            sql.exec("INSERT INTO x VALUES (2, 'y')")
            sql.transaction(lambda: sql.exec("INSERT INTO x VALUES (3, 'z')"))  # joins
            raise KeyError("the engine's own error")

        with pytest.raises(KeyError):
            sql.transaction(fail)
        assert sql.exec("SELECT COUNT(*) AS n FROM x") == [{"n": 1}]
        assert sql.transaction(lambda: sql.exec("INSERT INTO x VALUES (4, 'w') RETURNING v")) == [{"v": 4}]
        # The adapter talks to the JS storage under the SDK's wrapper: the SDK proxies no
        # callable per transaction (it never frees them).
        assert rpc.PROXIED_CALLABLES[seen:] == []
        # rows(): tuples in column order, null as None, through workerd's bare raw() iterator.
        assert sql.rows("SELECT t, v FROM x ORDER BY v") == [(None, 1), ("w", 4)]
        assert sql.rows("SELECT v FROM x WHERE 0") == []
        # Alarms are promises in both runtimes.
        assert await obj.ctx.storage.getAlarm() in (None, jsnull)
        await obj.ctx.storage.setAlarm(123)
        assert await obj.ctx.storage.getAlarm() == 123
        await obj.ctx.storage.deleteAlarm()
        assert await obj.ctx.storage.getAlarm() in (None, jsnull)


async def test_alarm_retries_with_exponential_backoff(tmp_path):
    with fw.installed():

        class Flaky(fw.DurableObject):
            calls: ClassVar[list] = []  # shared across instances on purpose: counts every call

            async def fetch(self, request):
                await self.ctx.storage.setAlarm(1)
                return fw.Response("ok")

            async def alarm(self, info=None):
                Flaky.calls.append((info.retryCount, info.isRetry))
                if len(Flaky.calls) < 3:
                    raise RuntimeError("flaky")

        class Default(fw.WorkerEntrypoint):
            async def fetch(self, request):
                ns = self.env.CHAT_MEMORY
                return await ns.getByName("one").fetch(request)

        module = type(sys)("m")
        module.Default, module.ChatMemorySQLite = Default, Flaky
        rt = fw.FakeWorkerd(module, tmp_path)
        status, _, body = await rt.fetch("GET", "https://x/")
        assert (status, body) == (200, b"ok")
        assert rt.alarm_of("one") == 1
        assert await rt.run_alarms(now=0) == 0  # not due yet at t=0
        await rt.run_alarms()
        first = rt.alarm_of("one")
        await rt.run_alarms()
        second = rt.alarm_of("one")
        await rt.run_alarms()
        assert Flaky.calls == [(0, False), (1, True), (2, True)]
        assert second - first >= 1900  # 2 s, then 4 s
        assert rt.alarm_of("one") is None and rt.alarm_runs[-1] == ("one", "ok")
        rt.close()


def test_a_chunk_assigns_into_a_python_buffer_of_its_length():
    """`JsBuffer.assign_to`, as entry.py copies a body's chunks into one bytearray."""
    buffer = bytearray(b"......")
    JsUint8Array(b"abc").assign_to(memoryview(buffer)[2:5])
    assert buffer == bytearray(b"..abc.")
    with pytest.raises(ValueError):
        JsUint8Array(b"abc").assign_to(memoryview(buffer)[0:2])  # Pyodide refuses another length
    assert buffer == bytearray(b"..abc.")


async def test_request_and_response_mirror_the_sdk():
    with fw.installed():
        req = fw.Request(JsRequest("https://x/a?b=1", "POST", {"X-Thing": "1"}, b"body"))
        assert req.method is HTTPMethod.POST and req.headers["x-thing"] == "1"
        copy = req.clone()
        assert await req.bytes() == b"body" and req.body_used
        with pytest.raises(OSError):
            await req.bytes()
        assert await copy.text() == "body"
        with pytest.raises(KeyError):
            fw.Request(JsRequest("https://x/", "BREW")).method  # noqa: B018 - as the SDK does
        with pytest.raises(TypeError):
            fw.Response({"a": 1})
        resp = fw.Response.json({"a": 1}, status=201)
        assert resp.status == 201 and resp.headers["content-type"] == "application/json"
        assert await resp.json() == {"a": 1}


async def test_fetch_is_real_http_on_loopback():
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(
            {"got": (await request.read()).decode(), "auth": request.headers["authorization"]},
            status=202,
            headers={"Retry-After": "3"},
        )

    app = web.Application()
    app.router.add_post("/p", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        with fw.installed():
            resp = await fw.fetch(
                f"http://127.0.0.1:{port}/p",
                method="POST",
                headers={"authorization": "Bearer k"},
                body="hello",
            )
            assert resp.status == 202 and resp.headers["retry-after"] == "3"
            assert await resp.json() == {"got": "hello", "auth": "Bearer k"}
            # A port held by a socket that never listens: refused, and no other server can take it.
            async with TcpGate() as dead:
                with pytest.raises(OSError):
                    await fw.fetch(f"{dead.url}/p")
    finally:
        await runner.cleanup()


async def _probe(workers_mod, storage) -> list:
    """What entry.py sees of the SDK, in plain values, to compare the mirror with the real one."""

    class Probe(workers_mod.DurableObject):
        pass

    obj = Probe(_ctx(storage), JsProxy("Object", {"TOKEN": "t"}, kind="object"))
    st = obj.ctx.storage
    sql = st.sql
    sql.exec("CREATE TABLE IF NOT EXISTS x (i INTEGER, r REAL, t TEXT, n TEXT)")
    sql.exec("DELETE FROM x")
    sql.exec("INSERT INTO x VALUES (?, ?, ?, ?)", 1, 2.0, "a\u200db", None)
    rows = sql.exec("SELECT * FROM x").toArray()
    one = sql.exec("SELECT * FROM x").one()
    await st.setAlarm(5)
    alarm = await st.getAlarm()
    await st.deleteAlarm()
    req = workers_mod.Request(JsRequest("https://h/p?q=1", "PUT", {"X-A": "b"}, b"body"))
    clone = req.clone()
    resp = workers_mod.Response(b'{"a": 1}', status=201, headers={"content-type": "application/json"})
    return [
        type(obj.ctx).__name__,
        type(st).__name__,
        obj.env.TOKEN,
        [(type(r).__name__, dict(r)) for r in rows],
        (type(one).__name__, dict(one)),
        alarm,
        await st.getAlarm(),
        str(req.method),
        dict(req.headers.items()),
        req.url,
        await req.bytes(),
        await clone.text(),
        resp.status,
        dict(resp.headers.items()),
        await resp.json(),
    ]


@pytest.mark.skipif(real_sdk.sdk_dir() is None, reason="workers-runtime-sdk not available (WORKERS_SDK_DIR)")
async def test_the_mirror_behaves_like_the_real_sdk(tmp_path):
    seen = {}
    for name, install in (
        ("mirror", fw.installed),
        ("real", lambda: real_sdk.installed_real_sdk(real_sdk.sdk_dir())),
    ):
        storage = DurableObjectStorage(tmp_path / f"{name}.sqlite3", {}, "k")
        with install() as workers_mod:
            seen[name] = await _probe(workers_mod, storage)
        storage._sql.close()
    assert seen["mirror"] == seen["real"]
    assert seen["real"][3] == [("JsDict", {"i": 1, "r": 2, "t": "a\u200db", "n": None})]


async def test_a_stubs_rpc_methods_reach_the_object_with_arguments_as_workerd_converts_them(tmp_path):
    with fw.installed():
        from pyodide.ffi import to_js

        class Chat(fw.DurableObject):
            seen: ClassVar[list] = []

            async def serve(self, method, body, missing):
                Chat.seen.append((method, bytes(body), type(body).__name__, missing))
                return fw.Response(method)

            async def fetch(self, request):
                return fw.Response("fetched")

        class Default(fw.WorkerEntrypoint):
            async def fetch(self, request):
                stub = fw.python_to_rpc(self.env.CHAT_MEMORY.getByName("one"))
                assert not hasattr(stub, "then")  # a stub is not a promise
                with pytest.raises(AttributeError):
                    stub._private  # noqa: B018 - private names are no RPC methods
                with pytest.raises(JsException, match="does not implement"):
                    await stub.alarm()  # a handler is no RPC method
                return await stub.serve("POST", to_js(b"h\x00\xff"), jsnull)

        module = type(sys)("m")
        module.Default, module.ChatMemorySQLite = Default, Chat
        rt = fw.FakeWorkerd(module, tmp_path)
        status, _, body = await rt.fetch("GET", "https://x/")
    assert (status, body, rt.errors) == (200, b"POST", [])
    assert Chat.seen == [("POST", b"h\x00\xff", "memoryview", None)]
