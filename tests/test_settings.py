"""Settings once (issue 21): a type per platform filled by one mapping of TOML and environment,
BOT_CONFIG over every table ([summary] included), a maintained .env reader."""

from __future__ import annotations

import dataclasses

import pytest

from bot.app import summary_endpoint
from bot.config import (
    ConsoleSettings,
    DiscordSettings,
    LimitSettings,
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
    with pytest.raises(ValueError, match="streaming of its table = 'maybe'"):
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
