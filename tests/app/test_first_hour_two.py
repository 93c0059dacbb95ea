"""A newcomer's first hour, round two (issue 40): start-up errors in one line, setting values
checked, help that describes every option and shows its defaults."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_worker.local.storage import ServeLock
from tests.support import clean_env
from tests.support.cli import CliRun, run_cli


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A 127.0.0.1 port something else listens on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def _one_line_error(run: CliRun) -> str:
    """The run's one error line (exit 2, no traceback), asserted."""
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, run.stderr
    assert errors[0].startswith("error: ")
    assert "Errno" not in errors[0] and "Error:" not in errors[0]  # no exception's name or number
    return errors[0]


def test_memory_serve_on_a_taken_port_says_so_in_one_line(tmp_path, taken_port):
    run = run_cli(
        "memory",
        "serve",
        "--port",
        str(taken_port),
        "--data",
        str(tmp_path / "m"),
        cwd=tmp_path,
        env=clean_env(),
    )
    line = _one_line_error(run)
    assert f"port {taken_port}" in line and "taken" in line
    assert "--port" in line


@pytest.mark.parametrize("command", [["memory", "serve", "--port", "0"], ["chat"]])
def test_a_data_folder_that_is_a_file_is_one_line(tmp_path, command):
    (tmp_path / "afile").write_text("not a folder")
    run = run_cli(*command, "--data", str(tmp_path / "afile"), cwd=tmp_path, env=clean_env(), stdin="hi\n")
    line = _one_line_error(run)
    assert "afile" in line and "--data" in line


def test_an_address_that_is_not_this_machines_is_one_line(tmp_path):
    env = clean_env(MEMORY_API_TOKEN="t0ken")
    host = "203.0.113.9"  # TEST-NET-3: no machine's own (a host name is not resolved in tests)
    run = run_cli(
        "memory", "serve", "--host", host, "--port", "0", "--data", str(tmp_path / "m"), cwd=tmp_path, env=env
    )
    line = _one_line_error(run)
    assert host in line and "--host" in line


def test_a_port_out_of_range_is_refused_by_the_parser(tmp_path):
    run = run_cli(
        "memory", "serve", "--port", "70000", "--data", str(tmp_path / "m"), cwd=tmp_path, env=clean_env()
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "0 to 65535" in run.stderr


def test_serving_a_folder_a_restore_holds_is_one_line(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    lock = ServeLock(folder, exclusive=True)  # as `chatbot memory restore` holds it
    try:
        run = run_cli("memory", "serve", "--port", "0", "--data", str(folder), cwd=tmp_path, env=clean_env())
    finally:
        lock.release()
    line = _one_line_error(run)
    assert str(folder) in line and "restore" in line


def _help(*argv: str) -> str:
    run = run_cli(*argv, "--help", cwd=Path.cwd(), env=clean_env())
    assert run.returncode == 0
    return " ".join(run.stdout.split())  # argparse wraps lines


@pytest.mark.parametrize("command", [("memory", "backup"), ("memory", "restore")])
def test_backup_and_restore_help_describe_data(command):
    text = _help(*command)
    assert "--data DATA the memory folder" in text
    assert "(default: data/memory)" in text


def test_chat_help_shows_its_defaults():
    text = _help("chat")
    assert "(default: data)" in text
    assert "(default: console:<user name>)" in text
