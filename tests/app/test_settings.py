"""Settings once (issue 21): a type per platform filled by one mapping of TOML and environment,
BOT_CONFIG over every table ([summary] included), a maintained .env reader."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from bot.app import summary_endpoint
from bot.config import (
    ConsoleSettings,
    DiscordSettings,
    LimitSettings,
    SettingsError,
    TelegramSettings,
    load_settings,
    read_env_file,
    section,
    settings_from,
)


def test_each_platform_has_its_own_settings_and_reads_only_its_own_variables():
    env = {
        "TELEGRAM_BOT_TOKEN": "123:tg",
        "TELEGRAM_WEBHOOK_PORT": "9443",
        "TELEGRAM_DEV_GUILD_ID": "1",  # no such Telegram setting: never read
        "DISCORD_BOT_TOKEN": "dc",
        "DISCORD_DEV_GUILD_ID": "42",
        "DISCORD_WEBHOOK_URL": "http://nowhere",  # no such Discord setting
        "CONSOLE_BOT_TOKEN": "console-token",  # the console has no token
    }
    s = settings_from({}, env)
    assert isinstance(s.telegram, TelegramSettings) and isinstance(s.discord, DiscordSettings)
    assert (s.telegram.token, s.telegram.webhook_port, s.telegram.webhook_listen) == (
        "123:tg",
        9443,
        "0.0.0.0",
    )
    assert (s.discord.token, s.discord.dev_guild_id) == ("dc", "42")
    assert [f.name for f in dataclasses.fields(ConsoleSettings)] == ["streaming"]
    assert not hasattr(s.telegram, "dev_guild_id") and not hasattr(s.discord, "webhook_url")
    assert "console-token" not in s.secrets() and "123:tg" in s.secrets()


def test_one_mapping_converts_toml_and_environment_and_says_what_is_wrong():
    table = {"streaming": False, "send_budget_s": 5}
    assert section(DiscordSettings, table, {}).send_budget_s == 5.0
    assert section(DiscordSettings, table, {}).streaming is False
    assert section(TelegramSettings, {"webhook_port": 80}, {"TELEGRAM_WEBHOOK_PORT": " "}).webhook_port == 80
    assert section(LimitSettings, {"chat_messages_per_day": 3}, {}).chat_messages_per_day == 3
    with pytest.raises(ValueError, match="TELEGRAM_WEBHOOK_PORT = 'eighty'"):
        section(TelegramSettings, {}, {"TELEGRAM_WEBHOOK_PORT": "eighty"})
    with pytest.raises(ValueError, match=r"\[ConsoleSettings\] streaming = 'maybe'"):
        section(ConsoleSettings, {"streaming": "maybe"}, {})


def test_bot_config_overrides_the_summary_table_too(tmp_path):
    own = tmp_path / "bot.toml"
    own.write_text('[summary]\nopenai_base_url = "http://127.0.0.1:7/v1"\n[console]\nstreaming = false\n')
    settings = load_settings(env={"BOT_CONFIG": str(own), "OPENAI_API_KEY": "sk-x"}, env_file=None)
    assert settings.console.streaming is False
    assert {t.base_url for t in settings.tiers.values()} == {"http://127.0.0.1:7/v1"}
    assert summary_endpoint(settings) == ("http://127.0.0.1:7/v1", "gpt-4.1-nano", "sk-x")


def test_the_env_file_is_read_by_python_dotenv(tmp_path):
    env = tmp_path / ".env"
    env.write_text(
        "# a comment\n"
        "export OPENAI_API_KEY='sk-quoted'\n"
        'SYSTEM_NOTE="two words # not a comment"\n'
        "MEMORY_URL=http://127.0.0.1:8787 # a comment after a value\n"
        "EMPTY=\n"
    )
    values = read_env_file(env)
    assert values["OPENAI_API_KEY"] == "sk-quoted"
    assert values["SYSTEM_NOTE"] == "two words # not a comment"
    assert values["MEMORY_URL"] == "http://127.0.0.1:8787"  # the hand-written reader kept the comment
    assert values["EMPTY"] == ""
    assert read_env_file(tmp_path / "missing.env") == {}
    settings = load_settings(env={}, env_file=env)
    assert {t.api_key for t in settings.tiers.values()} == {"sk-quoted"}
    assert settings.memory_url == "http://127.0.0.1:8787"


# Every table of bot.toml, one key changed by a BOT_CONFIG, and where its reader finds it (the
# pipeline `build_pipeline` opens, or the settings an adapter or the memory client reads).
OVERRIDES: dict[str, tuple[str, Any, Callable[[Any], Any]]] = {
    "bot": ("daily_budget_usd = 0.5", 0.5, lambda p: p.settings.daily_budget_usd),
    "access": ("refusal_interval_s = 7", 7.0, lambda p: p.access.interval_s),
    "limits": ("chat_messages_per_day = 3", 3, lambda p: p.settings.limits.chat_messages_per_day),
    "transcription": ('model = "whisper-x"', "whisper-x", lambda p: p.media.transcription.model),
    "photos": ("max_side_px = 640", 640, lambda p: p.media.photos.max_side_px),
    "router": ("time_budget_s = 7.0", 7.0, lambda p: p.model.policy.time_budget_s),
    "router.choice": ("heavy_at = 5", 5, lambda p: p.rules.heavy_at),
    "tiers.solo": ('model = "m-solo"', "m-solo", lambda p: p.model.models["solo"].model),
    "tier_defaults": ("context_tokens = 4000", 4000, lambda p: p.tiers["solo"].context_tokens),
    "summary": (
        'openai_base_url = "http://127.0.0.1:9/v1"',
        "http://127.0.0.1:9/v1/",
        lambda p: str(p.model.models["solo"].client.base_url),
    ),
    "memory": ("timeout_s = 3.0", 3.0, lambda p: p.settings.memory.timeout_s),
    "telegram": ("send_budget_s = 5", 5.0, lambda p: p.settings.telegram.send_budget_s),
    "discord": ("send_budget_s = 6", 6.0, lambda p: p.settings.discord.send_budget_s),
    "console": ("streaming = false", False, lambda p: p.settings.console.streaming),
    "reminders": ("late_after_s = 10", 10.0, lambda p: p.reminders.settings.late_after_s),
    "followups": ('checkin_time = "11:00"', "11:00", lambda p: p.settings.followups.checkin_time),
}


async def test_bot_config_overrides_every_table_and_each_override_reaches_its_reader(tmp_path):
    import tomllib

    from bot.config import DEFAULT_CONFIG
    from tests.support.core import running_pipeline

    shipped = tomllib.loads(DEFAULT_CONFIG.read_text())
    nested = {f"router.{k}" for k, v in shipped["router"].items() if isinstance(v, dict)}
    tables = {n for n in shipped if n != "tiers"} | nested
    assert tables | {"tiers.solo"} == set(OVERRIDES)  # a new table needs its row here
    own = tmp_path / "own.toml"
    own.write_text("".join(f"[{table}]\n{line}\n\n" for table, (line, _, _) in OVERRIDES.items()))
    settings = load_settings(env={"BOT_CONFIG": str(own), "OPENAI_API_KEY": "sk-x"}, env_file=None)
    async with running_pipeline(settings, tmp_path / "bot") as pipeline:
        seen = {table: read(pipeline) for table, (_, _, read) in OVERRIDES.items()}
    assert seen == {table: value for table, (_, value, _) in OVERRIDES.items()}


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("[router]\ntime_budget = 5\n", "[router] has no setting 'time_budget'"),
        ("[router.choice]\nheavy_word = ['x']\n", "[router.choice] has no setting 'heavy_word'"),
        ('[tiers.x]\nmodel = "m"\napi_key = "sk-in-a-file"\n', "[tiers.x] has no setting 'api_key'"),
        ("[tiers.x]\nvision = true\n", "[tiers.x] needs 'model'"),
        ("[tier_defaults]\nmodel_name = 'm'\n", "[tier_defaults] has no setting 'model_name'"),
        ("[access]\nallowed_users = [1]\n", "[access] has no setting 'allowed_users'"),
        ("[transcription]\napi_key = 'sk'\n", "[transcription] has no setting 'api_key'"),
        ("[telegram]\ndev_guild_id = 1\n", "[telegram] has no setting 'dev_guild_id'"),
        ("[routr]\ntime_budget_s = 5\n", "no table [routr]"),
        ("[router]\nmax_attempts_per_tier = 'two'\n", "[router] max_attempts_per_tier = 'two' is not a"),
        ("[tiers.x]\nmodel = ['m']\n", "[tiers.x] model = ['m'] is not a"),
    ],
)
def test_a_key_no_setting_reads_is_an_error_naming_the_file_and_the_key(tmp_path, toml, where):
    own = tmp_path / "own.toml"
    own.write_text(toml)
    with pytest.raises(SettingsError) as caught:
        load_settings(env={"BOT_CONFIG": str(own)}, env_file=None)
    assert str(caught.value).startswith(f"{own}: ") and where in str(caught.value)


def test_the_command_says_which_key_of_which_file_and_stops(tmp_path):
    import subprocess
    import sys

    from tests.support.core import clean_env

    own = tmp_path / "own.toml"
    own.write_text("[router]\ntime_budget = 5\n")
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat", "--data", str(tmp_path / "d")],
        input="hello\n",
        capture_output=True,
        text=True,
        env=clean_env(BOT_CONFIG=str(own)),
        timeout=60,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"error: {own}: [router] has no setting 'time_budget'" in out.stderr


def test_the_shipped_file_parses_every_key_it_states():
    """Every key of config/bot.toml is a field of its table's type (else loading it fails)."""
    settings = settings_from({}, {"ALLOWED_USER_IDS": "7, 8", "ALLOWED_CHAT_IDS": " "})
    assert settings.access.allowed_user_ids == {"7", "8"}  # the variable replaces the list
    assert settings.access.allowed_chat_ids == frozenset()  # blank: the file's (empty) list
    assert settings.router.choice.heavy_words[:2] == ("explain", "analyse")
    assert {t.context_tokens for t in settings.tiers.values()} == {128000}  # [tier_defaults]
