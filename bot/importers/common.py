"""What both readers share: the error that names the place at fault, the record shape, streamed JSON."""

from __future__ import annotations

import codecs
import contextlib
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, BinaryIO

import ijson

MAX_TEXT_BYTES = 64 * 1024  # the memory API's limit per message (413 above)
MAX_FIELD_BYTES = 256  # the memory API's limit for author, author_id, message_id
CHAT_KEY = re.compile(r"[A-Za-z0-9:_\-.]{1,128}")  # the memory API's chat keys


class ExportError(ValueError):
    """A file that cannot be imported; the message names the file, and the line or the field at fault."""

    def __init__(self, path: Path | str, what: str, line: int | None = None, col: int | None = None):
        self.path, self.what, self.line, self.col = str(path), what, line, col
        where = f"{path}:{line}:{col}" if line is not None else str(path)
        super().__init__(f"{where}: {what}")


@dataclass(slots=True)
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
    if text.isascii():  # most text: one byte a character, no surrogate (the same answer, faster)
        return text if len(text) <= max_bytes else text[: max_bytes - 3] + "…"
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max_bytes - 3].decode("utf-8", "ignore") + "…"


def utc_iso(dt: datetime) -> str:
    """The memory worker's timestamp format: ISO-8601 UTC with milliseconds and a Z."""
    dt = dt.astimezone(UTC)
    if 1000 <= dt.year <= 9999:  # isoformat: a third of strftime's cost (and the same text)
        return dt.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def unix_iso(seconds: int) -> str:
    """`utc_iso` of a Unix time in whole seconds (the date worked out once a day: a message's
    own part is three table look-ups, a tenth of `utc_iso`'s cost)."""
    day, rest = divmod(seconds, 86400)
    if not _FIRST_DAY <= day <= _LAST_DAY:  # outside years 1000-9999: written as utc_iso writes them
        return utc_iso(datetime.fromtimestamp(seconds, UTC))
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"{_date(day)}T{_TWO[hour]}:{_TWO[minute]}:{_TWO[second]}.000Z"


_EPOCH = date(1970, 1, 1).toordinal()
_FIRST_DAY, _LAST_DAY = date(1000, 1, 1).toordinal() - _EPOCH, date(9999, 12, 31).toordinal() - _EPOCH
_TWO = [f"{n:02d}" for n in range(60)]


@functools.lru_cache(maxsize=1024)
def _date(day: int) -> str:
    return date.fromordinal(day + _EPOCH).isoformat()


def message_records(
    path: Path,
    label: str,
    messages: Iterable[Any],
    convert: Callable[[str, dict[str, Any]], Record | None],
) -> Iterator[Record | None]:
    """`convert(where, message)` for each exported message; an ExportError names one that is no object."""
    keys: set[str] = set()  # the chat keys found good (a chat has one, or one per person)
    for i, message in enumerate(messages):
        where = f"{label}: messages[{i}]"
        if type(message) is not dict:
            raise ExportError(path, f"{where} is not an object")
        record = convert(where, message)
        if record is not None and record.key not in keys:
            if not CHAT_KEY.fullmatch(record.key):
                what = f"its chat key {record.key[:60]!r} is not one the memory takes"
                raise ExportError(path, f"{where}: {what}")
            keys.add(record.key)
        yield record


def field(path: Path, where: str, name: str, value: str) -> str:
    """`value`, when the memory API takes it as an id (at most MAX_FIELD_BYTES), else an ExportError:
    the worker would refuse it in the middle of the import."""
    if value.isascii() and len(value) <= MAX_FIELD_BYTES:  # nearly every id: no encoding needed
        return value
    if len(value.encode("utf-8", "replace")) > MAX_FIELD_BYTES:
        raise ExportError(path, f"{where}: `{name}` is over {MAX_FIELD_BYTES} bytes")
    return value


