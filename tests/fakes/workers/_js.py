"""Stand-ins for the JavaScript side of a Python Worker, as Pyodide shows it to Python.

Mirrors `pyodide.ffi` (JsProxy, JsException, jsnull, to_js, create_proxy) and the workerd
objects the `workers` SDK wraps (Headers, Request, Response, ArrayBuffer, Promise). Only
what the SDK mirror in this package and `memory_worker/src/entry.py` touch is here, with
the conversions Pyodide really applies:

- a JS number becomes a Python `int` when it is a safe integer (so a REAL 2.0 comes back
  as `2`), else a `float`;
- `to_py()` turns plain objects into dicts and arrays into lists, leaves class instances
  as proxies, and leaves JS `null` as `jsnull` (not None);
- a Python exception that crosses JS comes back as a `JsException` named `PythonError`;
- a JS promise runs as soon as it is created, awaited or not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1


class _JsNull:
    """JS `null` as Pyodide shows it: a falsy singleton distinct from None."""

    _instance: _JsNull | None = None

    def __new__(cls) -> _JsNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "jsnull"


jsnull = _JsNull()


class JsException(Exception):
    """A JS error raised into Python (`pyodide.ffi.JsException`): `name` and `message`."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class _Constructor:
    def __init__(self, name: str):
        self.name = name


def js_number(value: float | int) -> int | float:
    """A JS number as Pyodide converts it to Python: int when a safe integer, else float."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


def to_js_value(value: Any) -> Any:
    """A Python value as it arrives in JS (`pyodide.ffi.to_js` for the scalar cases)."""
    if value is None:
        return None  # Pyodide passes None as `undefined`; workerd treats it like null
    if value is jsnull:
        return jsnull
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            return JsBigInt(value)
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return JsArrayBuffer(bytes(value))
    return value


class JsBigInt(int):
    """A Python int too large for a JS number: Pyodide sends it as a BigInt."""


class JsProxy:
    """A JS value seen from Python (`pyodide.ffi.JsProxy`).

    `kind` is "object" (a plain object: `to_py()` gives a dict), "array" (a list), or
    anything else (a class instance: `to_py()` gives the proxy itself).
    """

    def __init__(
        self,
        constructor: str,
        props: dict[str, Any] | None = None,
        items: list[Any] | None = None,
        kind: str = "instance",
    ):
        object.__setattr__(self, "_props", dict(props or {}))
        object.__setattr__(self, "_items", items)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "constructor", _Constructor(constructor))

    def __getattr__(self, name: str) -> Any:
        props = object.__getattribute__(self, "_props")
        if name in props:
            value = props[name]
            # Attribute access converts null to None (only `to_py` keeps jsnull).
            return None if value is jsnull else value
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._props[name] = value

    def __iter__(self):
        if self._items is None:
            raise TypeError(f"'{self.constructor.name}' object is not iterable")
        return iter(self._items)

    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        if self._items is None:
            raise TypeError(f"'{self.constructor.name}' has no len()")
        return len(self._items)

    @property
    def length(self) -> int:
        """The JS `length` of an array."""
        return len(self._items or [])

    def to_py(self, *, depth: int = -1, default_converter: Callable | None = None) -> Any:
        """Deep-convert: plain objects to dicts, arrays to lists, others left as proxies."""
        if self._kind == "object":
            return {k: _to_py(v, default_converter) for k, v in self._props.items()}
        if self._kind == "array":
            return [_to_py(v, default_converter) for v in self._items or []]
        if default_converter is not None:
            return default_converter(self, lambda x: _to_py(x, default_converter), {})
        return self

    def __repr__(self) -> str:
        return f"[object {self.constructor.name}]"


def _to_py(value: Any, default_converter: Callable | None) -> Any:
    if isinstance(value, JsProxy):
        return value.to_py(default_converter=default_converter)
    return value


def js_object(props: dict[str, Any]) -> JsProxy:
    """A plain JS object (`{...}`)."""
    return JsProxy("Object", props, kind="object")


def js_array(items: list[Any]) -> JsProxy:
    """A JS array."""
    return JsProxy("Array", items=list(items), kind="array")


class JsIterator(JsProxy):
    """A bare JS iterator (`next()` only, no `toArray`), as workerd's `cursor.raw()` is;
    Python iterates it as Pyodide does."""

    def __init__(self, items: list[Any]):
        super().__init__("Iterator")
        object.__setattr__(self, "_rest", iter(list(items)))

    def next(self) -> JsProxy:
        """The JS iterator protocol: {done, value}."""
        for item in self._rest:
            return js_object({"done": False, "value": item})
        return js_object({"done": True})

    def __iter__(self):
        return self._rest


def array_from(iterable: JsProxy) -> JsProxy:
    """`Array.from` (Pyodide: `js.Array.from_`): drain a JS iterator into an array."""
    items = []
    while not (step := iterable.next()).done:
        items.append(step.value)
    return js_array(items)


class JsArrayBuffer(JsProxy):
    """An ArrayBuffer: `to_bytes()` copies it out."""

    def __init__(self, data: bytes):
        super().__init__("ArrayBuffer", {"byteLength": len(data)})
        object.__setattr__(self, "_data", bytes(data))

    def to_bytes(self) -> bytes:
        """The buffer's bytes."""
        return self._data

    def assign_to(self, to: Any) -> None:
        """Copy the bytes into a writable Python buffer of the same length (`JsBuffer.assign_to`)."""
        with memoryview(to) as view:
            if view.nbytes != len(self._data):
                raise ValueError(f"cannot assign {len(self._data)} bytes to a buffer of {view.nbytes}")
            view.cast("B")[:] = self._data

    def to_py(self, *, depth: int = -1, default_converter: Callable | None = None) -> Any:
        """As Pyodide converts an ArrayBuffer inside a row: a memoryview of its bytes."""
        return memoryview(self._data)


