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
