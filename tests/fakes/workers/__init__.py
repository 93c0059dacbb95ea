"""A faithful fake of Cloudflare's `workers` module (workers-runtime-sdk 1.9.5) for CPython.

The real module imports `js` and `pyodide` and cannot load outside a Python Worker, so
`memory_worker/src/entry.py` is tested under this fake. It is installed into
`sys.modules` only inside a test (`installed()` / the `fake_workers` fixture), never
globally. Which real file each piece mirrors:

- `entrypoints.py` mirrors `workers/entrypoints.py`:
  DurableObject, WorkerEntrypoint, DurableObjectContext, handler, the `__init__` wrapping
- `rpc.py` mirrors `workers/rpc.py`:
  python_from_rpc/python_to_rpc, JsDict, _BindingWrapper, _FetcherWrapper,
  _DurableObjectNamespaceWrapper, _EnvWrapper
- `request.py` mirrors `workers/request.py`, `workers/utils.py` (headers):
  Request, HTTPMessageMapping
- `response.py` mirrors `workers/response.py` (+ `pyodide.http.FetchResponse`):
  Response, FetchResponse
- `fetch.py` mirrors `workers/fetch.py` (+ `pyodide.http.pyfetch`):
  fetch (real HTTP via httpx)
- `_js.py` mirrors `pyodide.ffi` and the JS objects:
  JsProxy, jsnull, JsException, Headers/Request/Response/ArrayBuffer/Promise
- `sql.py` and `runtime.py` mirror workerd itself (no SDK file): `sql.py` the
  SqlStorage on sqlite3 (cursor, authorizer, bindings); `runtime.py` transactionSync,
  alarms, namespace, `FakeWorkerd` harness
- `real_sdk.py` mirrors `js`, `pyodide.ffi`, `pyodide.http`, `_cloudflare_compat_flags`,
  `_pyodide_entrypoint_helper`:
  lets the REAL SDK run over `_js.py` + `sql.py` + `runtime.py` (tests: backend "worker-sdk")

Same names, same sync/async-ness as the real API: `sql.exec` and `transactionSync` are
synchronous; `setAlarm`/`getAlarm`/`deleteAlarm` return promises; `Request.bytes()`,
`Response.text()` and `fetch` are coroutines; `request.method` is an `HTTPMethod`.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fakes.workers import _js, entrypoints
from tests.fakes.workers.entrypoints import DurableObject, WorkerEntrypoint, handler
from tests.fakes.workers.fetch import fetch
from tests.fakes.workers.request import Request
from tests.fakes.workers.response import FetchResponse, Response
from tests.fakes.workers.rpc import python_from_rpc, python_to_rpc
from tests.fakes.workers.runtime import FakeWorkerd

__all__ = [
    "DurableObject",
    "FakeWorkerd",
    "FetchResponse",
    "Request",
    "Response",
    "WorkerEntrypoint",
    "fetch",
    "handler",
    "installed",
    "load_entry",
    "python_from_rpc",
    "python_to_rpc",
]

ENTRY = Path(__file__).resolve().parents[3] / "memory_worker" / "src" / "entry.py"


def _pyodide_modules() -> dict[str, types.ModuleType]:
    pyodide = types.ModuleType("pyodide")
    ffi = types.ModuleType("pyodide.ffi")
    ffi.jsnull = _js.jsnull
    ffi.JsProxy = _js.JsProxy
    ffi.JsException = _js.JsException
    ffi.to_js = _js.to_js_value
    ffi.create_proxy = lambda fn: fn
    pyodide.ffi = ffi
    pyodide.__version__ = "0.28.2"
    js = types.ModuleType("js")  # the JS globals entry.py uses
    js.Array = types.SimpleNamespace(from_=_js.array_from)
    js.Response = types.SimpleNamespace(new=_js.JsResponse.new)
    return {"pyodide": pyodide, "pyodide.ffi": ffi, "js": js}


@contextmanager
def installed(wrap_storage: bool = True) -> Iterator[types.ModuleType]:
    """Install this fake as `workers` (and a minimal `pyodide.ffi`); undone on exit."""
    names = ["workers", "pyodide", "pyodide.ffi", "js", "entry"]
    saved = {n: sys.modules.get(n) for n in names}
    previous_wrap = entrypoints.WRAP_STORAGE
    entrypoints.WRAP_STORAGE = wrap_storage
    sys.modules["workers"] = sys.modules[__name__]
    sys.modules.update(_pyodide_modules())
    try:
        yield sys.modules[__name__]
    finally:
        entrypoints.WRAP_STORAGE = previous_wrap
        for n, mod in saved.items():
            if mod is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = mod


def load_entry(path: Path = ENTRY) -> Any:
    """Import `entry.py` afresh as the module `entry` (call inside `installed()`)."""
    spec = importlib.util.spec_from_file_location("entry", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["entry"] = module
    spec.loader.exec_module(module)
    # Its sibling deployed beside it (the dashboard's shell imports `entry`): afresh too.
    shell = importlib.util.spec_from_file_location("dashboard_shell", path.with_name("dashboard_shell.py"))
    if shell is not None and shell.loader is not None and path.with_name("dashboard_shell.py").exists():
        sys.modules["dashboard_shell"] = importlib.util.module_from_spec(shell)
        shell.loader.exec_module(sys.modules["dashboard_shell"])
    return module
