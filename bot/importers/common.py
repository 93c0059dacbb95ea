"""What both readers share: the error that names the place at fault, the record shape, streamed JSON."""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import orjson

from bot.errors import ExportError
from bot.importers.located import locate

# The API's limit per message (413 above), for the readers that cut a text to fit it.
from memory_engine.api.validation import MAX_TEXT_BYTES as MAX_TEXT_BYTES

MAX_FIELD_BYTES = 256  # the memory API's limit for author, author_id, message_id
CHAT_KEY = re.compile(r"[A-Za-z0-9:_\-.]{1,128}")  # the memory API's chat keys


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
    cut: bool = False  # its text was over MAX_TEXT_BYTES: cut to fit (the summary counts them)

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


def was_cut(text: str, max_bytes: int) -> bool:
    """True when `clean(text, max_bytes)` cuts `text` (over `max_bytes` of UTF-8)."""
    if len(text) <= max_bytes // 4:  # fits whatever its characters: most messages stop here
        return False
    return len(text.encode("utf-8", "surrogatepass")) > max_bytes


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
# A file up to this size is parsed by orjson in one call (`_whole`): its check pass takes ~6%
# less CPU than streamed (ijson's C parser is fast too; the guard reads the file either way).
# Its objects take about 7x an export's size, more for a file of tiny values (`{}`: 2 bytes,
# ~70 in memory): one whose values may take more than WHOLE_MEMORY_BYTES is streamed.
WHOLE_FILE_BYTES = 64 * 1024 * 1024
WHOLE_MEMORY_BYTES = 512 * 1024 * 1024
VALUE_BYTES = 100  # what a value (after a comma, or a container) may take parsed, at most
_DIGITS = bytes(48 if 48 <= c <= 57 else 120 for c in range(256))  # 0-9 -> "0", the rest -> "x"
_LONG = b"0" * 19  # a run of 19 digits or more: an integer maybe past 64 bits, or in a string
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
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as signed bytes: +1 opens, -1 closes


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
            marks = buf.translate(None, _NOT_QUOTE_OR_BRACKET)
            odd = marks.count(b'"') % 2  # an odd count: the last string is still open
            self.open_string = buf[buf.rfind(b'"') :] if odd else b""
            # Most strings hold no bracket: then the quotes pair up as `""` and go in one replace
            # (no quote left proves it); else each string is cut out by a split.
            brackets = (marks[: marks.rfind(b'"')] if odd else marks).replace(b'""', b"")
            if b'"' in brackets:
                brackets = b"".join(marks.split(b'"')[::2])
        if not self._follow(brackets):
            self._follow_one_by_one(brackets)
        if self.began >= 0 and self.offset + len(data) - self.began > MAX_ITEM_BYTES + CHUNK:
            what = f"{self.items}[{self.index}] is bigger than {MAX_ITEM_BYTES} bytes"
            raise ExportError(self.path, f"{what}: not an export")

    def _follow(self, brackets: bytes) -> bool:
        """`_follow_one_by_one` done by C loops over the depths after each bracket (about 5x
        faster); False, with nothing changed, when they leave 0..MAX_DEPTH (then that one says why)."""
        if not brackets:
            return True
        steps = list(accumulate(array("b", brackets.translate(_STEPS)), initial=self.depth))
        if max(steps) > MAX_DEPTH or min(steps) < 0:
            return False
        depths = bytes(steps)
        # (a, b) in `depths`: the bracket between them opened (b = a + 1) or closed (b = a - 1).
        item, began = self.item_depth, -1
        new_list = depths.rfind(bytes((item - 2, item - 1))) if item >= 2 else -1
        opened = depths.count(bytes((item - 1, item)), new_list + 1)  # items opened since
        self.index = (-1 if new_list >= 0 else self.index) + opened
        last_open = depths.rfind(bytes((item - 1, item))) if item >= 1 else -1
        last_close = max(depths.rfind(bytes((d, d - 1))) for d in range(1, item + 1)) if item >= 1 else -1
        if last_open > last_close:
            began = self.offset
        elif last_close > last_open:
            began = -1
        else:  # neither: as it was
            began = self.began
        self.depth, self.began = depths[-1], began
        return True

    def _follow_one_by_one(self, brackets: bytes) -> None:
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
    """The values at `prefix` (ijson syntax, "messages.item"), parsed one at a time (or all at
    once, by `_whole`, when that gives the same values)."""
    whole = _whole(path, prefix)
    if whole is not None:
        if seen is not None:
            seen(path.stat().st_size)
        yield from whole
        return
    depth = prefix.count(".") + 2  # the top object is 1: "messages.item" opens at 3
    with open(path, "rb") as f:
        guard = _Guarded(path, f, seen, depth, prefix.rsplit(".", 1)[0])
        try:
            yield from ijson.items(guard, prefix, use_float=True, buf_size=CHUNK)
        except (ijson.JSONError, UnicodeDecodeError) as err:
            raise broken(path, err, guard.start) from None


def _whole(path: Path, prefix: str) -> list[Any] | None:
    """The values at `prefix` ("messages.item") of a file of at most WHOLE_FILE_BYTES, parsed
    by orjson in one call; None (stream it) when streaming could read it otherwise or refuse it.

    So the same file gives the same values or the same error either way: the guard reads the
    whole file first as it reads a stream (a refusal: streamed, which says what comes first),
    and what orjson reads but ijson's yajl does not (integers past 64 bits: floats to orjson)
    or reads otherwise (a second `messages` key: both lists to ijson) is streamed too.
    """
    key, _, item = prefix.partition(".")
    if item != "item" or path.stat().st_size > WHOLE_FILE_BYTES:
        return None
    data = path.read_bytes()
    values = data.count(b",") + data.count(b"{") + data.count(b"[")  # at most this many values
    if VALUE_BYTES * values + 2 * len(data) > WHOLE_MEMORY_BYTES:
        return None
    guard = _Guarded(path, io.BytesIO(data), None, 3, key)
    try:
        while guard.read():
            pass
    except ExportError:
        return None
    if data.count(b'"%s"' % key.encode()) != 1 or _long_integer(data):
        return None
    collecting = gc.isenabled()
    gc.disable()  # millions of new objects, none of them garbage: no collection is worth its time
    try:
        top = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    finally:
        if collecting:
            gc.enable()
    items = top.get(key) if type(top) is dict else None
    return items if type(items) is list else None


def _long_integer(data: bytes) -> bool:
    """Whether `data` (valid JSON) may hold an integer that ijson's yajl refuses: past
    2**63 - 1 either way (orjson reads it). A run of 19 digits or more right after a quote
    is in a string (an id), only text."""
    digits = data.translate(_DIGITS)
    at = digits.find(_LONG)
    while at >= 0:
        end = digits.find(b"x", at)
        end = len(data) if end < 0 else end
        if not data[max(at - 64, 0) : at].rstrip(b" \t\r\n-").endswith(b'"') and (
            end - at > 19 or int(data[at:end]) > 2**63 - 1
        ):
            return True
        at = digits.find(_LONG, end)
    return False


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
    """An ExportError for a file that is not valid JSON (or UTF-8), with the line and column."""
    what, line, col = locate(path, err, chunk, MAX_DEPTH)
    return ExportError(path, what, line, col)


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
