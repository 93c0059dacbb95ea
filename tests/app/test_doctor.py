"""`chatbot doctor` against the fakes: every service fine, then each fault named with its fix."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.config import settings_from
from bot.doctor import report, run_checks
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, ServerError
from tests.fakes.telegram_server import FakeTelegram
from tests.support import API_KEY, MODELS, clean_env
from tests.support.cli import run_cli_async
from tests.support.net import TcpGate

TOKEN = "doctor-memory-token-0123456789"


@dataclass
class World:
    """The fakes and the local memory host, and the environment that points at them."""

    openai: FakeOpenAI
    telegram: FakeTelegram
    discord: FakeDiscord
    memory_url: str
    gate: TcpGate  # shut: a port where nothing listens

    def env(self, **changes: str) -> dict[str, str]:
        env = {
            "OPENAI_API_KEY": API_KEY,
            "MEMORY_URL": self.memory_url,
            "MEMORY_API_TOKEN": TOKEN,
            "TELEGRAM_BOT_TOKEN": self.telegram.token,
            "TELEGRAM_API_BASE_URL": self.telegram.base_url,
            "DISCORD_BOT_TOKEN": self.discord.token,
            "DISCORD_API_BASE_URL": self.discord.api_base,
        }
        env.update(changes)
        return {k: v for k, v in env.items() if v}


@pytest.fixture
async def world(tmp_path) -> AsyncIterator[World]:
    async with (
        FakeOpenAI() as openai,
        FakeTelegram() as telegram,
        FakeDiscord() as discord,
        EmbeddedMemoryHost(tmp_path / "memory-host", token=TOKEN, summarizer=None) as host,
        TcpGate() as gate,
    ):
        yield World(openai, telegram, discord, host.url, gate)


def tiers_on(url: str, **router: Any) -> dict[str, Any]:
    """bot.toml data: the three test tiers on `url`."""
    return {
        "router": {"fallback_order": ["standard", "light", "heavy"], "default_tier": "standard", **router},
        "tiers": {name: {"model": model, "base_url": url} for name, model in MODELS.items()},
    }


async def doctor(tmp_path: Path, data: dict[str, Any], env: dict[str, str]) -> tuple[int, str]:
    out = io.StringIO()
    checks = await run_checks(settings_from(data, env), tmp_path / "data", timeout=5.0)
    return report(checks, out), out.getvalue()


async def test_everything_fine_passes(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env())
    assert code == 0, out
    for line in (
        "ok    config: tiers light, standard, heavy; default standard",
        f"ok    tier standard: model m-standard at {world.openai.url} answered",
        f"ok    memory: {world.memory_url} answered, token accepted",
        "ok    telegram: getMe: @memo_test_bot",
        "ok    discord: users/@me:",
        "all checks passed",
    ):
        assert line in out, out
    assert sorted(world.openai.models_called()) == sorted(MODELS.values())  # one cheap call per tier


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (ServerError(401, "bad key"), ["refused the API key (HTTP 401)", "fix: check OPENAI_API_KEY"]),
        (ServerError(403, "forbidden"), ["refused the API key (HTTP 403)"]),
        (
            ServerError(404, "no such model"),
            ["model 'm-standard' was not found at", "fix: check the model name in [tiers.standard]"],
        ),
        (ServerError(503, "overloaded"), ["HTTP 503", "fix: the endpoint is up but failing"]),
    ],
)
async def test_a_failing_tier_is_named_with_its_fix(world, tmp_path, fault, expected):
    world.openai.script(fault, model="m-standard")
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env())
    assert code == 1
    assert "FAIL  tier standard:" in out and "ok    tier light:" in out
    for text in expected:
        assert text in out, out
    assert "1 problem found" in out


async def test_unreachable_model_endpoint(world, tmp_path):
    url = f"{world.gate.url}/v1"
    code, out = await doctor(tmp_path, tiers_on(url), world.env())
    assert code == 1
    assert f"FAIL  tier standard: could not reach {url}" in out
    assert "fix: check base_url in the tier's [tiers] table or OPENAI_BASE_URL" in out


async def test_a_tier_with_another_key_variable_names_it(world, tmp_path):
    data = tiers_on(world.openai.url)
    data["tiers"]["heavy"]["api_key_env"] = "HEAVY_KEY"
    code, out = await doctor(tmp_path, data, world.env())
    assert code == 0, out  # a tier without its key is not used: a note, not a failure
    assert "skip  tier heavy: HEAVY_KEY is not set" in out
    world.openai.script(ServerError(401), model="m-heavy")
    code, out = await doctor(tmp_path, data, world.env(HEAVY_KEY="wrong"))
    assert code == 1 and "fix: check HEAVY_KEY" in out


async def test_wrong_memory_token(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(MEMORY_API_TOKEN="wrong"))
    assert code == 1
    assert f"FAIL  memory: {world.memory_url} refused the token (HTTP 401)" in out
    assert "fix: set MEMORY_API_TOKEN" in out


async def test_memory_url_without_token(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(MEMORY_API_TOKEN=""))
    assert code == 1
    assert "but MEMORY_API_TOKEN is not" in out


async def test_unreachable_memory(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(MEMORY_URL=world.gate.url))
    assert code == 1
    assert f"FAIL  memory: could not reach {world.gate.url}" in out
    assert "fix: check MEMORY_URL" in out


async def test_memory_url_that_is_not_the_worker(world, tmp_path):
    code, out = await doctor(
        tmp_path, tiers_on(world.openai.url), world.env(MEMORY_URL=world.openai.url.removesuffix("/v1"))
    )
    assert code == 1
    assert "/health answered 404" in out


async def test_embedded_memory_is_started_and_checked(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(MEMORY_URL=""))
    assert code == 0, out
    assert f"ok    memory: embedded, {tmp_path / 'data' / 'memory'} answered, token accepted" in out


async def test_wrong_telegram_token(world, tmp_path):
    code, out = await doctor(
        tmp_path, tiers_on(world.openai.url), world.env(TELEGRAM_BOT_TOKEN="123:not-the-token")
    )
    assert code == 1
    assert "FAIL  telegram: Telegram refused TELEGRAM_BOT_TOKEN (HTTP 401)" in out
    assert "@BotFather" in out


async def test_telegram_base_url_with_a_token_placeholder(world, tmp_path):
    base = world.telegram.base_url + "{token}"  # python-telegram-bot's placeholder form
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(TELEGRAM_API_BASE_URL=base))
    assert code == 0, out
    assert "ok    telegram: getMe: @memo_test_bot" in out


async def test_wrong_discord_token(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(DISCORD_BOT_TOKEN="nope"))
    assert code == 1
    assert "FAIL  discord: Discord refused DISCORD_BOT_TOKEN (HTTP 401)" in out
    assert "Reset Token" in out


async def test_unset_tokens_are_skipped_not_failed(world, tmp_path):
    code, out = await doctor(
        tmp_path, tiers_on(world.openai.url), world.env(TELEGRAM_BOT_TOKEN="", DISCORD_BOT_TOKEN="")
    )
    assert code == 0, out
    assert "skip  telegram: TELEGRAM_BOT_TOKEN is not set" in out
    assert "skip  discord: DISCORD_BOT_TOKEN is not set" in out


async def test_config_naming_an_unknown_tier(world, tmp_path):
    data = tiers_on(world.openai.url, default_tier="medium", fallback_order=["standard", "turbo"])
    code, out = await doctor(tmp_path, data, world.env())
    assert code == 1
    assert "FAIL  config: [router] default_tier 'medium' is not a tier" in out
    assert "FAIL  config: [router] fallback_order names unknown tiers ['turbo']" in out


async def test_no_key_at_all_is_a_note_about_the_offline_model(world, tmp_path):
    code, out = await doctor(tmp_path, tiers_on(world.openai.url), world.env(OPENAI_API_KEY=""))
    assert code == 0, out
    assert "note  models: no tier has an API key: the offline model answers" in out
    assert "tier standard" not in out and world.openai.requests == []  # said once, nothing asked


async def run_cli(tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    """`python -m bot.cli ARGS` in `tmp_path` (no .env), with only `env` of the bot's settings."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        *args,
        cwd=tmp_path,
        env=clean_env(**env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(90):
        out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_command_exits_non_zero_on_a_failure(world, tmp_path):
    # `chatbot doctor` in this process (the child's start is test_..._unreadable_config's)
    env = world.env(OPENAI_BASE_URL=world.openai.url)  # the shipped tiers, on the fake
    run = await run_cli_async("doctor", "--data", str(tmp_path / "d"), cwd=tmp_path, env=clean_env(**env))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok    tier standard: model gpt-4.1-mini" in run.stdout
    assert "all checks passed" in run.stdout
    wrong = clean_env(**{**env, "TELEGRAM_BOT_TOKEN": "1:wrong"})
    run = await run_cli_async("doctor", cwd=tmp_path, env=wrong)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAIL  telegram: Telegram refused TELEGRAM_BOT_TOKEN (HTTP 401)" in run.stdout
    assert "1 problem found" in run.stdout


async def test_the_command_reports_an_unreadable_config(tmp_path):
    (tmp_path / "bad.toml").write_text("[tiers.x\n", encoding="utf-8")
    code, out = await run_cli(tmp_path, "doctor", BOT_CONFIG=str(tmp_path / "bad.toml"))
    assert code == 1
    assert "FAIL  config: could not read the settings" in out
