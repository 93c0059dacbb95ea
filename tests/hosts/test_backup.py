"""`chatbot memory backup|restore`: a copy taken while the host serves restores to a sound memory."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import httpx
import pytest

from bot.cli import main
from memory_worker import backup as backup_module
from memory_worker.backup import BackupError, backup, restore, verify
from memory_worker.local.storage import FolderInUse
from tests.support import TOKEN, LocalBackend, local_memory, stored_messages, wait_until

CHATS = [f"telegram:-100{i}" for i in range(12)]


def said(chat: str, i: int) -> str:
    return f"note {i} in {chat.replace(':', ' ')} word{i}x"


mem = pytest.fixture(local_memory, name="mem")


async def _load(mem, chat: str, stop: asyncio.Event, sent: dict[str, int]) -> None:
    """One person talking in one chat, a message at a time, until told to stop."""
    # A client of its own: tasks sharing one httpx pool can starve one of them for seconds.
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=mem.host.url, trust_env=False, timeout=30, headers=headers) as http:

        async def turn(text: str, message_id: str) -> None:
            body = {"text": text, "author": "Ada", "author_id": "7", "message_id": message_id}
            answer = await http.post(f"/v1/chats/{chat}/turn", json=body)
            assert answer.status_code == 200, answer.text

        await turn("my name is Ada and I live in Oslo", "m0")
        i = 1
        while not stop.is_set():
            await turn(said(chat, i), f"m{i}")
            sent[chat] = i
            i += 1


async def test_a_backup_taken_under_load_restores_to_a_sound_memory(mem, tmp_path, monkeypatch):
    stop, sent = asyncio.Event(), {}
    load = [asyncio.create_task(_load(mem, chat, stop, sent)) for chat in CHATS]
    await wait_until(lambda: len(sent) == len(CHATS) and min(sent.values()) >= 3, timeout=30, what="load")
    before = dict(sent)
    copy, copied = backup_module._copy, []

    def copy_while_writing(source, target):
        # Between two chats' copies the host must have taken more writes in every chat.
        if copied:
            mark = dict(sent)
            deadline = time.monotonic() + 20
            while any(sent[c] == mark[c] for c in CHATS) and time.monotonic() < deadline:
                time.sleep(0.005)  # a poll with a deadline, in the backup's own thread
        copied.append(source)
        return copy(source, target)

    monkeypatch.setattr(backup_module, "_copy", copy_while_writing)
    report = await asyncio.to_thread(backup, mem.data_dir, tmp_path / "backup")
    during = {chat: sent[chat] - before[chat] for chat in CHATS}
    stop.set()
    await asyncio.gather(*load)
    assert report.chats == len(CHATS)
    assert min(during.values()) > 0  # every chat took writes while the copy was taken

    manifest = verify(tmp_path / "backup")
    assert sorted(e["chat_key"] for e in manifest["chats"]) == sorted(CHATS)
    restored = tmp_path / "restored"
    restore(tmp_path / "backup", restored)
    await mem.close()
    again = await LocalBackend(restored).start()
    try:
        for chat in CHATS:
            rows = stored_messages(restored, chat)
            n = len(rows) - 1
            # One snapshot per chat: the messages up to some point, none missing, none torn.
            assert before[chat] <= n <= sent[chat]
            expected = ["my name is Ada and I live in Oslo"] + [said(chat, i) for i in range(1, n + 1)]
            assert [r["text"] for r in rows] == expected
            assert (await again.stats(chat))["total_messages"] == n + 1
            assert (await again.search(chat, f"word{n}x"))[0]["message_id"] == f"m{n}"
            facts = (await again.ok("GET", f"/v1/chats/{chat}/facts"))["facts"]
            assert {f["key"] for f in facts} >= {"name", "location"}
            # It goes on where it stopped: a repeated message id is not stored twice.
            await again.turn(chat, said(chat, n), author="Ada", author_id="7", message_id=f"m{n}")
            await again.turn(chat, "and now something new", author="Ada", author_id="7", message_id="new")
            assert (await again.stats(chat))["total_messages"] == n + 2
    finally:
        await again.close()


async def test_restore_refuses_a_folder_in_use_unless_forced(mem, tmp_path):
    await mem.turn(CHATS[0], "hello there", author="Ada", author_id="7", message_id="a")
    backup(mem.data_dir, tmp_path / "b1")
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("x")
    with pytest.raises(BackupError, match="not empty: add --force"):
        restore(tmp_path / "b1", target)
    assert (target / "keep.txt").exists()
    restore(tmp_path / "b1", target, force=True)
    assert not (target / "keep.txt").exists()
    assert [r["text"] for r in stored_messages(target, CHATS[0])] == ["hello there"]


async def test_a_damaged_backup_is_refused_before_anything_changes(mem, tmp_path):
    await mem.turn(CHATS[0], "hello there", author="Ada", author_id="7", message_id="a")
    backup(mem.data_dir, tmp_path / "b")
    entry = json.loads((tmp_path / "b" / "manifest.json").read_text())["chats"][0]
    damaged = tmp_path / "b" / entry["file"]
    data = bytearray(damaged.read_bytes())
    data[4096 : 4096 + 2000] = b"\xff" * 2000  # page 2 onwards: a torn copy
    damaged.write_bytes(bytes(data))
    with pytest.raises(BackupError, match="is damaged"):
        restore(tmp_path / "b", tmp_path / "target")
    assert not (tmp_path / "target").exists()
    damaged.unlink()
    with pytest.raises(BackupError, match="incomplete"):
        verify(tmp_path / "b")


async def test_backup_refuses_a_used_destination_and_a_folder_without_memory(mem, tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    with pytest.raises(BackupError, match="not empty"):
        backup(mem.data_dir, tmp_path / "used")
    with pytest.raises(BackupError, match="holds no memory"):
        backup(tmp_path / "nothing", tmp_path / "b")
    assert not (tmp_path / "b").exists()
    with pytest.raises(BackupError, match="not a backup"):
        restore(tmp_path / "used", tmp_path / "target")


async def test_the_copy_is_one_self_contained_file_per_chat(mem, tmp_path):
    for chat in CHATS[:3]:
        await mem.turn(chat, "hello there", author="Ada", author_id="7", message_id="a")
    backup(mem.data_dir, tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith(("-wal", "-shm"))]
    for entry in json.loads((tmp_path / "b" / "manifest.json").read_text())["chats"]:
        conn = sqlite3.connect(tmp_path / "b" / entry["file"])
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        conn.close()


def test_the_cli_backs_up_and_restores(tmp_path, capsys):
    async def write() -> None:
        backend = await LocalBackend(tmp_path / "memory").start()
        try:
            await backend.turn(CHATS[0], "hello there", author="Ada", author_id="7", message_id="a")
        finally:
            await backend.close()

    asyncio.run(write())
    assert main(["memory", "backup", str(tmp_path / "b"), "--data", str(tmp_path / "memory")]) == 0
    assert capsys.readouterr().out.startswith("backed up 1 chats")
    assert main(["memory", "restore", str(tmp_path / "b"), "--data", str(tmp_path / "memory")]) == 1
    assert "add --force" in capsys.readouterr().err
    assert (
        main(["memory", "restore", str(tmp_path / "b"), "--data", str(tmp_path / "memory"), "--force"]) == 0
    )
    assert capsys.readouterr().out.startswith("restored 1 chats")
    assert [r["text"] for r in stored_messages(tmp_path / "memory", CHATS[0])] == ["hello there"]


async def test_restore_refuses_while_a_host_serves_the_folder(mem, tmp_path):
    """Issue 24, finding 4: restore exited 0 under a running host, whose writes were then lost."""
    await mem.turn(CHATS[0], "hello there", author="Ada", author_id="7", message_id="a")
    backup(mem.data_dir, tmp_path / "b")
    await mem.turn(CHATS[0], "said after the backup", author="Ada", author_id="7", message_id="b")
    with pytest.raises(FolderInUse, match="in use by another chatbot process"):
        restore(tmp_path / "b", mem.data_dir, force=True)
    assert main(["memory", "restore", str(tmp_path / "b"), "--data", str(mem.data_dir), "--force"]) == 2
    assert len(stored_messages(mem.data_dir, CHATS[0])) == 2  # nothing was replaced
    await mem.close()  # stopped: now it may
    restore(tmp_path / "b", mem.data_dir, force=True)
    assert [r["text"] for r in stored_messages(mem.data_dir, CHATS[0])] == ["hello there"]


async def _two_chats(mem, tmp_path):
    for chat in CHATS[:2]:
        await mem.turn(chat, f"secret of {chat}", author="Ada", author_id="7", message_id="a")
    backup(mem.data_dir, tmp_path / "b")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    return [tmp_path / "b" / e["file"] for e in manifest["chats"]]


async def test_a_chat_file_under_another_chats_name_is_refused(mem, tmp_path):
    """Issue 24, finding 5: the key stored in a file was never checked."""
    first, second = await _two_chats(mem, tmp_path)
    data = first.read_bytes()
    second.write_bytes(data)  # the same size is not enough: the file says whose it is
    with pytest.raises(BackupError, match="holds the chat of another name"):
        restore(tmp_path / "b", tmp_path / "target")
    assert not (tmp_path / "target").exists()


async def test_an_emptied_chat_file_is_refused(mem, tmp_path):
    first, _ = await _two_chats(mem, tmp_path)
    first.write_bytes(b"")
    with pytest.raises(BackupError, match="bytes, the manifest says"):
        restore(tmp_path / "b", tmp_path / "target")
    assert not (tmp_path / "target").exists()


async def test_a_symlink_in_a_backup_is_never_followed(mem, tmp_path):
    first, _ = await _two_chats(mem, tmp_path)
    elsewhere = tmp_path / "elsewhere.sqlite3"
    first.rename(elsewhere)
    first.symlink_to(elsewhere)
    with pytest.raises(BackupError, match="is a symbolic link"):
        restore(tmp_path / "b", tmp_path / "target")
    assert not (tmp_path / "target").exists()
    first.unlink()
    elsewhere.rename(first)
    folder = first.parent
    moved = tmp_path / "moved"
    folder.rename(moved)
    folder.symlink_to(moved)  # a linked folder too
    with pytest.raises(BackupError, match="is a symbolic link"):
        restore(tmp_path / "b", tmp_path / "target")
