"""Issue 40, probe item 3: no terminal escape from an export's names reaches the terminal.

A chat, guild or channel name is printed in the import summary (and in the list of chats
when `--chat` names none); a reminder's text is printed by the console. Escape sequences
(a window title, a cleared screen, colours) and other control characters must not pass.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.adapters.reminder_sends import console_send
from bot.config import settings_from
from bot.importers.common import ExportError
from bot.importers.run import import_export

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
EVIL = "\x1b]0;pwned\x07\x1b[2J\x1b[31mClub\u202e\x9b31m\r\nfake: line"


def _clean(shown: str, *, names: bool = True) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert bad not in shown, repr(shown)
    if names:  # a name is one line: it cannot start a line of its own
        assert not any(line.startswith("fake: line") for line in shown.splitlines()), shown


def _telegram(tmp_path: Path) -> Path:
    data = json.loads((EXPORTS / "telegram_supergroup.json").read_text())
    data["name"] = EVIL
    path = tmp_path / "tg.json"
    path.write_text(json.dumps(data))
    return path


def _discord(tmp_path: Path) -> Path:
    data = json.loads((EXPORTS / "discord_guild.json").read_text())
    data["guild"]["name"] = EVIL
    data["channel"]["name"] = EVIL
    path = tmp_path / "dc.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("platform,make", [("telegram", _telegram), ("discord", _discord)])
@pytest.mark.parametrize("dry_run", [True, False])
async def test_the_import_summary_prints_no_escape(tmp_path, platform, make, dry_run):
    out = io.StringIO()
    report = await import_export(
        platform, make(tmp_path), settings_from({}, {}), tmp_path / "memory", dry_run=dry_run, out=out
    )
    shown = out.getvalue()
    assert report.chats and "Club" in shown
    _clean(shown)


@pytest.mark.parametrize("platform,make", [("telegram", _telegram), ("discord", _discord)])
async def test_the_list_of_chats_in_an_error_prints_no_escape(tmp_path, platform, make):
    with pytest.raises(ExportError) as err:
        await import_export(
            platform,
            make(tmp_path),
            settings_from({}, {}),
            tmp_path / "m",
            chat="nope",
            dry_run=True,
            out=io.StringIO(),
        )
    assert "Club" in str(err.value)
    _clean(str(err.value))


async def test_a_reminder_printed_by_the_console_carries_no_escape():
    out = io.StringIO()
    send = console_send(out, "console:ada")
    await send("console:ada", f"Reminder for Ada: {EVIL}", "k1")
    assert "Reminder for Ada" in out.getvalue() and "Club" in out.getvalue()
    _clean(out.getvalue(), names=False)  # a reminder's own line breaks may stay