class JsPromise:
    """A settled JS promise: the work already happened when it was created."""

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self.constructor = _Constructor("Promise")
        self._value = value
        self._error = error

    def then(self, *_args: Any) -> JsPromise:
        """Present so `hasattr(x, "then")` detects a thenable, as the SDK does."""
        return self

    def __await__(self):
        if False:  # pragma: no cover - makes this a generator
            yield
        if self._error is not None:
            raise self._error
        return self._value


class JsHeaders(JsProxy):
    """The Fetch `Headers`: case-insensitive, iterates lower-case (name, value) pairs."""

    def __init__(self, init: Any = None):
        super().__init__("Headers")
        object.__setattr__(self, "_h", [])
        if isinstance(init, JsHeaders):
            pairs = list(init)
        elif isinstance(init, dict):
            pairs = list(init.items())
        else:
            pairs = list(init) if init is not None else []
        for k, v in pairs:
            self.append(k, v)

    def append(self, name: str, value: str) -> None:
        """Add a value (duplicates are combined with ", " when read)."""
        self._h.append((str(name).lower(), str(value).strip()))

    def set(self, name: str, value: str) -> None:
        """Replace every value of `name`."""
        self.delete(name)
        self.append(name, value)

    def delete(self, name: str) -> None:
        """Remove `name`."""
        object.__setattr__(self, "_h", [(k, v) for k, v in self._h if k != name.lower()])

    def get(self, name: str) -> Any:
        """The combined value, or null."""
        values = [v for k, v in self._h if k == name.lower()]
        return ", ".join(values) if values else jsnull

    def has(self, name: str) -> bool:
        """True when present."""
        return any(k == name.lower() for k, _ in self._h)

    def getSetCookie(self) -> list[str]:
        """Every Set-Cookie value."""
        return [v for k, v in self._h if k == "set-cookie"]

    def __iter__(self):
        combined: dict[str, list[str]] = {}
        for k, v in self._h:
            combined.setdefault(k, []).append(v)
        return iter(sorted((k, ", ".join(vs)) for k, vs in combined.items()))


class JsUint8Array(JsArrayBuffer):
    """A Uint8Array (a stream's chunk): `to_bytes()` copies it out."""

    def __init__(self, data: bytes):
        super().__init__(data)
        object.__setattr__(self, "constructor", _Constructor("Uint8Array"))
        self._props["length"] = len(data)


class JsReadableStream(JsProxy):
    """A body's `ReadableStream` of byte chunks, pulled one at a time.

    `getReader()` locks it; the reader's `read()` is a promise of `{done, value}` (value a
    Uint8Array) and `cancel()` drops what was not read. The chunks may come from a generator,
    so a test can offer a body far larger than memory; `pulled` counts the bytes read.
    """

    def __init__(self, chunks: Any):
        super().__init__("ReadableStream", {"locked": False})
        object.__setattr__(self, "_chunks", iter(chunks))
        object.__setattr__(self, "pulled", 0)
        object.__setattr__(self, "disturbed", False)

    def getReader(self, options: Any = None) -> JsProxy:
        """Lock the stream to one reader (`{read, cancel, releaseLock}`)."""
        if self._props["locked"]:
            raise JsException("TypeError", "ReadableStream is locked")
        self._props["locked"] = True
        return JsProxy(
            "ReadableStreamDefaultReader",
            {"read": self._read, "cancel": self.cancel, "releaseLock": self._release},
        )

    def _release(self) -> None:
        self._props["locked"] = False

    def _next(self) -> bytes | None:
        object.__setattr__(self, "disturbed", True)
        for chunk in self._chunks:
            object.__setattr__(self, "pulled", self.pulled + len(chunk))
            return bytes(chunk)
        return None

    def _read(self):
        # Reading a stream is I/O in workerd: other events may run meanwhile.
        async def step() -> JsProxy:
            await asyncio.sleep(0)
            chunk = self._next()
            if chunk is None:
                return js_object({"done": True, "value": None})
            return js_object({"done": False, "value": JsUint8Array(chunk)})

        return step()

    def cancel(self, reason: Any = None) -> JsPromise:
        """Drop every chunk not read yet."""
        object.__setattr__(self, "_chunks", iter(()))
        return JsPromise(None)

    def drain(self) -> bytes:
        """Every chunk not read yet, joined (what `arrayBuffer()` reads)."""
        parts = []
        while (chunk := self._next()) is not None:
            parts.append(chunk)
        return b"".join(parts)


