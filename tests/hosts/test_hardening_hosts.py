"""Issue 40, round two of the probe, on the memory hosts: one writer per memory folder (items 9
and 15), one chat's heavy turn does not hold the others (item 13)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memory_engine.engine import ChatMemory
from memory_worker.local import EmbeddedMemoryHost
from memory_worker.local.storage import SERVE_LOCK, FolderInUse, ServeLock
from memory_worker.pyodide_runtime import serve_lock
from tests.support import TOKEN, LocalBackend, clean_env, wait_until
from tests.support.net import ServedMemory

CHATBOT = str(Path(sys.executable).with_name("chatbot"))


def _serve(data: Path) -> subprocess.CompletedProcess[str]:
    """`chatbot memory serve --port 0 --data DATA`, expected to refuse and end by itself."""
    return subprocess.run(
        [CHATBOT, "memory", "serve", "--port", "0", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(MEMORY_API_TOKEN=TOKEN),
    )


def _one_line_refusal(run: subprocess.CompletedProcess[str], holder: str) -> None:
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: the memory folder") and holder in lines[0], lines[0]


async def test_a_second_host_on_a_served_folder_is_refused_with_one_line(tmp_path):
    """Item 9: a second `chatbot memory serve` on a served folder ran, and under load answered
    a 500 (both migrated the same databases)."""
    first = ServedMemory(tmp_path / "memory", TOKEN)
    try:
        await first.start(timeout=60)
        assert first.proc is not None
        second = _serve(tmp_path / "memory")
        _one_line_refusal(second, f"pid {first.proc.pid}, chatbot memory serve")
        assert first.proc.poll() is None  # the first one serves on
    finally:
        first.stop_quietly()


async def test_every_writer_takes_the_one_lock(tmp_path):
    """Item 9: the embedded host (chat, import), a restore and the Pyodide runtime all take the
    same lock, so any one of them refuses while another holds the folder."""
    async with EmbeddedMemoryHost(tmp_path / "memory", summarizer=None):
        with pytest.raises(FolderInUse, match="in use by another chatbot process"):
            async with EmbeddedMemoryHost(tmp_path / "memory", summarizer=None):
                pass
        with pytest.raises(FolderInUse):
            serve_lock(tmp_path / "memory")  # the Pyodide host's lock, passed on to Node
    pyodide = serve_lock(tmp_path / "memory")  # free again once the host stopped
    try:
        with pytest.raises(FolderInUse):
            async with EmbeddedMemoryHost(tmp_path / "memory", summarizer=None):
                pass
    finally:
        pyodide.release()


def test_a_host_started_while_restore_holds_the_folder_says_so_in_one_line(tmp_path):
    """Item 15: a host started during a restore printed a traceback (FolderInUse)."""
    (tmp_path / "memory").mkdir()
    restoring = ServeLock(tmp_path / "memory", holder=f"pid {os.getpid()}, chatbot memory restore")
    try:
        run = _serve(tmp_path / "memory")
    finally:
        restoring.release()
    _one_line_refusal(run, "chatbot memory restore")
    assert (tmp_path / "memory" / SERVE_LOCK).exists()


async def test_one_chats_heavy_turn_does_not_hold_another_chats_turn(tmp_path, monkeypatch):
    """Item 13: the local host ran the engine on its event loop, so a 64 KiB turn in one chat
    held every other chat's turn until it was done. Here the first chat's turn is held inside
    the engine until the second chat's turn has been answered (at most 15 s): order, not time."""
    entered, answered = threading.Event(), threading.Event()
    released: list[bool] = []
    turn = ChatMemory.turn

    def held_turn(self: ChatMemory, *args: object, **kwargs: object) -> object:
        if str(kwargs.get("text", "")).startswith("heavy"):
            entered.set()
            released.append(answered.wait(timeout=15))  # False: nothing else ran meanwhile
        return turn(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ChatMemory, "turn", held_turn)
    mem = await LocalBackend(tmp_path / "memory").start()
    try:
        heavy = asyncio.create_task(
            mem.turn("telegram:1", "heavy " + "🙂" * 1000, author="Ada", author_id="1", message_id="h")
        )
        await wait_until(entered.is_set, timeout=30, what="the heavy turn inside the engine")
        light = await mem.turn("telegram:2", "hello there", author="Bo", author_id="2", message_id="l")
        answered.set()
        assert not heavy.done()  # the second chat was answered while the first one's turn ran
        await heavy
        assert released == [True]
        assert light["message_id"] == "l"
    finally:
        answered.set()
        await mem.close()
