"""The offline model on imported group chats: questions about each person, from the outside.

Each chat of tests/data/offline_chats.json is written as a Telegram or Discord export, imported
with `chatbot import`, then asked its questions through `chatbot chat` (no API key), as
benchmarks/offline_answers.py does; here the answers must be right, whose they are included.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from bot.chat.models.base import MemoryContext, ModelRequest
from bot.chat.models.offline import UNKNOWN, OfflineModel
from tests.support import clean_env
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[3]


def _benchmark():
    spec = importlib.util.spec_from_file_location(
        "offline_answers", ROOT / "benchmarks" / "offline_answers.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("offline_answers", module)
    spec.loader.exec_module(module)
    return module


def _in_process(cwd: Path):
    """The benchmark's `chatbot` runs, in this process (tests/support/cli.py), in `cwd`."""

    def cli(args: list[str], stdin: str) -> tuple[int, str, str]:
        run = run_cli(*args, cwd=cwd, env=clean_env(), stdin=stdin)
        return run.returncode, run.stdout, run.stderr

    return cli


@pytest.mark.parametrize("platform", ["telegram", "discord"])
def test_imported_group_chats_are_answered_about_each_person(platform, tmp_path):
    bench = _benchmark()
    chats = [c for c in bench.load() if c["platform"] == platform]
    assert chats
    for n, chat in enumerate(chats):
        folder = tmp_path / str(n)
        folder.mkdir()
        got = bench.answers(chat, folder, cli=_in_process(tmp_path))
        assert len(got) == len(chat["questions"])
        for (question, expected), answer in zip(chat["questions"], got, strict=True):
            assert bench.right(answer, expected), (question, answer)
            quoted = re.findall(r"“([^”]*)”", answer)
            assert not any(q.rstrip().endswith("?") for q in quoted), answer  # a question is no evidence


def _ask(text: str, mem: MemoryContext, author_id: str = "u1") -> str:
    req = ModelRequest(messages=(), chat_key="c", author="Ada", author_id=author_id, text=text, memory=mem)
    return OfflineModel().answer(req).text


def test_the_fact_history_answers_before_and_a_question_is_never_evidence():
    history = (
        {"id": 1, "author": "Ada", "author_id": "u1", "key": "location", "value": "Porto"},
        {"id": 2, "author": "Ada", "author_id": "u1", "key": "location", "value": "Lisbon"},
    )
    facts = ({"author": "Ada", "author_id": "u1", "key": "location", "value": "Berlin", "kind": "fact"},)
    recent = (
        {"id": 5, "role": "user", "author": "Bo", "author_id": "u2", "text": "when is the party?"},
        {"id": 6, "role": "user", "author": "Bo", "author_id": "u2", "text": "is the party at Ada's?"},
    )
    mem = MemoryContext(facts=facts, fact_history=history, recent=recent)
    assert _ask("Where did I live before Berlin?", mem) == "Before Berlin, you lived in Lisbon."
    assert _ask("where did I live before Lisbon?", mem) == "Before Lisbon, you lived in Porto."
    assert _ask("When is the party?", mem) == UNKNOWN  # only questions mention it
    notes = (
        {"author": "Bo", "author_id": "u2", "key": "note", "value": "party on Friday at 8", "kind": "note"},
    )
    mem = MemoryContext(facts=facts, recent=recent, notes=notes)
    assert _ask("When is the party?", mem) == "Bo asked me to remember: “party on Friday at 8”"


def test_asked_about_someone_it_tells_what_it_knows_about_them():
    facts = (
        {"author": "Ben", "author_id": "u2", "key": "location", "value": "Oslo", "kind": "fact"},
        {"author": "Ben", "author_id": "u2", "key": "allergies", "value": "peanuts", "kind": "fact"},
    )
    mem = MemoryContext(facts=facts)
    for question in ("what do you know about Ben?", "tell me about Ben", "who is Ben?"):
        assert _ask(question, mem) == "What I know about Ben: location: Oslo; allergies: peanuts."
    assert _ask("Where does Ben live?", mem) == "Ben lives in Oslo."
    assert _ask("tell me about Zed", mem) == UNKNOWN
