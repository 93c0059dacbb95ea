"""An export small enough is parsed whole by orjson (`common._whole`): the same records, the same
spool bytes and the same refusals as the streamed reading, whatever the file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bot.importers import common, run
from bot.importers.common import ExportError

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
FILES = [
    ("telegram", EXPORTS / "telegram_supergroup.json"),
    ("discord", EXPORTS / "discord_guild.json"),
    ("discord", EXPORTS / "discord_dm.json"),
]


def outcome(platform: str, path: Path, tmp_path: Path, whole: bool, monkeypatch) -> tuple[str, bytes]:
    """What `check` gives for the file: ("ok", the spool's bytes) or ("refused", the error)."""
    monkeypatch.setattr(common, "WHOLE_FILE_BYTES", 128 * 1024 * 1024 if whole else 0)
    with open(tmp_path / f"spool-{whole}", "w+b") as spool:
        try:
            run.check(platform, path, chat=None, scope="chat", progress=False, spool=spool)
        except ExportError as err:
            return "refused", str(err).encode()
        spool.seek(0)
        return "ok", spool.read()


@pytest.mark.parametrize(("platform", "path"), FILES, ids=lambda v: getattr(v, "name", v))
def test_a_good_export_is_read_whole_into_the_same_spool(platform, path, tmp_path, monkeypatch):
    assert common._whole(path, "messages.item") is not None  # the whole reading is the one taken
    streamed = outcome(platform, path, tmp_path, False, monkeypatch)
    whole = outcome(platform, path, tmp_path, True, monkeypatch)
    assert streamed[0] == "ok" and streamed[1].count(b'"text"') >= 2
    assert whole == streamed


def _variants(data: bytes, rnd: random.Random) -> list[tuple[str, bytes]]:
    """Broken, odd and hostile versions of a good export."""
    text = data.decode()
    out = [(f"cut at {n}", data[:n]) for n in sorted(rnd.sample(range(1, len(data)), 6))]
    for _ in range(4):
        at = rnd.randrange(len(data))
        out.append((f"bad byte at {at}", data[:at] + b"\xff" + data[at + 1 :]))
        out.append((f"stray bracket at {at}", data[:at] + b"]" + data[at:]))
    first = text.index('"id"', text.index('"messages"'))
    value_end = text.index(",", first)
    for name, value in [
        ("20-digit id", "12345678901234567890"),
        ("19-digit id", "1234567890123456789"),
        ("negative long id", "-99999999999999999999"),
        ("float id", "7.5"),
        ("huge float", "1e400"),
        ("string id", '"12345678901234567890"'),
        ("lone surrogate", '"\\ud800"'),
        ("deep", "[" * 70 + "]" * 70),
        ("not so deep", "[" * 50 + "]" * 50),
        ("long string", '"' + "x" * (common.MAX_TOKEN_BYTES + 5) + '"'),
    ]:
        out.append((name, (text[: first + 5] + " " + value + text[value_end:]).encode()))
    out.append(("second messages key", (text.rstrip()[:-1] + ', "messages": []}').encode()))
    out.append(("messages not a list", text.replace('"messages": [', '"messages": {"a": [', 1).encode()))
    out.append(("a message that is no object", text.replace('"messages": [', '"messages": [7, ', 1).encode()))
    out.append(("trailing garbage", data + b" x"))
    out.append(("BOM", b"\xef\xbb\xbf" + data))
    out.append(("empty", b""))
    out.append(("a list", b"[" + data + b"]"))
    return out


@pytest.mark.parametrize(("platform", "path"), FILES, ids=lambda v: getattr(v, "name", v))
def test_a_broken_export_is_refused_alike_either_way(platform, path, tmp_path, monkeypatch):
    rnd = random.Random(path.name)
    refused = 0
    for name, data in _variants(json.dumps(json.loads(path.read_bytes()), indent=1).encode(), rnd):
        bad = tmp_path / "result.json"
        bad.write_bytes(data)
        streamed = outcome(platform, bad, tmp_path, False, monkeypatch)
        assert outcome(platform, bad, tmp_path, True, monkeypatch) == streamed, name
        refused += streamed[0] == "refused"
    assert refused >= 20  # the variants do test refusals


def test_the_item_limit_holds_when_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_ITEM_BYTES", 64 * 1024)
    entities = [{"type": "plain", "text": "x"}] * 10_000  # ~300 KB in one message
    chat = {"name": "g", "type": "private_supergroup", "id": 7, "messages": [{"id": 1, "text": entities}]}
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps(chat))
    for whole in (False, True):
        kind, said = outcome("telegram", bad, tmp_path, whole, monkeypatch)
        assert kind == "refused" and b"messages[0] is bigger than 65536 bytes" in said


def test_a_file_of_tiny_values_is_streamed_not_parsed_whole(tmp_path, monkeypatch):
    """`{}` is 2 bytes of JSON and ~70 in memory: such a file would take far more than 7x."""
    monkeypatch.setattr(common, "WHOLE_MEMORY_BYTES", 10_000_000)  # (the 600 KB file: ~28 MB parsed)
    tiny = tmp_path / "result.json"
    tiny.write_bytes(
        b'{"name": "g", "type": "private_supergroup", "id": 7, "messages": [' + b"{}," * 200_000 + b"{}]}"
    )
    assert common._whole(tiny, "messages.item") is None
    genuine = tmp_path / "genuine.json"
    genuine.write_bytes(EXPORTS.joinpath("telegram_supergroup.json").read_bytes())
    assert common._whole(genuine, "messages.item") is not None
    streamed = outcome("telegram", tiny, tmp_path, False, monkeypatch)
    assert streamed[0] == "refused" and outcome("telegram", tiny, tmp_path, True, monkeypatch) == streamed
