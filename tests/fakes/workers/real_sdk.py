"""Run the REAL `workers` SDK (workers-runtime-sdk) in CPython, over a fake JS layer.

The SDK's own Python (entrypoints, rpc, request, response, fetch, utils) imports `js`,
`pyodide.ffi`, `pyodide.http`, `_cloudflare_compat_flags` and
`_pyodide_entrypoint_helper`. This module provides those few names, built on the same
JS stand-ins as the fake (`_js.py`) and driven by the same `FakeWorkerd`, so
`entry.py` can be exercised against the genuine SDK code paths, which also checks that
the hand-written mirror in this package behaves like the SDK.

The SDK is not vendored: point `WORKERS_SDK_DIR` at an unpacked wheel
(`pip download --no-deps workers-runtime-sdk -d DIR && cd DIR && unzip -o *.whl`), or
install `workers-runtime-sdk` in the venv. Without it, the tests using this are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.fakes.workers import _js
from tests.fakes.workers.fetch import _global_fetch
from tests.fakes.workers.response import FetchResponse

NAMES = (
    "js",
    "pyodide",
    "pyodide.ffi",
    "pyodide.http",
    "_cloudflare_compat_flags",
    "_pyodide_entrypoint_helper",
    "entry",
)

# Every callable the SDK handed to `create_proxy` (never destroyed by the SDK).
PROXIED: list[Any] = []


def sdk_dir() -> Path | None:
    """Where the real SDK is: $WORKERS_SDK_DIR, or the installed package; None if absent."""
    env = os.environ.get("WORKERS_SDK_DIR")
    if env and (Path(env) / "workers" / "entrypoints.py").exists():
        return Path(env)
    spec = importlib.util.find_spec("workers")
    if spec and spec.origin and (Path(spec.origin).parent / "entrypoints.py").exists():
        return Path(spec.origin).parent.parent
    return None


class _PyProxy:
    """`pyodide.ffi.create_proxy(obj)`: callable through, or a buffer for bytes."""

    def __init__(self, obj: Any):
        self._obj = obj
        self.constructor = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._obj(*args, **kwargs)

    def getBuffer(self) -> Any:
        data = _js.JsArrayBuffer(bytes(self._obj))
        return types.SimpleNamespace(data=data, release=lambda: None)

    def destroy(self) -> None:
        self._obj = None


def _create_proxy(obj: Any, **_kwargs: Any) -> _PyProxy:
    if callable(obj):
        PROXIED.append(obj)
    return _PyProxy(obj)


def _to_js(
    value: Any,
    *,
    depth: int = -1,
    pyproxies: Any = None,
    create_pyproxies: bool = True,
    dict_converter: Any = None,
    default_converter: Any = None,
) -> Any:
    if value is None or value is _js.jsnull or isinstance(value, (_js.JsProxy, _PyProxy, str, float)):
        return value
    if isinstance(value, (bool, int, bytes, bytearray, memoryview)):
        return _js.to_js_value(value)
    if isinstance(value, dict):
        items = [
            (k, _to_js(v, dict_converter=dict_converter, default_converter=default_converter))
            for k, v in value.items()
        ]
        return dict_converter(items) if dict_converter else _js.js_object(dict(items))
    if isinstance(value, (list, tuple)):
        return _js.js_array(
            [_to_js(v, dict_converter=dict_converter, default_converter=default_converter) for v in value]
        )
    if default_converter is not None:
        return default_converter(
            value, lambda x: _to_js(x, dict_converter=dict_converter, default_converter=default_converter), {}
        )
    return _create_proxy(value)


async def _pyfetch(url: Any, **kwargs: Any) -> FetchResponse:
    fetcher = kwargs.pop("fetcher", None)
    init = _to_js(kwargs, dict_converter=dict)
    try:
        js_resp = await (fetcher(url, init) if fetcher else _global_fetch(url, init))
    except _js.JsException as exc:
        raise OSError(exc.message) from None
    return FetchResponse(js_resp.url, js_resp)


def _modules() -> dict[str, types.ModuleType]:
    js = types.ModuleType("js")
    js.Object = types.SimpleNamespace(fromEntries=dict)
    js.Headers = types.SimpleNamespace(new=_js.JsHeaders)
    js.Request = types.SimpleNamespace(new=_js.JsRequest.new)
    js.Response = types.SimpleNamespace(new=_js.JsResponse.new)
    js.Array = types.SimpleNamespace(new=list, from_=_js.array_from)
    js.fetch = _global_fetch
    js.queueMicrotask = lambda callback: callback()

    pyodide = types.ModuleType("pyodide")
    pyodide.__version__ = "0.28.2"
    ffi = types.ModuleType("pyodide.ffi")
    ffi.JsProxy = _js.JsProxy
    ffi.JsException = _js.JsException
    ffi.JsBuffer = _js.JsArrayBuffer
    ffi.jsnull = _js.jsnull
    ffi.to_js = _to_js
    ffi.create_proxy = _create_proxy
    ffi.create_once_callable = _create_proxy
    ffi.destroy_proxies = lambda proxies: None
    http = types.ModuleType("pyodide.http")
    http.pyfetch = _pyfetch
    http.FetchResponse = FetchResponse
    pyodide.ffi, pyodide.http = ffi, http

    flags = types.ModuleType("_cloudflare_compat_flags")
    flags.python_workflows_implicit_dependencies = False
    flags.python_request_headers_preserve_commas = False
    helper = types.ModuleType("_pyodide_entrypoint_helper")
    helper.patchWaitUntil = lambda ctx: None
    helper.cloudflareWorkersModule = None
    helper.cloudflareSocketsModule = None
    return {
        "js": js,
        "pyodide": pyodide,
        "pyodide.ffi": ffi,
        "pyodide.http": http,
        "_cloudflare_compat_flags": flags,
        "_pyodide_entrypoint_helper": helper,
    }


@contextmanager
def installed_real_sdk(path: Path) -> Iterator[types.ModuleType]:
    """Import the real `workers` from `path` over the fake JS layer; all undone on exit."""
    names = [n for n in sys.modules if n == "workers" or n.startswith("workers.")] + list(NAMES)
    saved = {n: sys.modules.get(n) for n in names}
    for n in names:
        sys.modules.pop(n, None)
    sys.modules.update(_modules())
    sys.path.insert(0, str(path))
    try:
        import workers  # the real one, from `path`

        assert Path(workers.__file__).parent.parent == path, workers.__file__
        yield workers
    finally:
        sys.path.remove(str(path))
        for n in [n for n in sys.modules if n == "workers" or n.startswith("workers.")] + list(NAMES):
            sys.modules.pop(n, None)
        sys.modules.update({n: m for n, m in saved.items() if m is not None})