class _Body:
    """The body half of Request/Response: a stream, read once, then `bodyUsed`."""

    def _init_body(self, body: Any) -> None:
        if body is None or body is jsnull:
            data = None
        elif isinstance(body, JsReadableStream):
            data = body
        elif isinstance(body, JsArrayBuffer):
            data = body.to_bytes()
        elif isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            raise JsException("TypeError", f"unsupported body type {type(body).__name__}")
        # A body given whole arrives as one chunk, as Node and workerd stream a buffer.
        stream = (
            data if isinstance(data, JsReadableStream) else None if data is None else JsReadableStream([data])
        )
        self._props["bodyUsed"] = False
        self._props["body"] = jsnull if stream is None else stream

    @property
    def _data(self) -> bytes | JsReadableStream | None:
        """The unread body, for a copy (a clone tees the stream: both halves get every chunk)."""
        stream = self._props["body"]
        if stream is jsnull:
            return None
        if stream.disturbed or stream.locked:
            raise JsException("TypeError", "Body has already been used.")
        rest = stream.drain()
        object.__setattr__(stream, "_chunks", iter([rest]))
        object.__setattr__(stream, "pulled", 0)
        object.__setattr__(stream, "disturbed", False)
        return rest

    def _take(self) -> bytes:
        stream = self._props["body"]
        if self._props["bodyUsed"] or (stream is not jsnull and (stream.disturbed or stream.locked)):
            raise JsException("TypeError", "Body has already been used.")
        self._props["bodyUsed"] = True
        return b"" if stream is jsnull else stream.drain()

    async def _read(self) -> bytes:
        # Reading a body is I/O in workerd: other events may run meanwhile.
        await asyncio.sleep(0)
        return self._take()

    def arrayBuffer(self):
        """Promise of the body as an ArrayBuffer."""
        return _later(self._read(), JsArrayBuffer)

    def text(self):
        """Promise of the body decoded as UTF-8 (invalid bytes become U+FFFD)."""
        return _later(self._read(), lambda b: b.decode("utf-8", "replace"))

    def json(self):
        """Promise of the parsed body."""
        return _later(self._read(), lambda b: json.loads(b.decode("utf-8")))


async def _later(coro, convert):
    return convert(await coro)


class JsRequest(_Body, JsProxy):
    """The Fetch `Request` (`js.Request`)."""

    def __init__(self, url: str, method: str = "GET", headers: Any = None, body: Any = None):
        JsProxy.__init__(self, "Request")
        method = method.upper()
        if body not in (None, jsnull) and method in ("GET", "HEAD"):
            raise JsException("TypeError", "Request with a GET or HEAD method cannot have a body.")
        self._props.update(
            url=url,
            method=method,
            headers=JsHeaders(headers),
            cf=jsnull,
            cache="default",
            credentials="same-origin",
            destination="",
            integrity="",
            isHistoryNavigation=False,
            keepalive=False,
            mode="cors",
            redirect="follow",
            referrer="about:client",
            referrerPolicy="",
        )
        self._init_body(body)

    @classmethod
    def new(cls, input: Any, **init: Any) -> JsRequest:
        """`new Request(input, init)`."""
        if isinstance(input, JsRequest):
            base = input.clone()
            return cls(
                base.url,
                init.get("method", base.method),
                init.get("headers", base.headers),
                init.get("body", base._data),
            )
        return cls(input, init.get("method", "GET"), init.get("headers"), init.get("body"))

    def clone(self) -> JsRequest:
        """A copy with its own unread body."""
        if self._props["bodyUsed"]:
            raise JsException("TypeError", "Body has already been used.")
        return JsRequest(self.url, self.method, self.headers, self._data)


class JsResponse(_Body, JsProxy):
    """The Fetch `Response` (`js.Response`)."""

    def __init__(
        self, body: Any = None, status: int = 200, statusText: str = "", headers: Any = None, url: str = ""
    ):
        JsProxy.__init__(self, "Response")
        if not 200 <= int(status) <= 599:
            raise JsException("RangeError", f"invalid status {status}")
        self._props.update(
            status=int(status),
            statusText=statusText,
            headers=JsHeaders(headers),
            url=url,
            type="default",
            redirected=False,
            ok=200 <= int(status) < 300,
        )
        self._init_body(body)

    @classmethod
    def new(cls, body: Any = None, **init: Any) -> JsResponse:
        """`new Response(body, init)`."""
        return cls(body, init.get("status", 200), init.get("statusText", ""), init.get("headers"))

    def clone(self) -> JsResponse:
        """A copy with its own unread body."""
        return JsResponse(self._data, self.status, self.statusText, self.headers, self.url)
