"""Package attributes imported when first asked for: one helper for every package that maps itself."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `package.<where[name]>` when `name` is first read.

    Why lazily: a host answers /health before it loads the engine, and a caller that needs one
    constant does not pay for the rest.
    """

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    return __getattr__
