"""What both readers share: the error that names the place at fault, the record shape, streamed JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import ijson

MAX_TEXT_BYTES = 64 * 1024  # the memory API's limit per message (413 above)
MAX_FIELD_BYTES = 256  # the memory API's limit for author, author_id, message_id


class ExportError(ValueError):
    """A file that cannot be imported; the message names the file, and the line or the field at fault."""

    def __init__(self, path: Path | str, what: str, line: int | None = None, col: int | None = None):
        self.path, self.what, self.line, self.col = str(path), what, line, col
        where = f"{path}:{line}:{col}" if line is not None else str(path)
        super().__init__(f"{where}: {what}")


@dataclass(frozen=True)
class Record:
    """One message for `POST /import`, under the chat key it belongs to."""

    key: str
    message_id: str
    text: str
    author: str
    author_id: str
    ts: str
    role: str = "user"
    reply_to_message_id: str = ""  # the message it answers (the worker links a bot's answer to its asker)

    def body(self) -> dict[str, str]:
        """The message as the import route takes it."""
        body = {
            "role": self.role,
            "text": self.text,
            "author": self.author,
            "author_id": self.author_id,
            "message_id": self.message_id,
            "ts": self.ts,
        }
        if self.reply_to_message_id:
            body["reply_to_message_id"] = self.reply_to_message_id
        return body


@dataclass
class Source:
    """One exported chat: how to name it, how to select it, and its records (re-readable)."""

    label: str  # for messages: "chat 'Family' (chats.list[3])"
    name: str
    key: str  # the chat key without a per-user suffix
    aliases: frozenset[str]  # what `--chat` may say to pick it: key, ids, name
    records: Callable[[], Iterator[Record | None]]  # None: a message with nothing to keep
    private: bool = False  # a private chat inside a whole-account export: only on request


def clean(text: str, max_bytes: int) -> str:
    """Valid unicode (a lone surrogate becomes U+FFFD) within `max_bytes` of UTF-8."""
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", "ignore") + "…"


def utc_iso(dt: datetime) -> str:
    """The memory worker's timestamp format: ISO-8601 UTC with milliseconds and a Z."""
    dt = dt.astimezone(UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def message_records(
    path: Path,
    label: str,
    messages: Iterable[Any],
    convert: Callable[[str, dict[str, Any]], Record | None],
) -> Iterator[Record | None]:
    """`convert(where, message)` for each exported message; an ExportError names one that is no object."""
    for i, message in enumerate(messages):
        where = f"{label}: messages[{i}]"
        if not isinstance(message, dict):
            raise ExportError(path, f"{where} is not an object")
        yield convert(where, message)


class _Counting:
    """A binary file that reports how many bytes were read (for the progress of a pass)."""

    def __init__(self, f: BinaryIO, seen: Callable[[int], None] | None):
        self.f, self.seen = f, seen

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        if self.seen is not None:
            self.seen(len(data))
        return data


def stream_items(path: Path, prefix: str, seen: Callable[[int], None] | None = None) -> Iterator[Any]:
    """The values at `prefix` (ijson syntax, "messages.item"), parsed one at a time."""
    with open(path, "rb") as f:
        try:
            yield from ijson.items(_Counting(f, seen), prefix, use_float=True)
        except (ijson.JSONError, UnicodeDecodeError) as err:
            raise broken(path, err) from None


def read_header(path: Path, stops: Mapping[str, frozenset[str]]) -> tuple[dict[str, Any], str | None]:
    """The top-level fields of a JSON object, read until a key of `stops` (a big array) whose
    needed fields are all known; and the first such key that was seen.

    Exporters write a chat's own fields before its messages, so this reads a few hundred
    bytes. A file that puts them after the messages is still read right, only slower.
    """
    out: dict[str, Any] = {}
    found: str | None = None
    key: str | None = None
    builder: ijson.ObjectBuilder | None = None
    with open(path, "rb") as f:
        try:
            for prefix, event, value in ijson.parse(f, use_float=True):
                if prefix != "":
                    if builder is not None:
                        builder.event(event, value)
                    continue
                if event in ("start_map", "end_map"):
                    continue
                if event != "map_key":
                    raise ExportError(path, "not an export: the file is not one JSON object")
                if key is not None and builder is not None:
                    out[key] = builder.value
                key, builder = value, ijson.ObjectBuilder()
                if value in stops:
                    found = found or value
                    builder = None  # its value is read by stream_items
                    if stops[value] <= out.keys():
                        return out, found
            if key is not None and builder is not None:
                out[key] = builder.value
        except (ijson.JSONError, UnicodeDecodeError) as err:
            raise broken(path, err) from None
    return out, found


def broken(path: Path, err: Exception) -> ExportError:
    """An ExportError for a file that is not valid JSON, with the line and column when known."""
    # ijson says what is wrong but not where; the standard parser says where. It reads the
    # whole file into memory, which is only paid for a file that is refused anyway.
    try:
        with open(path, encoding="utf-8") as f:
            json.load(f)
    except json.JSONDecodeError as exact:
        return ExportError(path, f"not valid JSON: {exact.msg}", exact.lineno, exact.colno)
    except UnicodeDecodeError as bad:
        return ExportError(path, f"not UTF-8 text (byte {bad.start})")
    except (OSError, ValueError, RecursionError):
        pass
    return ExportError(path, f"not valid JSON: {err}")


def require(value: Any, kind: type | tuple[type, ...], path: Path, where: str, name: str) -> Any:
    """`value` when it has the type, else an ExportError naming the field."""
    if value is None:
        raise ExportError(path, f"{where} has no `{name}`")
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ExportError(path, f"{where}: `{name}` is not a {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "number", str: "string", dict: "object", list: "list", float: "number"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)
