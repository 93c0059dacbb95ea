"""Files the bot and the host create are their user's alone (issue 24, finding 6).

The tests run with the usual umask 022, under which everything came out 0644 in 0755
folders: chat databases, their WAL, the outbox, exports and backups.
"""

from __future__ import annotations

import configparser
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.console import ConsoleSession
from bot.chat.memory.outbox import Outbox
from bot.chat.types import CommandResult, File
from memory_worker.backup import backup, restore
from tests.support import REPO, LocalBackend

UNITS = REPO / "deploy" / "systemd"


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def loose(root: Path) -> list[str]:
    """Every file or folder under `root` (and itself) that someone else may read."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{path.relative_to(root.parent)} {mode:o}")
    return found


async def test_the_hosts_files_and_its_backups_are_private(tmp_path):
    data = tmp_path / "memory"
    host = await LocalBackend(data).start()
    try:
        await host.turn(
            "telegram:1", "my address is 1 Elm Street", author="Ada", author_id="1", message_id="a"
        )
        assert any(p.name.endswith("-wal") for p in data.rglob("*"))
        assert loose(data) == []
        backup(data, tmp_path / "b")
    finally:
        await host.close()
    assert loose(tmp_path / "b") == []
    restore(tmp_path / "b", tmp_path / "restored")
    assert loose(tmp_path / "restored") == []


def test_the_outbox_is_private(tmp_path):
    with Outbox(tmp_path / "bot" / "outbox.sqlite3") as box:
        box.add("telegram:1", "turn", {"text": "my address is 1 Elm Street", "author_id": "1"})
        assert loose(tmp_path / "bot") == []


def test_an_export_saved_by_the_console_is_private(tmp_path):
    session = ConsoleSession(None, "console:local", data_dir=tmp_path / "exports")  # type: ignore[arg-type]
    session.render(CommandResult("here it is", files=(File("export.json", b"{}"),)))
    assert loose(tmp_path / "exports") == []


def test_the_cli_makes_private_files_whatever_the_umask(tmp_path):
    data = tmp_path / "memory"
    (data / "chats").mkdir(parents=True)
    code = subprocess.run(
        [sys.executable, "-m", "bot.cli", "memory", "backup", str(tmp_path / "b"), "--data", str(data)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert code.returncode == 0, code.stderr
    assert loose(tmp_path / "b") == []


@pytest.mark.parametrize("unit", sorted(p.name for p in UNITS.glob("*.service")))
def test_the_systemd_units_say_so(unit):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(UNITS / unit)
    assert parser["Service"].get("UMask") == "0077"
    assert parser["Service"].get("StateDirectoryMode") == "0700"
