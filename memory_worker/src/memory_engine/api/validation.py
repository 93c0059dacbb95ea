"""Checking what a caller sent: one refusal type and the field checks every route shares.

Each check either returns the value in its checked form or raises `ApiError` with the
status and a message that says what to fix; nothing is stored before every check passed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast
from urllib.parse import parse_qs, unquote

from memory_engine.api import wire
from memory_engine.errors import ApiError

MAX_TEXT_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
BODY_TOO_LARGE = f"request body over {MAX_BODY_BYTES} bytes"  # the 413 of every host
MAX_FIELD_CHARS = 256
MODES = ("auto", "full")
ROLES = ("user", "assistant", "system")


def unquote_strict(raw: str, name: str) -> str:
    """A percent-decoded path segment; 400 when it is not UTF-8."""
    try:
        return unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise ApiError(400, f"{name} is not valid percent-encoded UTF-8") from None


def query_of(raw: str) -> dict[str, str]:
    """The query string as a dict (the last value of a repeated key wins)."""
    if not raw:  # most requests (every turn)
        return {}
    try:
        parsed = parse_qs(raw, keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "query string is not valid UTF-8") from None
    return {k: v[-1] for k, v in parsed.items()}


def json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; 400 when it is empty, not UTF-8, not JSON or not an object."""
    if not body:
        raise ApiError(400, "a JSON object body is required")
    try:
        data = _DECODER.decode(_text_of(body))
    except UnicodeDecodeError:
        raise ApiError(400, "body is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise ApiError(400, "body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body must be a JSON object")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every body: `json.loads` with an argument built a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _text_of(body: bytes) -> str:
    # str(), not .decode(): a Worker's object hands over a body received over RPC as a
    # memoryview (not copied into bytes: an import's body is up to 32 MB).
    text = str(body, "utf-8")
    if text.startswith("\ufeff"):  # as json.loads: a byte order mark is not JSON
        raise ValueError("a byte order mark")
    return text


def plain(value: Any, name: str, max_bytes: int = MAX_FIELD_CHARS) -> str:
    """A string field (a number is refused, as the document says); unencodable unicode is refused."""
    if type(value) is str and value.isascii() and len(value) <= max_bytes:
        return value  # most fields (an import checks several a message): one byte a character
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ApiError(400, f"{name} is not valid unicode (lone surrogate)") from None
    if max_bytes == MAX_TEXT_BYTES and size > max_bytes:
        raise ApiError(413, f"{name} is over {max_bytes} bytes")
    # A short field's limit counts characters, as the OpenAPI document states it (maxLength).
    if max_bytes != MAX_TEXT_BYTES and len(value) > max_bytes:
        raise ApiError(400, f"{name} is over {max_bytes} characters")
    return value


def optional(body: Mapping[str, Any], name: str) -> str | None:
    """An optional string field (null = absent)."""
    value = body.get(name)
    return None if value is None else plain(value, name)


def text(body: Mapping[str, Any], required: bool = True) -> str:
    """The message `text`: up to 64 KiB (413 above), not blank when required."""
    value = body.get("text")
    if value is None and not required:
        return ""
    checked = plain(value, "text", MAX_TEXT_BYTES)
    if required and not checked.strip():
        raise ApiError(400, "text must not be empty")
    return checked


def choice(value: Any, name: str, allowed: tuple[str, ...], required: bool = False) -> str | None:
    """One of `allowed` (None when absent and not required)."""
    if value is None and not required:
        return None
    if value not in allowed:
        raise ApiError(400, f"{name} must be one of: {', '.join(allowed)}")
    return str(value)


def integer(value: Any, name: str, low: int, high: int) -> int:
    """An integer from `low` to `high` (text of one is accepted, and a number with no fraction, as
    JSON Schema's integer is: 3.0; a bool or 3.5 is not)."""
    if isinstance(value, float):
        value = int(value) if value.is_integer() else None
    try:
        number = int(value) if not isinstance(value, bool) and value is not None else None
    except (TypeError, ValueError):
        number = None
    if number is None or not low <= number <= high:
        raise ApiError(400, f"{name} must be an integer from {low} to {high}")
    return number


def number(value: Any, name: str, default: float | None = 0.0) -> float | None:
    """A finite non-negative number (`default` when absent)."""
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ApiError(400, f"{name} must be a non-negative number")
    return float(value)


def iso(value: Any, name: str) -> str | None:
    """An ISO-8601 timestamp as given (None when absent)."""
    if value is None:
        return None
    checked = plain(value, name)
    if not _parses_as_iso(checked):
        raise ApiError(400, f"{name} must be an ISO-8601 timestamp")
    return checked


def _parses_as_iso(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


_ROLES_CHECKED = {None: "user"} | {role: role for role in ROLES}  # null = absent = "user"
_IMPORT_FIELDS = ("author", "author_id", "message_id", "reply_to_message_id", "reply_to_author_id", "ts")
IMPORTED_FIELDS = frozenset({"role", "text", *_IMPORT_FIELDS})  # a field beyond them is refused


def imported_message(m: dict[str, Any]) -> wire.ImportedMessage | None:
    """One message of an import, checked in one pass when it is in the form nearly all are
    (every field a string within its limits, a valid `ts`): `m` itself, its role filled in;
    else None, and `route_args` checks it field by field, which refuses it with the field's
    error or accepts it as this does. No copy and no call per field: ~4 % of the host's import.
    The engine reads each field with `.get` (absent = None; an empty reply_to_author_id = none).
    """
    if not m.keys() <= IMPORTED_FIELDS:
        return None  # refused by route_args, which names the field
    get = m.get
    role, body = get("role"), get("text")
    if (type(role) is not str and role is not None) or (checked := _ROLES_CHECKED.get(role)) is None:
        return None
    if type(body) is not str or not body or body.isspace():
        return None
    if (len(body) > MAX_TEXT_BYTES or not body.isascii()) and not _fits(body, MAX_TEXT_BYTES):
        return None
    for value in map(get, _IMPORT_FIELDS):
        if value is not None and (
            type(value) is not str
            or len(value) > MAX_FIELD_CHARS
            or (not value.isascii() and not _fits(value, 4 * MAX_FIELD_CHARS))
        ):
            return None
    ts = get("ts")
    if ts is not None and not _parses_as_iso(ts):
        return None
    if role is None:
        m["role"] = checked
    return cast(wire.ImportedMessage, m)  # every field just checked, absent ones read as None


def _fits(value: str, max_bytes: int) -> bool:
    """True when `value` is valid unicode of at most `max_bytes` in UTF-8 (as `plain` checks)."""
    try:
        return len(value.encode("utf-8")) <= max_bytes
    except UnicodeEncodeError:  # a lone surrogate
        return False
