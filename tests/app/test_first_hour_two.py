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
    lock = ServeLock(folder, holder="pid 1, chatbot memory restore")  # as `chatbot memory restore` holds it
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


# Item 2: setting values, not only keys.
@pytest.mark.parametrize(
    ("toml", "where", "wanted"),
    [
        ("[bot]\nmemory_scope = 'everyone'\n", "[bot] memory_scope = 'everyone'", "chat or user"),
        ("[reminders]\ndefault_timezone = 'Mars/Olympus'\n", "[reminders] default_timezone", "Europe/Lisbon"),
        ("[reminders]\ndefault_timezone = 'Europe'\n", "[reminders] default_timezone = 'Europe'", "zone"),
        ("[reminders]\ndate_only_time = '9am'\n", "[reminders] date_only_time = '9am'", "HH:MM"),
        ("[followups]\nquiet_start = '24:30'\n", "[followups] quiet_start = '24:30'", "HH:MM"),
        ("[reminders]\nlanguages = ['en', 'klingon']\n", "[reminders] languages", "'klingon'"),
        ("[summary]\nopenai_base_url = 'api.openai.com/v1'\n", "[summary] openai_base_url", "http"),
        ("[tiers.x]\nmodel = 'm'\nbase_url = 'localhost:11434'\n", "[tiers.x] base_url", "http"),
        ("[telegram]\nwebhook_port = 70000\n", "[telegram] webhook_port = 70000", "0 to 65535"),
        ("[memory]\ntimeout_s = 0\n", "[memory] timeout_s = 0", "more than 0"),
        ("[limits]\nuser_messages_per_day = -1\n", "[limits] user_messages_per_day = -1", "0 or more"),
        ("[router]\ntime_budget_s = 'soon'\n", "[router] time_budget_s = 'soon'", "a number"),
        ("[router]\nmax_attempts_per_tier = 1.5\n", "[router] max_attempts_per_tier = 1.5", "a whole number"),
        ("[console]\nstreaming = 'maybe'\n", "[console] streaming = 'maybe'", "true or false"),
    ],
)
def test_a_value_out_of_its_set_or_format_names_the_file_and_key(tmp_path, toml, where, wanted):
    from bot.config import SettingsError, load_settings

    own = tmp_path / "own.toml"
    own.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings(env={"BOT_CONFIG": str(own)}, env_file=None)
    said = str(caught.value)
    assert said.startswith(f"{own}: ") and where in said and wanted in said
    assert "<class" not in said and "typing." not in said and "tuple[" not in said


@pytest.mark.parametrize(
    ("var", "value", "wanted"),
    [
        ("MEMORY_URL", "memory.example.com", "http"),
        ("TELEGRAM_API_BASE_URL", "ftp://example.com/bot", "http"),
        ("DISCORD_GATEWAY_URL", "gateway.discord.gg", "ws"),
        ("OPENAI_BASE_URL", "localhost:8000/v1", "http"),
        ("TELEGRAM_WEBHOOK_PORT", "-1", "0 to 65535"),
    ],
)
def test_a_variable_out_of_its_format_names_the_variable(var, value, wanted):
    from bot.config import SettingsError, settings_from

    with pytest.raises(SettingsError) as caught:
        settings_from({}, {var: value}, source="own.toml")
    said = str(caught.value)
    assert f"{var} = {value!r}" in said and wanted in said


def test_good_values_still_pass():
    from bot.config import settings_from

    env = {"MEMORY_URL": "https://m.example.workers.dev", "DISCORD_GATEWAY_URL": "wss://gw.example"}
    data = {"reminders": {"default_timezone": "America/Argentina/Buenos_Aires", "date_only_time": "7:30"}}
    s = settings_from({**data, "bot": {"memory_scope": "user"}}, env)
    assert (s.memory_scope, s.reminders.default_timezone) == ("user", "America/Argentina/Buenos_Aires")


