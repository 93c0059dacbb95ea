"""Mirror of `workers/entrypoints.py`: DurableObject, WorkerEntrypoint, DurableObjectContext.

As in the SDK, a subclass's `__init__` is wrapped so that `ctx` arrives as a
`DurableObjectContext` (for Durable Objects) and `env` as an `_EnvWrapper`; the context
hands out `ctx.storage` wrapped in a `_BindingWrapper`, so every storage call converts
its arguments and results (rows become `JsDict`s, JS null becomes None).

`WRAP_STORAGE = False` models a runtime whose `workers` module predates that wrapper:
`ctx.storage` is then the bare JS proxy (rows are JS objects that need `to_py()`, null
comes back as `jsnull`, None is sent as `undefined`). Tests run the shell under both.
"""

from __future__ import annotations

import functools
from typing import Any

from tests.fakes.workers.request import Request, _is_js_instance
from tests.fakes.workers.rpc import _BindingWrapper, _EnvWrapper, _idempotent_new

WRAP_STORAGE = True


class DurableObjectAbort(BaseException):
    """Raised by `ctx.abort()`."""


class DurableObjectContext:
    """`self.ctx` of a Durable Object: attribute access to the JS state, storage wrapped."""

    __new__ = _idempotent_new

    def __init__(self, ctx: Any):
        if ctx is self:
            return
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        result = getattr(self._ctx, name)
        if _is_js_instance(result, "DurableObjectStorage") and WRAP_STORAGE:
            result = _BindingWrapper(result)
        setattr(self, name, result)
        return result

    def abort(self, reason: str | None = None) -> None:
        """Reset the object: its in-memory state is dropped."""
        self._ctx.abort(reason)
        raise DurableObjectAbort(reason or "Durable Object abort requested")


def handler(func: Any) -> Any:
    """Wrap a module-level handler so `request` arrives as an SDK Request."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args and _is_js_instance(args[0], "Request"):
            args = (Request(args[0]), *args[1:])
        if len(args) > 1:
            args = (args[0], _EnvWrapper(args[1]), *args[2:])
        return func(*args, **kwargs)

    return wrapper


def _wrap_class(cls: type) -> type:
    original_init = cls.__dict__.get("__init__")
    if original_init is None:
        return cls

    def wrapped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        args_list = list(args)
        if args_list and issubclass(cls, DurableObject) and WRAP_STORAGE:
            args_list[0] = DurableObjectContext(args_list[0])
        if len(args_list) > 1:
            args_list[1] = _EnvWrapper(args_list[1])
        original_init(self, *args_list, **kwargs)

    cls.__init__ = wrapped_init  # type: ignore[misc]  # the SDK wraps __init__ the same way
    return cls


class DurableObject:
    """Base class of a Durable Object: `self.ctx`, `self.env`."""

    ctx: Any
    env: Any

    def __init__(self, ctx: Any, env: Any):
        self.ctx = ctx
        self.env = env

    def __init_subclass__(cls, **_kwargs: Any):
        _wrap_class(cls)


DurableObject = _wrap_class(DurableObject)  # type: ignore[misc]  # rebinding the class, as the SDK does


class WorkerEntrypoint:
    """Base class of a Worker entrypoint: `self.ctx` (ExecutionContext), `self.env`."""

    ctx: Any
    env: Any

    def __init__(self, ctx: Any, env: Any):
        self.ctx = ctx
        self.env = env

    def __init_subclass__(cls, **_kwargs: Any):
        _wrap_class(cls)


WorkerEntrypoint = _wrap_class(WorkerEntrypoint)  # type: ignore[misc]  # rebinding the class, as the SDK does
