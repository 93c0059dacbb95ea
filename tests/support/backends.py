"""The memory worker behind one small client interface, for contract tests.

`call(method, path, json=..., body=..., headers=..., token=...) -> (status, json)` works
the same against:

- `LocalBackend`: the local host (`EmbeddedMemoryHost`) over real HTTP on 127.0.0.1;
- `WorkerBackend`: `memory_worker/src/entry.py`'s `Default.fetch` under the fake
  `workers` module (`tests/fakes/workers`), Durable Objects and all. Any exception the
  Worker or an object lets escape fails the call (the runtime would answer 500).
  With `real_sdk=True` the genuine workers-runtime-sdk code runs instead of the mirror,
  over the same fake JS layer and runtime (skipped when the SDK is not available).
- `PyodideBackend`: the same `entry.py` and the real SDK on real Pyodide under Node 22
  (`memory_worker/pyodide/`), over real HTTP. One host serves the whole test session
  (the `pyodide_host` fixture); each test starts from an empty data folder (`reset`),
  and any error the Worker or an object let escape fails the test when it closes.
"""

from __future__ import annotations

import contextlib
import json as jsonlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from memory_worker.local import EmbeddedMemoryHost
from memory_worker.pyodide_runtime import PyodideHost
from tests.fakes import workers as fake_workers
from tests.fakes.workers.real_sdk import installed_real_sdk, sdk_dir
from tests.support.core import MsClock
from tests.support.openapi import check_answer

TOKEN = "contract-test-token-0123456789"
WORKER_ORIGIN = "https://chatbot-memory.example.workers.dev"