def test_chat_and_doctor_refuse_an_unknown_zone_and_scope(tmp_path):
    own = tmp_path / "own.toml"
    own.write_text("[bot]\nmemory_scope = 'everyone'\n[reminders]\ndefault_timezone = 'Europe/Atlantis'\n")
    env = clean_env(BOT_CONFIG=str(own))
    chat = run_cli("chat", "--data", str(tmp_path / "d"), cwd=tmp_path, env=env, stdin="hello\n")
    assert chat.returncode == 2 and "Traceback" not in chat.stderr
    assert chat.stderr.startswith(f"error: {own}: ") and chat.stderr.count("\n") == 1
    assert f"{own}: [bot] memory_scope = 'everyone' is not chat or user" in chat.stderr
    assert f"{own}: [reminders] default_timezone = 'Europe/Atlantis' is not a time zone" in chat.stderr
    doctor = run_cli("doctor", "--data", str(tmp_path / "d"), "--timeout", "5", cwd=tmp_path, env=env)
    assert doctor.returncode == 1
    said = "FAIL  config: could not read the settings: "
    assert f"{said}{own}: [bot] memory_scope = 'everyone' is not chat or user\n" in doctor.stdout
    zone = "[reminders] default_timezone = 'Europe/Atlantis' is not a time zone"
    assert f"{said}{own}: {zone}" in doctor.stdout


# Items 6 and 7: `chat --as` by first name; a group chat is a group in the console too.
GROUP = Path(__file__).parents[1] / "data" / "exports" / "telegram_supergroup.json"
GROUP_KEY = "telegram:-1001234567890"


def test_chat_as_a_first_name_says_who_and_the_group_keeps_its_speakers(tmp_path):
    data = tmp_path / "data"
    assert (
        run_cli(
            "import", "telegram", str(GROUP), "--data", str(data), cwd=tmp_path, env=clean_env()
        ).returncode
        == 0
    )
    lines = ["I moved to Porto last week", "anything new?", "/why"]
    run = run_cli(
        "chat",
        "--data",
        str(data),
        "--chat",
        GROUP_KEY,
        "--as",
        "ANA",
        cwd=tmp_path,
        env=clean_env(),
        stdin="\n".join(lines) + "\n",
    )
    assert run.returncode == 0, run.stderr
    assert f"speaking as Ana Lima (id 111) in {GROUP_KEY}" in run.stderr
    recent = run.stdout.split("Recent messages: (sent as chat turns)\n", 1)[1].split("\n\n", 1)[0]
    assert "- user: Ana Lima: I moved to Porto last week" in recent
    said = [line for line in recent.splitlines() if line.startswith("- user: ")]
    assert said and all(line.split(": ", 2)[1] in {"Ana Lima", "Ben", "Nina"} for line in said), recent


# Item 10: a Bot API base URL without its /bot suffix.
@pytest.mark.parametrize("suffix", ["", "/", "/api"])
async def test_doctor_says_what_a_bot_api_base_url_must_look_like(suffix):
    import aiohttp

    from bot.config import settings_from
    from bot.doctor import telegram_check
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram() as tg:
        base = tg.base_url.removesuffix("/bot") + suffix  # the server is up; its URL lacks /bot
        settings = settings_from({}, {"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_API_BASE_URL": base})
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            check = await telegram_check(settings, http)
            good = await telegram_check(
                settings_from({}, {"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_API_BASE_URL": tg.base_url}),
                http,
            )
    assert check.status == "FAIL"
    assert "could not reach" not in check.detail and "refused" not in check.detail
    assert "/bot" in check.detail and base.rstrip("/") in check.detail
    assert f"{base.rstrip('/')}/bot" in check.fix  # what it must look like, from what was given
    assert good.status == "ok"


async def test_a_telegram_token_the_bot_api_rejects_is_one_line(tmp_path):
    from tests.fakes.telegram_server import FakeTelegram
    from tests.support.cli import run_cli_async

    async with FakeTelegram() as tg:
        env = clean_env(TELEGRAM_BOT_TOKEN="123:not-the-token", TELEGRAM_API_BASE_URL=tg.base_url)
        run = await run_cli_async("telegram", "--data", str(tmp_path / "data"), cwd=tmp_path, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        "error: Telegram rejected TELEGRAM_BOT_TOKEN: copy it again from @BotFather (/mybots -> API Token); "
        "`chatbot doctor` checks it"
    ]
    assert "123:not-the-token" not in run.stderr  # the token itself is never printed


def test_memory_serve_checks_its_summary_url(tmp_path):
    env = clean_env(SUMMARY_BASE_URL="api.openai.com/v1")
    run = run_cli("memory", "serve", "--port", "0", "--data", str(tmp_path / "m"), cwd=tmp_path, env=env)
    line = _one_line_error(run)
    assert "SUMMARY_BASE_URL = 'api.openai.com/v1'" in line and "http://" in line
