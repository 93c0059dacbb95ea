"""Mirror of `workers/rpc.py` (workers-runtime-sdk 1.9.5): conversions and binding wrappers.

`python_from_rpc` deep-converts a JS value (`to_py`, then jsnull -> None, dicts as
`JsDict`); `python_to_rpc` sends None as JS null and callables as proxies.
`_BindingWrapper` converts arguments and results of every call on a binding (that is what
`ctx.storage` is in a Durable Object); `_EnvWrapper` wraps `env`, giving Durable Object
namespaces as `_DurableObjectNamespaceWrapper`, whose `get`/`getByName` stubs are
`_FetcherWrapper`s with an SDK `fetch`.
"""

from __future__ import annotations

import inspect
from typing import Any

from tests.fakes.workers._js import JsProxy, jsnull, to_js_value


def _python_from_rpc_default_converter(value: Any, convert: Any, cache: Any) -> Any:
    if value is jsnull:
        return None
    if not hasattr(value, "constructor"):
        return value
    name = value.constructor.name
    if name == "Response":
        from tests.fakes.workers.response import Response

        return Response(value)
    if name == "Request":
        from tests.fakes.workers.request import Request

        return Request(value)
    return value


class JsDict(dict):
    """A dict that also allows attribute access to keys (as the SDK's JsDict)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def _replace_jsnull_with_none(obj: Any) -> Any:
    if obj is jsnull:
        return None
    if isinstance(obj, dict):
        return JsDict({k: _replace_jsnull_with_none(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return [_replace_jsnull_with_none(v) for v in obj]
    return obj


def python_from_rpc(obj: Any) -> Any:
    """A JS value as Python (`to_py` with the SDK's converter, jsnull -> None)."""
    if obj is jsnull:
        return None
    if not hasattr(obj, "constructor"):
        return obj
    result = obj.to_py(default_converter=_python_from_rpc_default_converter)
    return _replace_jsnull_with_none(result)


def _replace_none_with_jsnull(value: Any) -> Any:
    if value is None:
        return jsnull
    if isinstance(value, dict):
        return {k: _replace_none_with_jsnull(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_none_with_jsnull(v) for v in value]
    return value


# Every callable the SDK proxied to JS: `create_proxy` proxies are never destroyed there,
# so whatever they reference lives as long as the isolate (tests look at this list).
PROXIED_CALLABLES: list[Any] = []


def python_to_rpc(value: Any) -> Any:
    """A Python value as JS: None -> null, SDK objects -> their JS object, callables proxied."""
    if value is None:
        return jsnull
    if isinstance(value, _BindingWrapper):
        return value._binding
    value = _replace_none_with_jsnull(value)
    if isinstance(value, (tuple, bytearray)):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")
    if hasattr(value, "js_object"):
        return value.js_object
    if callable(value):
        PROXIED_CALLABLES.append(value)  # create_proxy(value), never destroyed
        return value
    return to_js_value(value)


def _idempotent_new(cls: type, obj: Any) -> Any:
    if isinstance(obj, cls):
        return obj
    return object.__new__(cls)


class _BindingWrapper:
    """Wraps a JS binding: every call converts its arguments and its (awaited) result."""

    __new__ = _idempotent_new

    def __init__(self, binding: Any):
        if binding is self:
            return
        self._binding = binding

    def _wrap_js_value(self, value: Any) -> Any:
        if not isinstance(value, JsProxy):
            return value
        if value.constructor.name in ("Headers", "ArrayBuffer", "Response", "ReadableStream"):
            return value
        return self.__class__(value)

    def _convert_result(self, result: Any) -> Any:
        converted = python_from_rpc(result)
        if isinstance(converted, list):
            return [self._wrap_js_value(item) for item in converted]
        return self._wrap_js_value(converted)

    @staticmethod
    def _convert_args(args: tuple, kwargs: dict) -> tuple[list, dict]:
        return [python_to_rpc(a) for a in args], {k: python_to_rpc(v) for k, v in kwargs.items()}

    def _conver_and_invoke(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        js_args, js_kwargs = self._convert_args(args, kwargs)
        result = fn(*js_args, **js_kwargs)
        if hasattr(result, "then") and callable(result.then):

            async def await_and_convert() -> Any:
                return self._convert_result(await result)

            return await_and_convert()
        return self._convert_result(result)

    def _getattr_helper(self, name: str) -> Any:
        attr = getattr(self._binding, name)
        if not callable(attr):
            return self._convert_result(attr)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self._conver_and_invoke(attr, args, kwargs)

        return wrapper

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        result = self._getattr_helper(name)
        setattr(self, name, result)
        return result

    def __iter__(self):
        for item in self._binding:
            yield self._convert_result(item)


class _FetcherWrapper(_BindingWrapper):
    """A stub or service binding: `fetch` goes through the SDK's `fetch`."""

    def fetch(self, *args: Any, **kwargs: Any) -> Any:
        """Send a request to the bound object; an SDK Response."""
        from tests.fakes.workers.fetch import fetch

        return fetch(*args, fetcher=self._binding.fetch, **kwargs)


class _DurableObjectNamespaceWrapper:
    """`env.CHAT_MEMORY`: `get`/`getByName` give fetcher-wrapped stubs."""

    def __init__(self, binding: Any):
        self._binding = binding

    def __getattr__(self, name: str) -> Any:
        return getattr(self._binding, name)

    def get(self, *args: Any, **kwargs: Any) -> _FetcherWrapper:
        """The stub of an object by id."""
        return _FetcherWrapper(self._binding.get(*args, **kwargs))

    def getByName(self, *args: Any, **kwargs: Any) -> _FetcherWrapper:
        """The stub of the object named so."""
        return _FetcherWrapper(self._binding.getByName(*args, **kwargs))


class _EnvWrapper:
    """`self.env`: namespaces wrapped, plain vars and secrets passed through."""

    __new__ = _idempotent_new

    def __init__(self, env: Any):
        if env is self:
            return
        self._env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        binding = getattr(self._env, name)
        if getattr(getattr(binding, "constructor", None), "name", None) == "DurableObjectNamespace":
            binding = _DurableObjectNamespaceWrapper(binding)
        setattr(self, name, binding)
        return binding
