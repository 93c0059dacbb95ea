"""Issue 40, probe item 2: a tampered backup is refused whole, with a one-line reason.

Each file is checked against the content hash in the manifest (edited or deleted rows), and
each database's schema against what the migrations make: objects (a trigger added, the
search table dropped), `user_version`, the migrations recorded (none from the future), and
`integrity_check`. The schema check holds even when the manifest was rewritten to match.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from bot.cli import main
from memory_worker.backup import BackupError, backup, restore
from tests.support import local_memory, stored_messages

CHAT = "telegram:-1001"
mem = pytest.fixture(local_memory, name="mem")


async def _backed_up(mem, tmp_path: Path) -> Path:
    for i in range(3):
        await mem.turn(CHAT, f"hello number {i}", author="Ada", author_id="7", message_id=f"m{i}")
    backup(mem.data_dir, tmp_path / "b")
    return tmp_path / "b"


def _tamper(src: Path, sql: str, *, manifest: str = "size and hash") -> None:
    """Run `sql` on the backup's chat file; then rewrite the manifest's size (and hash) to match."""
    path = Path(src / "manifest.json")
    data = json.loads(path.read_text())
    entry = data["chats"][0]
    conn = sqlite3.connect(src / entry["file"], isolation_level=None)
    conn.executescript(sql)
    conn.close()
    content = (src / entry["file"]).read_bytes()
    entry["bytes"] = len(content)
    if "hash" in manifest:
        entry["sha256"] = hashlib.sha256(content).hexdigest()
    path.write_text(json.dumps(data))


TRIGGER = (
    "CREATE TRIGGER rewrite AFTER INSERT ON messages BEGIN "
    "UPDATE messages SET text = 'pwned' WHERE id = new.id; END;"
)
SCHEMA_TAMPERING: dict[str, tuple[str, str]] = {
    "a trigger": (TRIGGER, "trigger"),
    "a view": ("CREATE VIEW v AS SELECT 1;", "view"),
    "the search table dropped": ("DROP TABLE messages_fts;", "messages_fts"),
    "a column added": ("ALTER TABLE messages ADD COLUMN evil TEXT;", "messages"),
    "user_version from the future": ("PRAGMA user_version = 99;", "user_version"),
    "a migration from the future": (
        "INSERT INTO schema_migrations VALUES (9999, 'future', '2030-01-01');",
        "9999",
    ),
}


@pytest.mark.parametrize("case", SCHEMA_TAMPERING)
async def test_a_schema_not_made_by_the_migrations_is_refused(mem, tmp_path, case):
    src = await _backed_up(mem, tmp_path)
    sql, named = SCHEMA_TAMPERING[case]
    _tamper(src, sql)  # the manifest rewritten to match: the schema itself must give it away
    with pytest.raises(BackupError, match=named) as err:
        restore(src, tmp_path / "target")
    assert "\n" not in str(err.value) and "nothing was restored" in str(err.value)
    assert not (tmp_path / "target").exists()


ROW_TAMPERING: dict[str, str] = {
    "a row edited": "UPDATE messages SET text = 'hellO number 1' WHERE text = 'hello number 1';",
    "a row deleted": "DELETE FROM messages WHERE text = 'hello number 2';",
}


@pytest.mark.parametrize("case", ROW_TAMPERING)
async def test_edited_or_deleted_rows_are_refused_by_the_content_hash(mem, tmp_path, case):
    src = await _backed_up(mem, tmp_path)
    _tamper(src, ROW_TAMPERING[case], manifest="size")
    with pytest.raises(BackupError, match="content hash"):
        restore(src, tmp_path / "target")
    assert not (tmp_path / "target").exists()


async def test_a_manifest_without_hashes_is_refused(mem, tmp_path):
    src = await _backed_up(mem, tmp_path)
    data = json.loads((src / "manifest.json").read_text())
    for entry in data["chats"]:
        entry.pop("sha256", None)
    (src / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(BackupError, match="content hash"):
        restore(src, tmp_path / "target")


async def test_a_tampered_alarm_table_is_refused(mem, tmp_path):
    src = await _backed_up(mem, tmp_path)
    data = json.loads((src / "manifest.json").read_text())
    if not data.get("alarms"):
        sqlite3.connect(src / "alarms.sqlite3").executescript(
            "CREATE TABLE alarms (chat_key TEXT PRIMARY KEY, due_ms INTEGER NOT NULL);"
        )
        data["alarms"] = True
    conn = sqlite3.connect(src / "alarms.sqlite3", isolation_level=None)
    conn.executescript("CREATE TRIGGER t AFTER INSERT ON alarms BEGIN DELETE FROM alarms; END;")
    conn.close()
    data["alarms_sha256"] = hashlib.sha256((src / "alarms.sqlite3").read_bytes()).hexdigest()
    (src / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(BackupError, match="trigger"):
        restore(src, tmp_path / "target")


async def test_the_cli_refuses_with_one_line_and_exit_1(mem, tmp_path, capsys):
    src = await _backed_up(mem, tmp_path)
    _tamper(src, TRIGGER)
    target = tmp_path / "target"
    assert main(["memory", "restore", str(src), "--data", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trigger" in err
    assert not target.exists()


async def test_an_untouched_backup_still_restores(mem, tmp_path):
    src = await _backed_up(mem, tmp_path)
    restore(src, tmp_path / "target")
    texts = [r["text"] for r in stored_messages(tmp_path / "target", CHAT)]
    assert texts == [f"hello number {i}" for i in range(3)]
