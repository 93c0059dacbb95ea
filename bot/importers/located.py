"""Where an export that is not valid JSON breaks: the line and column, found with flat memory."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import BinaryIO

import ijson

CHUNK = 64 * 1024


def locate(path: Path, err: Exception, chunk: int, max_depth: int) -> tuple[str, int, int]:
    """What is wrong, and its line and column: the parse is run again up to the chunk at
    fault (`chunk`, its first byte), then byte by byte (memory stays flat)."""
    if isinstance(err, UnicodeDecodeError):
        offset = _first_bad_utf8(path)
        line, col = _line_col(path, offset)
        return f"not UTF-8 text (byte {offset})", line, col
    what = str(err).strip().splitlines()[0] if str(err).strip() else "not JSON"
    offset = _error_offset(path, chunk, max_depth)
    line, col = _line_col(path, offset)
    return f"not valid JSON: {what}", line, col


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


def _error_offset(path: Path, chunk: int, max_depth: int) -> int:
    with open(path, "rb") as f:
        slow = _Slow(f, chunk)
        try:
            depth = 0
            for event, _ in ijson.basic_parse(slow, buf_size=CHUNK):
                depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
                if depth > max_depth:
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
