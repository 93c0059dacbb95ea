"""Hostile export files (issue 24, finding 1): bounded memory whatever the file, clear refusals.

The real `chatbot import ... --dry-run` runs in a child process under an address-space cap,
and its peak RSS (`os.wait4`) must stay under BOUND_MB; a file that explodes hits the cap and
fails the test instead of the machine.
"""

from __future__ import annotations

import io
import json
import random

import pytest

from bot.config import settings_from
from bot.importers import common, discord
from bot.importers.common import MAX_DEPTH, MAX_TEXT_BYTES, MAX_TOKEN_BYTES, ExportError
from bot.importers.run import check, import_export
from tests.support.hostile import mentions, nested, nested_discord, peak_rss

BOUND_MB = 200
CAP_MB = 2048


@pytest.mark.parametrize(("platform", "make"), [("telegram", nested), ("discord", nested_discord)])
def test_deep_nesting_is_refused_with_bounded_memory(tmp_path, platform, make):
    bad = tmp_path / "result.json"
    bad.write_bytes(make(200_000))  # 400 KB that took 24 GB
    mb, code, last = peak_rss(platform, bad, CAP_MB)
    assert code == 2, last
    assert f"nested more than {MAX_DEPTH} levels" in last and "nothing was imported" in last
    assert mb < BOUND_MB, f"peak RSS {mb:.0f} MB"


def test_mentions_are_not_expanded_beyond_the_text_limit(tmp_path):
    bad = tmp_path / "general.json"
    bad.write_bytes(mentions())
    mb, code, last = peak_rss("discord", bad, CAP_MB)
    assert code == 0, last
    assert mb < BOUND_MB, f"peak RSS {mb:.0f} MB"
    (source,) = discord.sources(bad)
    (record,) = list(source.records())
    assert record is not None and len(record.text.encode()) <= MAX_TEXT_BYTES
    assert record.text.startswith("@xxx")


def test_a_big_refused_file_is_located_without_reading_it_whole(tmp_path):
    sparse = tmp_path / "result.json"
    with open(sparse, "wb") as f:
        f.write(b'{"name": "x",\n "type": ')
        f.truncate(500 * 1024 * 1024)  # zeros: not JSON from byte 23 on
    mb, code, last = peak_rss("telegram", sparse, CAP_MB)
    assert code == 2 and f"{sparse}:2:10: not valid JSON" in last, last
    assert mb < BOUND_MB, f"peak RSS {mb:.0f} MB"


def test_a_string_longer_than_any_export_has_is_refused(tmp_path):
    chat = {"name": "g", "type": "private_supergroup", "id": 7, "messages": [{"id": 1, "text": "a" * 10}]}
    data = json.dumps(chat).replace('"a', '"' + "b" * (MAX_TOKEN_BYTES + 10) + "a")
    bad = tmp_path / "result.json"
    bad.write_text(data)
    with pytest.raises(ExportError, match="a value longer than"):
        check("telegram", bad, chat=None, scope="chat", progress=False)
    # escaped quotes do not hide it
    bad.write_text(data.replace("b" * 100, '\\"' * 50))
    with pytest.raises(ExportError, match="a value longer than"):
        check("telegram", bad, chat=None, scope="chat", progress=False)


# The item limit scaled down 16 times (8 MiB -> 512 KiB), and the files with it: the same
# reading refuses them, in a fraction of the time 12 MB of JSON takes to parse.
SMALL_ITEM_BYTES = 512 * 1024


def test_a_message_bigger_than_any_export_has_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_ITEM_BYTES", SMALL_ITEM_BYTES)
    entities = [{"type": "plain", "text": "x"}] * 25_000  # ~750 KB in one message
    chat = {"name": "g", "type": "private_supergroup", "id": 7, "messages": [{"id": 1, "text": entities}]}
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps(chat))
    with pytest.raises(ExportError, match=rf"messages\[0\] is bigger than {SMALL_ITEM_BYTES} bytes"):
        check("telegram", bad, chat=None, scope="chat", progress=False)
    fits = {"id": 1, "type": "message", "date": "2023-11-14T22:10:00", "from": "Ann", "from_id": "user1"}
    good = tmp_path / "fits.json"  # ~450 KB: under the limit, read
    good.write_text(json.dumps({**chat, "messages": [{**fits, "text": entities[:15_000]}]}))
    check("telegram", good, chat=None, scope="chat", progress=False)


def test_a_header_field_is_checked_too(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_ITEM_BYTES", SMALL_ITEM_BYTES)
    chat = {"name": ["x"] * 200_000, "type": "private_supergroup", "id": 7, "messages": []}  # ~1 MB
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps(chat))
    with pytest.raises(ExportError, match=f"`name` is bigger than {SMALL_ITEM_BYTES} bytes"):
        check("telegram", bad, chat=None, scope="chat", progress=False)


async def test_dry_run_and_the_real_import_refuse_alike(tmp_path):
    bad = tmp_path / "result.json"
    bad.write_bytes(nested(1000))
    settings = settings_from({}, {"MEMORY_URL": "http://127.0.0.1:9", "MEMORY_API_TOKEN": "t"})
    for dry in (True, False):  # refused before the memory is ever contacted
        with pytest.raises(ExportError, match="nested more than"):
            await import_export("telegram", bad, settings, tmp_path, dry_run=dry, out=io.StringIO())


def _deepest(data: bytes) -> int:
    """The deepest nesting outside strings, read byte by byte (slow and plain)."""
    depth, deepest, in_string, escaped = 0, 0, False, False
    for byte in data:
        if in_string:
            escaped, in_string = (False, True) if escaped else (byte == 0x5C, byte != 0x22)
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


PIECES = ['"a[b"', '"{{"', '"}]"', '"x\\\\"', '"q\\"["', '"\\\\\\"]"', '"é{"', "[", "]", "1"]


@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_the_guard_follows_the_nesting_outside_strings_wherever_chunks_are_cut(
    monkeypatch, tmp_path, chunk, whole
):
    """Strings are found by splitting at quotes, or by a regex when a chunk holds an escaped
    quote: brackets inside them never count, whichever way and wherever a chunk ends, and
    whether the file is streamed or read whole."""
    monkeypatch.setattr(common, "CHUNK", chunk)
    monkeypatch.setattr(common, "WHOLE_FILE_BYTES", 2**30 if whole else 0)
    rnd = random.Random(chunk)
    path = tmp_path / "result.json"
    for case in range(120):
        pool = [p for p in PIECES if case % 2 or "\\" not in p]  # half: no escaped quote at all
        depth = rnd.randint(MAX_DEPTH - 8, MAX_DEPTH - 2)  # near the limit: some cross it
        body = ["["] * depth
        for _ in range(rnd.randint(1, 60)):
            piece = rnd.choice(pool)
            if (piece == "]" and depth == 0) or (piece == "[" and depth > MAX_DEPTH):
                continue
            depth += (piece == "[") - (piece == "]")
            if body and body[-1] not in ("[", ",") and piece != "]":
                body.append(",")
            body.append(piece)
        messages = "[" + "".join(body) + "]" * depth + "]"
        data = ('{"messages": ' + messages + "}").encode()
        path.write_bytes(data)
        if _deepest(data) > MAX_DEPTH:
            with pytest.raises(ExportError, match="nested more than"):
                list(common.stream_items(path, "messages.item"))
        else:
            assert list(common.stream_items(path, "messages.item")) == json.loads(data)["messages"]
