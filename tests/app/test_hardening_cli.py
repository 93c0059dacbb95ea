"""Issue 40, round two of the probe, at the command line: `chatbot import` refuses a served
folder (item 9), says which messages it cut to the memory's limit (item 10), and stops when
its chat is forgotten under it (item 12)."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli import main
from memory_engine.api.validation import MAX_TEXT_BYTES
from memory_worker.local import EmbeddedMemoryHost
from tests.support import clean_env, stored_messages
from tests.support.cli import run_cli_async

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
GROUP = EXPORTS / "telegram_supergroup.json"
GROUP_KEY = "telegram:-1001234567890"


def _export(tmp_path: Path, texts: list[str]) -> Path:
    """A Telegram export of one supergroup with these messages."""
    messages = [
        {
            "id": i,
            "type": "message",
            "date": "2023-11-14T22:13:20",
            "date_unixtime": str(1700000000 + i),
            "from": "Ana Lima",
            "from_id": "user111",
            "text": text,
            "text_entities": [{"type": "plain", "text": text}],
        }
        for i, text in enumerate(texts, 1)
    ]
    path = tmp_path / "result.json"
    path.write_text(
        json.dumps(
            {"name": "Hiking club", "type": "private_supergroup", "id": 1234567890, "messages": messages}
        ),
        encoding="utf-8",
    )
    return path


def test_an_imported_message_over_the_limit_is_cut_and_the_summary_says_so(tmp_path, capsys):
    """Item 10: an imported message over the memory's limit was cut silently."""
    long = "wörds and more " * 9000  # 144 KB of UTF-8
    export = _export(tmp_path, ["short one", long, "another short one"])
    assert main(["import", "telegram", str(export), "--data", str(tmp_path), "--dry-run"]) == 0
    assert "cut 1 messages over 64 KB" in capsys.readouterr().out
    assert main(["import", "telegram", str(export), "--data", str(tmp_path)]) == 0
    summary = capsys.readouterr().out.splitlines()[0]
    assert summary.startswith("imported 3 messages") and "cut 1 messages over 64 KB" in summary
    rows = stored_messages(tmp_path / "memory", "telegram:-1001234567890")
    assert len(rows[1]["text"].encode()) <= MAX_TEXT_BYTES and long.startswith(rows[1]["text"][:-1])


async def test_import_into_a_served_folder_is_refused_in_one_line(tmp_path):
    """Item 9: `chatbot import` into a folder a host serves ran (the README says stop first)."""
    async with EmbeddedMemoryHost(tmp_path / "memory", summarizer=None):
        run = await run_cli_async(
            "import", "telegram", str(GROUP), "--data", str(tmp_path), cwd=tmp_path, env=clean_env()
        )
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "in use by another chatbot process" in run.stderr
    assert "Traceback" not in run.stderr
    assert stored_messages(tmp_path / "memory", GROUP_KEY) == []


async def test_an_import_stops_when_its_chat_is_forgotten_under_it(tmp_path, monkeypatch):
    """Item 12: a chat forgotten during an import was refilled by the import's later batches,
    and the CLI reported the whole count."""
    from bot.chat.memory.client import HttpMemoryClient
    from bot.importers import run

    monkeypatch.setattr(run, "BATCH_MESSAGES", 3)  # 12 messages: 4 batches
    export = _export(tmp_path, [f"message number {i} about hiking" for i in range(12)])
    sent: list[int] = []
    send = HttpMemoryClient.import_encoded

    async def import_then_forget(self: HttpMemoryClient, chat: str, body: bytes):  # type: ignore[no-untyped-def]
        answer = await send(self, chat, body)
        sent.append(answer["imported"])
        if len(sent) == 2:  # someone forgets the chat between the second batch and the third
            assert (await self.forget_chat(chat))["deleted"]
        return answer

    monkeypatch.setattr(HttpMemoryClient, "import_encoded", import_then_forget)
    async with EmbeddedMemoryHost(tmp_path / "served", summarizer=None) as host:
        env = clean_env(MEMORY_URL=host.url, MEMORY_API_TOKEN=host.token)
        run_ = await run_cli_async("import", "telegram", str(export), cwd=tmp_path, env=env)
        assert sent == [3, 3]  # the third batch was refused, the fourth never sent
        assert stored_messages(tmp_path / "served", GROUP_KEY) == []  # forgotten stays forgotten
    assert run_.returncode == 1, run_.stdout + run_.stderr
    summary, stopped = run_.stdout.splitlines()[:2]
    assert summary.startswith("imported 6 messages") and "stopped 1 chats" in summary
    assert stopped.strip().startswith(f"{GROUP_KEY}: stopped after 6 of its 12 messages")
    assert "forgotten" in stopped


async def test_a_batch_after_someone_was_forgotten_is_refused(tmp_path):
    """Item 12, in the API: a later batch of an import is refused (409) once the chat's forget
    generation moved (someone forgotten), and when the chat itself was forgotten."""
    from tests.support import LocalBackend

    mem = await LocalBackend(tmp_path / "memory").start()
    chat, path = "telegram:-100", "/v1/chats/telegram:-100/import"

    def batch(n: int, more: bool = True) -> dict:
        msgs = [{"role": "user", "text": f"hi {n}", "author": "Ana", "author_id": "1", "message_id": f"m{n}"}]
        return {"messages": msgs, "import_id": "run-1", "batch": n, "more": more}

    try:
        assert (await mem.ok("POST", path, batch(1)))["imported"] == 1
        assert (await mem.ok("POST", path, batch(2)))["imported"] == 1  # nothing forgotten: goes on
        await mem.ok("DELETE", f"/v1/chats/{chat}/authors/1")
        status, answer = await mem.call("POST", path, batch(3))
        assert status == 409 and "forgotten" in answer["error"]
        assert (await mem.stats(chat))["total_messages"] == 0
        # A new import (its first batch) may start again; its end lets its note go.
        assert (await mem.ok("POST", path, dict(batch(1), import_id="run-2")))["imported"] == 1
        await mem.ok("DELETE", f"/v1/chats/{chat}")
        status, _ = await mem.call("POST", path, dict(batch(2), import_id="run-2"))
        assert status == 409
        status, answer = await mem.call("POST", path, dict(batch(1), batch=0))
        assert status == 400 and "batch" in answer["error"]
    finally:
        await mem.close()