# Limits no genuine export comes near, checked while streaming, so memory stays bounded
# whatever the file: yajl2_c itself nests without limit and ijson builds a prefix string
# per event, which made 200,000 brackets (400 KB) cost 24 GB.
MAX_DEPTH = 64  # Telegram's deepest is ~7 (chats.list.item.messages.item.text.item)
MAX_TOKEN_BYTES = 1024 * 1024  # one string or number: a message text is at most 64 KiB
MAX_ITEM_BYTES = 8 * 1024 * 1024  # one message, or one header field
CHUNK = 64 * 1024
_QUOTE = re.compile(rb'(?<!\\)"')  # a quote that does not follow a backslash


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a whole JSON string, escapes and all
# The same, or (group 1) a string still open at the end of the text, taken whole: no position
# inside it is tried again as the start of a string, which costs quadratic time when it holds
# many escaped quotes.
_STRING_OR_OPEN = re.compile(_STRING.pattern + rb'|("[\s\S]*)')
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_NOT_QUOTE_OR_BRACKET = bytes(c for c in range(256) if c not in b'[]{}"')
_OPENS = frozenset(b"[{")


class _Guarded:
    """A binary file read in chunks that refuses a stretch of MAX_TOKEN_BYTES without a quote
    (a string or number longer than any export has) before the parser buffers it; it knows
    its offset (to size items and to locate errors) and reports progress.

    With `item_depth`, it also follows the nesting itself (the brackets outside strings of each
    chunk, before the parser sees it) and refuses what `_limited` refuses: nesting deeper than
    MAX_DEPTH, an item (a container opened at `item_depth`, named `items[i]`) spanning more than
    MAX_ITEM_BYTES. Then the parser needs no Python between its events: ijson's C `items` reads
    the guard directly (about 5x faster than the events through `_limited`).
    """

    def __init__(
        self,
        path: Path,
        f: BinaryIO,
        seen: Callable[[int], None] | None,
        item_depth: int = 0,
        items: str = "",
    ):
        self.path, self.f, self.seen = path, f, seen
        self.offset = 0  # bytes handed to the parser
        self.start = 0  # where the last chunk began: a parse error is in it
        self.since = 0  # bytes since the last unescaped quote
        self.tail = b""
        self.item_depth, self.items = item_depth, items
        self.depth, self.index, self.began = 0, -1, -1
        self.open_string = b""  # the unclosed string at the end of the last chunk, if any

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(CHUNK if n < 0 else min(n, CHUNK))
        self.start = self.offset
        buf = self.tail + data  # a backslash at the end of the last chunk escapes a quote here
        first = _QUOTE.search(buf, len(self.tail))
        if first is None:
            self.since += len(data)
        else:
            gap = self.since + first.start() - len(self.tail)
            self.since = len(buf) - 1 - _last_quote(buf, len(self.tail))
            self._check(gap)
        self._check(self.since)
        self.tail = data[-1:] or self.tail
        if self.item_depth and data:
            self._nest(data)
        self.offset += len(data)
        if self.seen is not None:
            self.seen(len(data))
        return data

    def _nest(self, data: bytes) -> None:
        """Follow the brackets of `data` outside strings, as `_limited` follows the parser's events."""
        buf = self.open_string + data
        # (A string stays open for at most MAX_TOKEN_BYTES: `read` refuses a longer stretch.)
        if b'\\"' in buf:  # escaped quotes (rare): the linear way
            parts = _STRING_OR_OPEN.split(buf)  # between strings; [1::2]: the open one, or None
            outside, self.open_string = b"".join(parts[::2]), (parts[-2] or b"") if len(parts) > 1 else b""
            brackets = outside.translate(None, _NOT_BRACKET)
        else:  # every quote opens or closes a string: between them, strings and the rest alternate
            # Of the quotes and brackets alone (5x faster than removing the strings with a regex).
            parts = buf.translate(None, _NOT_QUOTE_OR_BRACKET).split(b'"')
            brackets = b"".join(parts[::2])
            self.open_string = buf[buf.rfind(b'"') :] if len(parts) % 2 == 0 else b""  # an odd count: open
        for bracket in brackets:
            if bracket in _OPENS:
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    what = f"nested more than {MAX_DEPTH} levels deep (near byte {self.offset})"
                    raise ExportError(self.path, f"{what}: not an export")
                if self.depth == self.item_depth - 1:
                    self.index = -1  # a new list of items
                elif self.depth == self.item_depth:
                    self.index, self.began = self.index + 1, self.offset
            else:
                self.depth -= 1
                if self.depth < self.item_depth:
                    self.began = -1
        if self.began >= 0 and self.offset + len(data) - self.began > MAX_ITEM_BYTES + CHUNK:
            what = f"{self.items}[{self.index}] is bigger than {MAX_ITEM_BYTES} bytes"
            raise ExportError(self.path, f"{what}: not an export")

    def _check(self, stretch: int) -> None:
        if stretch > MAX_TOKEN_BYTES:
            what = f"a value longer than {MAX_TOKEN_BYTES} bytes (near byte {self.offset})"
            raise ExportError(self.path, f"{what}: not an export")