def _encode(json: Any, body: bytes | str | None) -> bytes | None:
    if body is not None:
        return body.encode("utf-8") if isinstance(body, str) else body
    if json is not None:
        return jsonlib.dumps(json, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return None


def _decode(data: bytes) -> Any:
    try:
        return jsonlib.loads(data.decode("utf-8"))
    except ValueError:
        return None


class Backend:
    """What every backend offers: `call`, and shortcuts for the common routes."""

    name = "?"
    token = TOKEN
    check_answers = True  # every answer is checked against the OpenAPI document

    async def raw(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """Send one request; (status, body bytes)."""
        raise NotImplementedError

    async def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        body: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = "",
    ) -> tuple[int, Any]:
        """One request: token "" means the right one, None none at all; (status, parsed JSON)."""
        sent = dict(headers or {})
        if token is not None:
            sent.setdefault("authorization", f"Bearer {token or self.token}")
        data = _encode(json, body)
        if data is not None:
            sent.setdefault("content-type", "application/json")
        status, raw = await self.raw(method, path, data, sent)
        answer = _decode(raw)
        if self.check_answers:
            check_answer(method, path, status, answer)
        return status, answer

    async def ok(self, method: str, path: str, json: Any = None, **kw: Any) -> Any:
        """A call that must answer 200; its JSON."""
        status, data = await self.call(method, path, json, **kw)
        assert status == 200, (method, path, status, data)
        return data

    async def turn(self, chat: str, text: str, **fields: Any) -> dict[str, Any]:
        """POST /turn."""
        return await self.ok("POST", f"/v1/chats/{chat}/turn", dict(fields, text=text))

    async def search(self, chat: str, q: str, k: int = 3) -> list[dict[str, Any]]:
        """GET /search; the results."""
        params = httpx.QueryParams({"q": q, "k": str(k)})
        return (await self.ok("GET", f"/v1/chats/{chat}/search?{params}"))["results"]

    async def stats(self, chat: str) -> dict[str, Any]:
        """GET /stats."""
        return await self.ok("GET", f"/v1/chats/{chat}/stats")

    async def close(self) -> None:
        """Stop the backend."""


class _HttpBackend(Backend):
    """A backend reached over real HTTP on 127.0.0.1 through one httpx client."""

    http: httpx.AsyncClient | None = None

    def _open_client(self, url: str, timeout: float) -> None:
        self.http = httpx.AsyncClient(
            base_url=url, trust_env=False, timeout=timeout, limits=httpx.Limits(max_connections=100)
        )

    async def raw(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        assert self.http is not None
        resp = await self.http.request(method, path, content=body, headers=headers)
        return resp.status_code, resp.content

    async def close(self) -> None:
        if self.http is not None:
            await self.http.aclose()


class LocalBackend(_HttpBackend):
    """The local host over real HTTP."""

    name = "local"

    def __init__(self, data_dir: Path, **host_options: Any):
        self.data_dir = data_dir
        self.host_options = host_options
        self.host: EmbeddedMemoryHost | None = None

    async def start(self) -> LocalBackend:
        """Start the host and the client."""
        self.host = EmbeddedMemoryHost(self.data_dir, token=TOKEN, **self.host_options)
        await self.host.__aenter__()
        self._open_client(self.host.url, timeout=30)
        return self

    async def close(self) -> None:
        await super().close()
        if self.host is not None:
            await self.host.__aexit__(None, None, None)


async def local_memory(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    """A started LocalBackend on `tmp_path / "memory"`, closed afterwards (a fixture's body:
    `mem = pytest.fixture(local_memory, name="mem")`)."""
    backend = await LocalBackend(tmp_path / "memory").start()
    try:
        yield backend
    finally:
        await backend.close()


@contextlib.asynccontextmanager
async def clocked_worker(
    data_dir: Path, summary_url: str, now_ms: int = 1_800_000_000_000
) -> AsyncIterator[tuple[WorkerBackend, MsClock]]:
    """A started WorkerBackend whose summarizer is at `summary_url` and whose clock (entry.now_ms)
    is an MsClock the test moves (entry.py is imported afresh per Worker); closed afterwards."""
    w = await WorkerBackend(data_dir, vars={"SUMMARY_BASE_URL": summary_url}).start()
    clock = MsClock(now_ms)
    w.entry.now_ms = clock
    try:
        yield w, clock
    finally:
        await w.close()


class WorkerBackend(Backend):
    """entry.py under the fake workers module (installed only while this backend lives)."""

    def __init__(
        self,
        data_dir: Path,
        wrap_storage: bool = True,
        vars: dict[str, str] | None = None,
        wrap_requests: bool = False,
        real_sdk: bool = False,
    ):
        self.name = "worker-sdk" if real_sdk else "worker" if wrap_storage else "worker-raw"
        self.real_sdk = real_sdk
        self.data_dir = data_dir
        self.wrap_storage = wrap_storage
        self.vars = {"MEMORY_API_TOKEN": TOKEN, **(vars or {})}
        self.wrap_requests = wrap_requests
        self._installed: Any = None
        self.entry: Any = None
        self.runtime: fake_workers.FakeWorkerd | None = None

    async def start(self) -> WorkerBackend:
        """Install the fake, import entry.py, start the fake runtime."""
        if self.real_sdk:
            path = sdk_dir()
            assert path is not None, "workers-runtime-sdk not found (set WORKERS_SDK_DIR)"
            self._installed = installed_real_sdk(path)
        else:
            self._installed = fake_workers.installed(wrap_storage=self.wrap_storage)
        self._installed.__enter__()
        self.entry = fake_workers.load_entry()
        self.runtime = fake_workers.FakeWorkerd(
            self.entry, self.data_dir, vars=self.vars, wrap_requests=self.wrap_requests
        )
        return self

    async def raw(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        assert self.runtime is not None
        status, _, data = await self.runtime.fetch(method, WORKER_ORIGIN + path, headers, body)
        assert not self.runtime.errors, self.runtime.errors[-1]
        return status, data

    async def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
        if self._installed is not None:
            self._installed.__exit__(None, None, None)


class PyodideBackend(_HttpBackend):
    """entry.py on real Pyodide: a running `PyodideHost` (shared), emptied for this test."""

    name = "pyodide"

    def __init__(self, host: PyodideHost):
        self.host = host

    async def start(self) -> PyodideBackend:
        """Empty the host's data and open a client."""
        answer = self.host.control("reset")
        assert answer.get("ok") == "reset", answer
        self._open_client(self.host.url, timeout=60)
        return self

    async def close(self) -> None:
        await super().close()
        # What the runtime would have answered with a 500 or logged from an alarm.
        errors = self.host.control("errors")["errors"]
        assert not errors, errors[-1]


def backend_options(request: Any, kind: str) -> dict[str, Any]:
    """What `start_backend` needs for `kind`: the session's one Pyodide host (tests/conftest.py)."""
    return {"host": request.getfixturevalue("pyodide_host")} if kind == "pyodide" else {}


@contextlib.asynccontextmanager
async def backend_for(request: Any, data_dir: Path) -> AsyncIterator[Backend]:
    """The started backend a parametrized fixture's `request.param` names, closed afterwards."""
    backend = await start_backend(request.param, data_dir, **backend_options(request, request.param))
    try:
        yield backend
    finally:
        await backend.close()


async def start_backend(kind: str, data_dir: Path, **options: Any) -> Backend:
    """A started backend: "local", "worker" (the SDK mirror), "worker-raw" (bare JS
    proxies for storage), "worker-sdk" (the real SDK code) or "pyodide" (the real
    runtime; `host=` the session's PyodideHost)."""
    if kind == "local":
        return await LocalBackend(data_dir, **options).start()
    if kind == "pyodide":
        return await PyodideBackend(options["host"]).start()
    return await WorkerBackend(
        data_dir, wrap_storage=(kind != "worker-raw"), real_sdk=(kind == "worker-sdk"), **options
    ).start()
