"""`chatbot chat`: scripted through a pipe (a real subprocess), and the console adapter in-process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.adapters.console import ConsoleSession, run_console
from tests.fakes.openai_server import Echo, FakeOpenAI
from tests.support import clean_env, console_chat, make_settings, running_pipeline

FILLER = [
    "the weather was grey this morning",
    "I had coffee with a colleague",
    "we talked about the football results",
    "the train was late again today",
    "tell me a fun fact about octopuses",
    "how many legs does a spider have",
    "I am reading a book about history",
    "the bakery on the corner closed",
    "my sister called me yesterday",
    "we might go hiking on Sunday",
    "the cat knocked over a plant",
    "I should water the garden",
    "music helps me concentrate",
    "the meeting ran long again",
    "lunch was a simple salad",
    "I need new running shoes",
    "the library has a new wing",
    "it rained during the concert",
    "I finished the crossword puzzle",
    "the neighbours are painting their house",
]


def _chat(tmp_path: Path, lines: list[str], subprocess_: bool = False) -> list[str]:
    blocks = console_chat(tmp_path, lines, subprocess_=subprocess_).split("\n\n")
    assert blocks[-1] == ""
    return blocks[:-1]


def test_scripted_chat_remembers_a_fact_twenty_lines_later_offline(tmp_path):
    lines = ["my name is Grace and I live in Tallinn", *FILLER, "what is my name?", "where do I live?"]
    answers = _chat(tmp_path, lines, subprocess_=True)  # a real child reading a real pipe
    assert len(answers) == len(lines)  # one answer per message
    assert "offline" in answers[0] and "OPENAI_API_KEY" in answers[0]
    assert "Grace" in answers[21] and "Tallinn" not in answers[21]
    assert "Tallinn" in answers[22]
    # a second run on the same data remembers too (memory lives on disk under --data)
    again = _chat(tmp_path, ["what is my name?", "/facts", "/memory"])
    assert "Your name is Grace." in again[0]
    assert "location: Tallinn" in again[1]
    assert "messages kept: 48" in again[2]
    assert (tmp_path / "data" / "memory").is_dir() and (tmp_path / "data" / "outbox.sqlite3").is_file()


def test_scripted_forget_asks_then_confirms(tmp_path):
    answers = _chat(tmp_path, ["my name is Grace", "/forget", "/forget yes", "what is my name?", "/usage"])
    assert "/forget yes" in answers[1]
    assert "erased" in answers[2]
    assert "don't know" in answers[3]
    assert "chart saved to" in answers[4]
    assert list((tmp_path / "data").glob("usage-*.png"))


async def test_console_adapter_in_process_with_a_model(tmp_path):
    async with (
        FakeOpenAI(default=Echo(prefix="model says: ")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        out = io.StringIO()
        stdin = io.StringIO("hello there\n\n/tier heavy\nanother one\n/quit\nnever read\n")
        status = await run_console(pipeline, "console:ada", stdin=stdin, stdout=out, interactive=False)
        assert status == 0
        assert out.getvalue().split("\n\n")[:-1] == [
            "model says: hello there",
            "Answers here now use the heavy tier (within the daily budget). /tier auto undoes it.",
            "model says: another one",
        ]
        assert fake.models_called() == ["m-standard", "m-heavy"]


async def test_console_interactive_streams_with_prompts(tmp_path):
    async with (
        FakeOpenAI(default=Echo(prefix="streamed: ")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        out = io.StringIO()
        status = await run_console(
            pipeline,
            "console:ada",
            stdin=io.StringIO("hi there friend\n"),
            stdout=out,
            interactive=True,
            offline=False,
        )
        assert status == 0
        text = out.getvalue()
        assert text.startswith("Chatting as ada in console:ada")
        assert "you> bot> streamed: hi there friend\n" in text
        assert fake.requests[0].stream


def test_console_command_parsing():
    assert ConsoleSession.parse_command("/mode full") == ("mode", "full")
    assert ConsoleSession.parse_command("/Forget  yes ") == ("forget", "yes")
    assert ConsoleSession.parse_command("hello /mode") is None
    assert ConsoleSession.parse_command("//not a command") is None


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_interactive_chat_on_a_terminal_answers_and_ctrl_c_exits_at_once(tmp_path, inherited):
    """`ignored`: started with SIGINT ignored, as a CI runner starts background jobs. Python then
    installs no KeyboardInterrupt handler, and the console once ignored Ctrl-C (it failed so in a
    whole-suite CI run and passed alone): bot/shutdown.py installs its own handler."""
    import pty
    import select
    import signal
    import time

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "chat", "--data", str(tmp_path / "data"), "--chat", "console:tty"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=tmp_path,
        env=clean_env(),
        preexec_fn=ignore_sigint if inherited == "ignored" else None,
    )
    os.close(slave)
    seen = ""

    def read_until(marker: str, timeout: float = 30.0) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while marker not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} in {seen!r}"
            ready, _, _ = select.select([master], [], [], left)
            if ready:
                seen += os.read(master, 4096).decode(errors="replace")

    try:
        read_until("you> ")
        os.write(master, b"my name is Tess\n")
        read_until("Noted")
        os.write(master, b"what is my name?\n")
        read_until("Your name is Tess.")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


async def test_forgetme_then_why_at_once_shows_nothing_of_the_forgotten_person(tmp_path):
    async with (
        FakeOpenAI(default=Echo(prefix="model says: ")) as fake,
        running_pipeline(make_settings(fake.url), tmp_path) as pipeline,
    ):
        session = ConsoleSession(pipeline, "console:bob")
        await session.answer("my dog Biscuit loves the beach at Nazaré")
        await session.answer("tell me about the beach")
        assert "Biscuit" in await session.answer("/why")
        assert "forgot" in await session.answer("/forgetme")
        after = await session.answer("/why")
    assert "Biscuit" not in after and "Nazaré" not in after
    assert after == "No answer yet in this chat, so no memory prompt to show."


def test_a_command_result_with_files_saves_them_next_to_the_data(tmp_path):
    from bot.chat.types import CommandResult, File

    session = ConsoleSession(None, "console:ada", data_dir=tmp_path)  # type: ignore[arg-type]  # render only
    result = CommandResult(
        "Your data:", table="a  b\n1  2", files=(File("export.json", b"{}", "application/json"),)
    )
    text = session.render(result)
    assert text.startswith("Your data:\na  b\n1  2\n(file saved to ")
    assert (tmp_path / "export-console_ada.json").read_bytes() == b"{}"
