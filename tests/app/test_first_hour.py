"""What a newcomer meets in the first hour: --version, help with defaults, clear errors for typos,
imports that say where they went, `chat --as`, and `make chat` without the dev tools."""

from __future__ import annotations

import json
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from bot.cli import main
from tests.support import REPO, clean_env, console_chat, stored_messages
from tests.support.cli import CliRun, run_cli

EXPORTS = Path(__file__).parents[1] / "data" / "exports"
GROUP = EXPORTS / "telegram_supergroup.json"
GROUP_KEY = "telegram:-1001234567890"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"chatbot {version('chatbot')}"


def test_memory_serve_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["memory", "serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for default in ("127.0.0.1", "8787", "data/memory", "cpython"):
        assert f"(default: {default})" in out


def test_typos_and_empty_compaction_get_a_clear_answer_and_export_all_keeps_export(tmp_path):
    out = console_chat(
        tmp_path,
        ["/compact", "my name is Grace", "/mode silly", "!nosuchtier hello there", "/export", "/export all"],
    )
    assert "Nothing to compact: only the most recent messages are unsummarized" in out
    assert "There is no memory mode 'silly'; nothing changed. Memory mode is auto." in out
    assert "(There is no tier 'nosuchtier'; tiers: offline. This answer uses the usual choice.)" in out
    mine = json.loads((tmp_path / "data" / "export-console_grace.json").read_text(encoding="utf-8"))
    whole = json.loads((tmp_path / "data" / "export-all-console_grace.json").read_text(encoding="utf-8"))
    assert mine["export"]["author_id"] == "grace"
    assert whole["export"]["author_id"] is None
    # the typo'd message is remembered as typed; the notice is never recorded
    texts = [m["text"] for m in stored_messages(tmp_path / "data" / "memory", "console:grace")]
    assert "!nosuchtier hello there" in texts
    assert not any("There is no tier" in t for t in texts)


def test_import_says_where_it_went_and_how_to_chat_there(tmp_path, capsys):
    data = tmp_path / "data"
    command = f"chatbot chat --chat {GROUP_KEY} --data {data}"
    assert main(["import", "telegram", str(GROUP), "--data", str(data), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert f"  {GROUP_KEY} (Hiking club): 18 messages to import; chat in it: {command}" in dry
    assert main(["import", "telegram", str(GROUP), "--data", str(data)]) == 0
    done = capsys.readouterr().out
    assert f"  {GROUP_KEY} (Hiking club): 18 messages in memory; chat in it: {command}" in done
    assert "--as NAME" in done


def _chat_as(tmp_path: Path, who: str | None, lines: list[str]) -> CliRun:
    """`chatbot chat --chat GROUP_KEY [--as WHO]` fed `lines`, in this process."""
    speaker = [] if who is None else ["--as", who]
    argv = ["chat", "--data", str(tmp_path / "data"), "--chat", GROUP_KEY, *speaker]
    return run_cli(*argv, cwd=tmp_path, env=clean_env(), stdin="\n".join(lines) + "\n")


def test_chat_as_a_person_of_an_imported_group(tmp_path):
    assert main(["import", "telegram", str(GROUP), "--data", str(tmp_path / "data")]) == 0
    by_name = _chat_as(tmp_path, "ana lima", ["I moved to Porto last week"])
    assert by_name.returncode == 0, by_name.stderr
    assert f"speaking as Ana Lima (id 111) in {GROUP_KEY}" in by_name.stderr
    by_id = _chat_as(tmp_path, "222", ["my favourite trail is the coastal one"])
    assert by_id.returncode == 0, by_id.stderr
    rows = stored_messages(tmp_path / "data" / "memory", GROUP_KEY)
    said = {r["text"]: (r["author"], r["author_id"]) for r in rows if r["role"] == "user"}
    assert said["I moved to Porto last week"] == ("Ana Lima", "111")
    assert said["my favourite trail is the coastal one"] == ("Ben", "222")

    plain = _chat_as(tmp_path, None, ["just me, no --as"])
    assert plain.returncode == 0, plain.stderr
    rows = stored_messages(tmp_path / "data" / "memory", GROUP_KEY)
    said = {r["text"]: (r["author"], r["author_id"]) for r in rows if r["role"] == "user"}
    assert said["just me, no --as"] == ("console", "console")  # not the chat's id as a person

    nobody = _chat_as(tmp_path, "Zoe", ["hello"])
    assert nobody.returncode == 2
    assert "no one called 'Zoe' in telegram:-1001234567890; people there:" in nobody.stderr
    assert "Ana Lima (111)" in nobody.stderr and "Ben (222)" in nobody.stderr
    assert not any(r["text"] == "hello" for r in stored_messages(tmp_path / "data" / "memory", GROUP_KEY))


def test_make_chat_installs_without_the_dev_extras(tmp_path):
    venv = tmp_path / "venv"
    plan = subprocess.run(
        ["make", "-n", "chat", f"VENV={venv}"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert plan.returncode == 0, plan.stderr
    assert "pip install -q -e .\n" in plan.stdout
    assert "[dev]" not in plan.stdout
    assert f"touch {venv}/.installed\n" in plan.stdout  # its own stamp: `make test` still installs dev
