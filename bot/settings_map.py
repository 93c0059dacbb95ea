"""The one mapping of settings: a TOML table and the environment into a settings dataclass.

bot/config.py declares a dataclass per table of bot.toml; `section` fills one, whatever the
table: each field is the table's key of its name, or the environment variable its metadata
names (`env_var`), converted to the field's type and checked against its set or format (the
field's `check` metadata: a choice, a time zone, a clock time, a URL, a positive number). A key
no field reads, a table that is not one, a value of the wrong shape or out of its set: a
`SettingsError` naming the file and the key, in words (never a Python type).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from bot.errors import SettingsError
from memory_engine.reminders.zones import known_zone

Check = Callable[[Any], "str | None"]  # what is wrong with a value, in words; None: nothing


DERIVED = {"toml": False}  # field metadata: not a key of the table (a name, a resolved secret)


def env_var(name: str) -> Any:
    """Field metadata: the environment variable that overrides this field's TOML key."""
    return {"env": name}


def checked(check: Check, env: str | None = None) -> Any:
    """Field metadata: `check` says what is wrong with a value; `env` as for `env_var`."""
    return {"check": check, **({"env": env} if env else {})}


def one_of(*choices: str) -> Check:
    """A value that is one of `choices`."""
    listed = " or ".join([", ".join(choices[:-1]), choices[-1]] if len(choices) > 1 else choices)
    return lambda v: None if v in choices else f"is not {listed}"


def at_least(low: float, above: bool = False) -> Check:
    """A number of `low` or more (`above`: more than `low`)."""
    if above:
        return lambda v: None if v > low else f"must be more than {low:g}"
    return lambda v: None if v >= low else f"must be {low:g} or more"


POSITIVE = at_least(0, above=True)
NOT_NEGATIVE = at_least(0)


def port(value: int) -> str | None:
    """A TCP port to listen on (0: any free one)."""
    return None if 0 <= value <= 65535 else "is not a port: give a number from 0 to 65535"


def url(*schemes: str) -> Check:
    """A whole URL of one of `schemes` (http, https: the default), with a host."""
    schemes = schemes or ("http", "https")
    shown = " or ".join(f"{s}://" for s in schemes)

    def check(value: str) -> str | None:
        parts = urlsplit(value)
        if parts.scheme.lower() in schemes and parts.netloc:
            return None
        return f"is not a URL: it must start with {shown} and name a host"

    return check


def time_zone(value: str) -> str | None:
    """An IANA time zone that exists, spelled as the database spells it (`known_zone`: the
    same check as `/timezone` and the API)."""
    if known_zone(value) == value:
        return None
    return "is not a time zone: use a name like Europe/Lisbon or UTC"


_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")


def clock_time(value: str) -> str | None:
    """A time of day, HH:MM."""
    m = _CLOCK.fullmatch(value)
    if m and int(m.group(1)) < 24 and int(m.group(2)) < 60:
        return None
    return "is not a time of day: use HH:MM, e.g. 09:00"


def date_languages(value: tuple[str, ...]) -> str | None:
    """Language codes `dateparser` reads."""
    from dateparser.data.languages_info import language_order  # the codes it has data for

    if not value:
        return "names no language: list codes such as en, de, fr"
    unknown = [code for code in value if code not in language_order]
    return f"has codes dateparser does not know: {', '.join(map(repr, unknown))}" if unknown else None


T = TypeVar("T")


def section(
    cls: type[T],
    table: Mapping[str, Any],
    env: Mapping[str, str],
    where: str = "",
    source: str = "settings",
    problems: list[str] | None = None,
    **derived: Any,
) -> T:
    """One settings type from its TOML table and the environment, the one mapping of them all:
    each field is the table's key of its name, or its `env` variable (field metadata) when
    that is set and not blank; converted to the field's type (a dataclass field: a nested
    table). Keys the table does not have keep the field's default; a key no field has, or a
    value of the wrong shape, is a `SettingsError` naming `source` (the file) and the key.
    `derived`: the fields that are no key of the table (a tier's name). With `problems`, a
    wrong value is added there (the field keeps its default) rather than raised at once."""
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
            values[f.name] = section(hints[f.name], value, env, f"{name}.{f.name}", source, problems)
            continue
        what = var if raw is not None else f"[{name}] {f.name}"
        try:
            converted = _convert(value, hints[f.name])
        except (TypeError, ValueError):
            problem: str | None = f"is not {_kind(hints[f.name])}"
        else:
            check = f.metadata.get("check")
            problem = check(converted) if check is not None and converted is not None else None
        if problem is not None:
            wrong = f"{source}: {what} = {value!r} {problem}"
            if problems is None:
                raise SettingsError(wrong)
            problems.append(wrong)
            continue
        values[f.name] = converted
    missing = [f.name for f in fields if f.name not in values and _required(f)]
    if missing and problems and any(f"] {m} = " in p for p in problems for m in missing):
        raise SettingsError(*problems)  # a required value that was wrong: no default to go on with
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


def _kind(kind: Any) -> str:
    """A field's type in words: what a value of the wrong shape "is not"."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if type(None) in typing.get_args(kind) and len(args) == 1:
        kind = args[0]
    origin = typing.get_origin(kind)
    words = {bool: "true or false", int: "a whole number", float: "a number", str: "a text value"}
    if kind in words:
        return words[kind]
    if origin is frozenset:
        return "a list of ids"
    if origin is tuple:
        return "a list (or text with commas)"
    return "a table" if dataclasses.is_dataclass(kind) else "of the right kind"


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
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(value)  # 1.5 attempts is no count of attempts
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
