"""`chatbot import discord`: DiscordChatExporter JSON into memory, under the live adapter's keys."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.adapters.discord.adapter import Translator
from bot.cli import main
from bot.config import settings_from
from bot.importers import run
from bot.importers.common import ExportError
from bot.importers.run import import_export
from tests.support import TOKEN, local_memory, stored_messages

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
GUILD = EXPORTS / "discord_guild.json"
DM = EXPORTS / "discord_dm.json"
KEY = "discord:5001"
B = 1100000000000000000

GUILD_TEXTS = [
    (B + 1, "81", "Ada L.", "Hello! I live in Oslo", "2024-03-01T10:00:00.123Z"),
    (B + 2, "82", "bob", "Welcome @Ada L.", "2024-03-01T10:01:00.000Z"),  # +02:00 in the export
    (B + 3, "81", "Ada L.", "I like sailing (fixed typo)", "2024-03-01T10:02:00.000Z"),
    (B + 7, "82", "bob", "look [photo cat.png] [file notes.pdf]", "2024-03-01T10:06:00.000Z"),
    (B + 8, "81", "Ada L.", "[sticker Wave]", "2024-03-01T10:07:00.000Z"),
    (B + 9, "82", "bob", "Fjord trip Photos from the weekend", "2024-03-01T10:08:00.000Z"),
    (B + 10, "81", "Ada L.", "raw mention @bob and @99", "2024-03-01T10:09:00.000Z"),
    (B + 11, "82", "bob", "[forwarded] Ferry times changed", "2024-03-01T10:10:00.000Z"),
    (
        B + 12,
        "456226577798135808",
        "Deleted User",
        "this account was deleted later",
        "2024-03-01T10:11:00.000Z",
    ),
    (B + 15, "82", "bob", "Ünïcödé ✓ 日本語 🧭", "2024-03-01T10:14:00.000Z"),
]


def settings(url: str, scope: str = "chat"):
    return settings_from({"bot": {"memory_scope": scope}}, {"MEMORY_URL": url, "MEMORY_API_TOKEN": TOKEN})


mem = pytest.fixture(local_memory, name="mem")


async def imported(mem, path: Path, scope: str = "chat", **kw) -> run.ImportReport:
    assert mem.host is not None
    return await import_export(
        "discord", path, settings(mem.host.url, scope), mem.data_dir, out=io.StringIO(), **kw
    )


async def test_every_shape_of_a_channel_export(mem):
    report = await imported(mem, GUILD)
    # joins, pins, a thread start, a bot and a blank message carry nothing to keep
    assert (report.imported, report.skipped, report.empty) == (10, 0, 5)
    rows = stored_messages(mem.data_dir, KEY)
    assert [
        (int(r["message_id"]), r["author_id"], r["author"], r["text"], r["ts"]) for r in rows
    ] == GUILD_TEXTS
    assert (await mem.search(KEY, "Oslo"))[0]["message_id"] == str(B + 1)


async def test_a_second_import_imports_nothing_and_a_folder_holds_many_channels(mem, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    for f in (GUILD, DM):
        (folder / f.name).write_bytes(f.read_bytes())
    first = await imported(mem, folder)
    assert set(first.chats) == {KEY, "discord:6001"} and first.imported == 12
    again = await imported(mem, folder)
    assert (again.imported, again.skipped) == (0, 12)


async def test_keys_are_the_live_adapters_keys(mem):
    for scope in ("chat", "user"):
        live = Translator(settings("http://unused", scope))
        plan = run.check("discord", GUILD, chat=None, scope=scope, progress=False)
        expected = {live.chat_key(5001, 81), live.chat_key(5001, 82), live.chat_key(5001, 456226577798135808)}
        assert set(plan.messages) == expected
        plan = run.check("discord", DM, chat=None, scope=scope, progress=False)
        assert set(plan.messages) == {live.chat_key(6001, 82), live.chat_key(6001, 81)}


async def test_a_truncated_file_is_refused_with_its_line(mem, tmp_path):
    cut = tmp_path / "general.json"
    data = GUILD.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ExportError) as refused:
        await imported(mem, cut)
    assert refused.value.line == cut.read_text().count("\n") + 1
    assert stored_messages(mem.data_dir, KEY) == []


async def test_a_message_without_a_timestamp_is_named(mem, tmp_path):
    export = json.loads(GUILD.read_text())
    del export["messages"][4]["timestamp"]
    bad = tmp_path / "general.json"
    bad.write_text(json.dumps(export))
    with pytest.raises(ExportError, match=r"channel 'Sailing #general': messages\[4\] has no `timestamp`"):
        await imported(mem, bad)
    assert stored_messages(mem.data_dir, KEY) == []


async def test_forgetme_removes_the_imported_messages_of_that_person(mem):
    await imported(mem, GUILD)
    await mem.ok("DELETE", f"/v1/chats/{KEY}/authors/81")
    rows = stored_messages(mem.data_dir, KEY)
    assert len(rows) == 6 and "81" not in {r["author_id"] for r in rows}
    assert await mem.search(KEY, "Oslo") == []


def test_the_cli_refuses_a_telegram_file(tmp_path, capsys):
    telegram = EXPORTS / "telegram_supergroup.json"
    assert main(["import", "discord", str(telegram), "--data", str(tmp_path)]) == 2
    assert "not a DiscordChatExporter JSON export" in capsys.readouterr().err


async def test_a_channel_id_in_other_digits_is_refused(mem, tmp_path):
    """Issue 24, finding 8: "٣٣" passed isdigit() and made a chat key the worker refuses."""
    export = json.loads(GUILD.read_text())
    export["channel"]["id"] = "\u0663\u0663\u0663"
    bad = tmp_path / "general.json"
    bad.write_text(json.dumps(export))
    for dry in (True, False):
        with pytest.raises(ExportError, match="channel: `id` is not a Discord id"):
            await imported(mem, bad, dry_run=dry)


async def test_an_author_id_the_worker_would_refuse_is_refused_before_sending(mem, tmp_path):
    export = json.loads(GUILD.read_text())
    export["messages"][0]["author"]["id"] = "9" * 300
    bad = tmp_path / "general.json"
    bad.write_text(json.dumps(export))
    with pytest.raises(ExportError, match=r"messages\[0\]: `author.id` is over 256 bytes"):
        await imported(mem, bad)
    assert stored_messages(mem.data_dir, KEY) == []
