"""The one mapping of settings: a TOML table and the environment into a settings dataclass.

bot/config.py declares a dataclass per table of bot.toml; `section` fills one, whatever the
table: each field is the table's key of its name, or the environment variable its metadata
names (`env_var`), converted to the field's type. A key no field reads, a table that is not
one, a value of the wrong shape: a `SettingsError` naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from bot.errors import SettingsError

DERIVED = {"toml": False}  # field metadata: not a key of the table (a name, a resolved secret)


def env_var(name: str) -> Any:
    """Field metadata: the environment variable that overrides this field's TOML key."""
    return {"env": name}


T = TypeVar("T")


def section(
    cls: type[T],
    table: Mapping[str, Any],
    env: Mapping[str, str],
    where: str = "",
    source: str = "settings",
    **derived: Any,
) -> T:
    """One settings type from its TOML table and the environment, the one mapping of them all:
    each field is the table's key of its name, or its `env` variable (field metadata) when
    that is set and not blank; converted to the field's type (a dataclass field: a nested
    table). Keys the table does not have keep the field's default; a key no field has, or a
    value of the wrong shape, is a `SettingsError` naming `source` (the file) and the key.
    `derived`: the fields that are no key of the table (a tier's name)."""
    name = where or cls.__name__
    check_keys(cls, table, name, source)
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]  # cls is a dataclass
    values: dict[str, object] = dict(derived)
    for f in fields:
        var = f.metadata.get("env")
        raw = blank_to_none(env.get(var)) if var else None
        if raw is None and f.name not in table:
            continue
        value: Any = raw if raw is not None else table[f.name]
        if dataclasses.is_dataclass(hints[f.name]):  # a nested table: [router.choice]
            values[f.name] = section(hints[f.name], value, env, f"{name}.{f.name}", source)
            continue
        try:
            values[f.name] = _convert(value, hints[f.name])
        except (TypeError, ValueError) as exc:
            what = var if raw is not None else f"[{name}] {f.name}"
            raise SettingsError(f"{source}: {what} = {value!r} is not a {hints[f.name]}") from exc
    missing = [f.name for f in fields if f.name not in values and _required(f)]
    if missing:
        raise SettingsError(f"{source}: [{name}] needs {missing[0]!r}")
    return cls(**values)


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def check_keys(cls: type, table: Any, name: str, source: str) -> None:
    """A `SettingsError` naming `source` and the key when `table` is no table or has a key
    that no field of `cls` reads."""
    if not isinstance(table, Mapping):
        raise SettingsError(f"{source}: [{name}] must be a table, not {table!r}")
    keys = sorted(f.name for f in dataclasses.fields(cls) if f.metadata.get("toml", True))
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise SettingsError(
            f"{source}: [{name}] has no setting {unknown[0]!r} (its settings: {', '.join(keys)})"
        )


def _convert(value: Any, kind: Any) -> Any:
    """`value` (TOML or environment text) as the type `kind` of a settings field."""
    args = typing.get_args(kind)
    if type(None) in args:  # `X | None`: blank is None
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        kind = next(a for a in args if a is not type(None))
    if kind is bool:
        if isinstance(value, str):
            if value.strip().lower() not in _BOOLS:
                raise ValueError(value)
            return _BOOLS[value.strip().lower()]
        return bool(value)
    if kind in (int, float):
        if isinstance(value, bool):
            raise TypeError(value)
        return kind(value)
    if kind is str:
        if isinstance(value, (Mapping, list, tuple)):  # a table or list where text belongs
            raise TypeError(value)
        return str(value).strip()
    if typing.get_origin(kind) is frozenset:
        return ids(value)
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, (str, list, tuple)):
            raise TypeError(value)
        return tuple(str(x).strip() for x in (value.split(",") if isinstance(value, str) else value))
    return value


_BOOLS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def blank_to_none(value: str | None) -> str | None:
    """The text stripped, None when blank or unset."""
    return value.strip() if value and value.strip() else None


def ids(value: Any) -> frozenset[str]:
    """Platform ids from "1, 2" or a TOML list (numbers or strings), as text."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return frozenset(str(x).strip() for x in items if str(x).strip())