def _last_quote(buf: bytes, lo: int) -> int:
    q = buf.rfind(b'"', lo)
    while q > 0 and buf[q - 1] == 0x5C:  # escaped: the stretch goes on
        q = buf.rfind(b'"', lo, q - 1)
    return q


def _limited(guard: _Guarded, item_depth: int, items: str) -> Iterator[tuple[str, Any]]:
    """ijson's basic events of a guarded file, refusing nesting deeper than MAX_DEPTH and an
    item (a container opened at `item_depth`, named `items[i]`) spanning more than MAX_ITEM_BYTES."""
    depth, index, began = 0, -1, -1
    for event, value in ijson.basic_parse(guard, use_float=True, buf_size=CHUNK):
        if event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_DEPTH:
                what = f"nested more than {MAX_DEPTH} levels deep (near byte {guard.offset})"
                raise ExportError(guard.path, f"{what}: not an export")
            if depth == item_depth - 1:
                index = -1  # a new list of items
            elif depth == item_depth:
                index, began = index + 1, guard.start
        elif event == "end_map" or event == "end_array":
            depth -= 1
            if depth < item_depth:
                began = -1
        if began >= 0 and guard.offset - began > MAX_ITEM_BYTES + CHUNK:
            what = f"{items}[{index}] is bigger than {MAX_ITEM_BYTES} bytes"
            raise ExportError(guard.path, f"{what}: not an export")
        yield event, value


@contextlib.contextmanager
def parsed(path: Path, item_depth: int, items: str, seen: Callable[[int], None] | None = None):
    """ijson's `parse` events of `path` within the limits, as (guard, events); a parse error
    becomes an ExportError with the line and column."""
    with open(path, "rb") as f:
        guard = _Guarded(path, f, seen)
        yield guard, _located(path, guard, ijson.parse(_limited(guard, item_depth, items)))


def _located(path: Path, guard: _Guarded, events: Iterator[Any]) -> Iterator[Any]:
    # Here, not around the `with`: whoever pulls the events (a nested generator) gets it.
    try:
        yield from events
    except (ijson.JSONError, UnicodeDecodeError) as err:
        raise broken(path, err, guard.start) from None


def stream_items(path: Path, prefix: str, seen: Callable[[int], None] | None = None) -> Iterator[Any]:
    """The values at `prefix` (ijson syntax, "messages.item"), parsed one at a time."""
    depth = prefix.count(".") + 2  # the top object is 1: "messages.item" opens at 3
    with open(path, "rb") as f:
        guard = _Guarded(path, f, seen, depth, prefix.rsplit(".", 1)[0])
        try:
            yield from ijson.items(guard, prefix, use_float=True, buf_size=CHUNK)
        except (ijson.JSONError, UnicodeDecodeError) as err:
            raise broken(path, err, guard.start) from None


def build(events: Iterator[tuple[str, str, Any]], event: str, value: Any, guard: _Guarded, what: str) -> Any:
    """The value that begins with (`event`, `value`), read from `events` (parse events), at
    most MAX_ITEM_BYTES of it."""
    builder = ijson.ObjectBuilder()
    builder.event(event, value)
    if event not in ("start_map", "start_array"):
        return builder.value
    began, depth = guard.start, 1
    for _, event, value in events:
        builder.event(event, value)
        depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
        if guard.offset - began > MAX_ITEM_BYTES + CHUNK:
            raise ExportError(guard.path, f"{what} is bigger than {MAX_ITEM_BYTES} bytes: not an export")
        if depth == 0:
            return builder.value
    raise ExportError(guard.path, f"{what} is cut short")


def skip(events: Iterator[tuple[str, str, Any]], event: str) -> None:
    """Reads past the value that begins with `event`, building nothing."""
    depth = int(event in ("start_map", "start_array"))
    while depth:
        _, event, _ = next(events)
        depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))


def read_header(
    path: Path, stops: Mapping[str, frozenset[str]], wanted: frozenset[str]
) -> tuple[dict[str, Any], str | None]:
    """The `wanted` top-level fields of a JSON object, read until a key of `stops` (a big
    array) whose needed fields are all known; and the first such key that was seen.

    Exporters write a chat's own fields before its messages, so this reads a few hundred
    bytes. A file that puts them after the messages is still read right, only slower.
    Other fields are skipped unbuilt.
    """
    out: dict[str, Any] = {}
    found: str | None = None
    with parsed(path, 0, "", None) as (guard, events):
        prefix, event, value = next(events)
        if event != "start_map":
            raise ExportError(path, "not an export: the file is not one JSON object")
        for prefix, event, value in events:
            if event == "end_map" and prefix == "":
                break
            key = value
            _, event, value = next(events)
            if key in stops:
                found = found or key
                if stops[key] <= out.keys():
                    return out, found
                skip(events, event)
            elif key in wanted:
                out[key] = build(events, event, value, guard, f"`{key}`")
            else:
                skip(events, event)
    return out, found


def broken(path: Path, err: Exception, chunk: int = 0) -> ExportError:
    """An ExportError for a file that is not valid JSON, with the line and column: the parse
    is run again up to the chunk at fault, then byte by byte (memory stays flat)."""
    if isinstance(err, UnicodeDecodeError):
        offset = _first_bad_utf8(path)
        line, col = _line_col(path, offset)
        return ExportError(path, f"not UTF-8 text (byte {offset})", line, col)
    what = str(err).strip().splitlines()[0] if str(err).strip() else "not JSON"
    offset = _error_offset(path, chunk)
    line, col = _line_col(path, offset)
    return ExportError(path, f"not valid JSON: {what}", line, col)


class _Slow:
    """Hands the parser whole chunks up to `until`, then one byte at a time."""

    def __init__(self, f: BinaryIO, until: int):
        self.f, self.until, self.offset, self.eof = f, until, 0, False

    def read(self, n: int = -1) -> bytes:
        if n == 0:  # ijson asks for nothing first, to learn whether the file gives bytes
            return b""
        n = max(1, min(CHUNK, self.until - self.offset)) if self.offset < self.until else 1
        data = self.f.read(n)
        self.offset += len(data)
        self.eof = not data
        return data


def _error_offset(path: Path, chunk: int) -> int:
    with open(path, "rb") as f:
        slow = _Slow(f, chunk)
        try:
            depth = 0
            for event, _ in ijson.basic_parse(slow, buf_size=CHUNK):
                depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
                if depth > MAX_DEPTH:
                    break
        except (ijson.JSONError, UnicodeDecodeError):
            pass
    return slow.offset if slow.eof else max(slow.offset - 1, 0)  # at the end: cut short


def _first_bad_utf8(path: Path) -> int:
    decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
    with open(path, "rb") as f:
        while data := f.read(CHUNK):
            try:
                decoder.decode(data)
            except UnicodeDecodeError as bad:
                return offset + bad.start
            offset += len(data)
    return offset


def _line_col(path: Path, offset: int) -> tuple[int, int]:
    """Line and column (in characters, from 1) of a byte offset, read in chunks."""
    line, line_start, pos = 1, 0, 0
    with open(path, "rb") as f:
        while pos < offset and (data := f.read(min(CHUNK, offset - pos))):
            line += data.count(b"\n")
            last = data.rfind(b"\n")
            if last >= 0:
                line_start = pos + last + 1
            pos += len(data)
        f.seek(line_start)
        col, left = 1, offset - line_start
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while left > 0 and (data := f.read(min(CHUNK, left))):
            col += len(decoder.decode(data))
            left -= len(data)
    return line, col


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
