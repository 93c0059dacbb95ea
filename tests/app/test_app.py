"""The composition root: what build_pipeline opens, from settings alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.app import build_pipeline
from bot.chat.memory.client import HttpMemoryClient
from bot.chat.models.offline import OfflineModel
from bot.chat.models.openai_compat import OpenAICompatModel
from bot.config import load_settings, settings_from
from memory_worker.local import EmbeddedMemoryHost
from tests.fakes.openai_server import Answer, Echo, FakeOpenAI
from tests.support import API_KEY, FAST, make_settings, msg

REPO = Path(__file__).resolve().parents[2]


async def test_no_key_means_offline_with_embedded_memory(tmp_path):
    settings = load_settings(env={}, env_file=None)  # the shipped config/bot.toml, no secrets
    assert settings.offline and settings.memory_url is None
    async with build_pipeline(settings, tmp_path, options=FAST) as router:
        assert router.offline and list(router.tiers) == ["offline"]
        assert isinstance(router.model.models["offline"], OfflineModel)
        reply = await router.handle(msg("hello there"))
        assert reply.tier == "offline" and "offline" in reply.text and "OPENAI_API_KEY" in reply.text
        usage = await router.memory.usage("test:chat")
        assert usage["tiers"]["offline"]["calls"] == 1
    assert (tmp_path / "memory").is_dir()


async def test_memory_url_and_token_reach_a_separate_host(tmp_path):
    token = "a-memory-token-that-is-long-enough"
    async with EmbeddedMemoryHost(tmp_path / "remote", token=token, port=0) as host:
        async with FakeOpenAI(default=Echo()) as fake:
            settings = make_settings(fake.url, memory_url=host.url, memory_token=token)
            async with build_pipeline(settings, tmp_path / "bot", options=FAST) as router:
                reply = await router.handle(msg("my name is Ada"))
                assert reply.ok and reply.with_memory
        assert not (tmp_path / "bot" / "memory").exists()  # no embedded host was started
        async with HttpMemoryClient(host.url, token) as client:
            assert {f["value"] for f in await client.facts("test:chat")} == {"Ada"}
            assert (await client.stats("test:chat"))["total_messages"] == 2


async def test_one_client_per_endpoint_and_keyless_tiers_left_out(tmp_path):
    async with FakeOpenAI(default=Echo("one: ")) as one, FakeOpenAI(default=Echo("two: ")) as two:
        data = {
            "router": {
                "fallback_order": ["standard", "light", "heavy", "extra"],
                "default_tier": "standard",
                "choice": {"short_chars": 0},
            },
            "tiers": {
                "light": {"model": "m-light", "price_in_per_mtok": 0.1},
                "standard": {"model": "m-standard", "price_in_per_mtok": 0.4},
                "heavy": {
                    "model": "m-heavy",
                    "base_url": two.url,
                    "api_key_env": "HEAVY_KEY",
                    "price_in_per_mtok": 2,
                },
                "extra": {"model": "m-extra", "api_key_env": "EXTRA_KEY_UNSET"},
            },
        }
        env = {
            "OPENAI_API_KEY": "sk-one-0123456789abcdef",
            "OPENAI_BASE_URL": one.url,
            "HEAVY_KEY": "sk-two-0123456789",
        }
        settings = settings_from(data, env)
        async with build_pipeline(settings, tmp_path, options=FAST) as router:
            models = router.model.models
            assert set(models) == {"light", "standard", "heavy"}  # "extra" has no key
            assert all(isinstance(m, OpenAICompatModel) for m in models.values())
            assert models["light"].client is models["standard"].client
            assert models["heavy"].client is not models["light"].client
            assert (await router.handle(msg("!heavy hello"))).text == "two: hello"
            assert (await router.handle(msg("hello"))).text == "one: hello"
            assert two.requests[0].headers["Authorization"] == "Bearer sk-two-0123456789"
            assert one.models_called() == ["m-standard"]


def test_platform_adapters_are_imported_lazily():
    names = "('bot.adapters.telegram.adapter', 'bot.adapters.discord.adapter', 'telegram', 'discord')"
    code = f"import sys, bot.app; print(any(m.startswith({names}) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False"


def test_platform_command_without_token_says_so_and_exits_2(tmp_path):
    env = {
        k: v
        for k, v in __import__("os").environ.items()
        if not k.startswith(("DISCORD_", "OPENAI_", "MEMORY_"))
    }
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "discord", "--data", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2
    assert "DISCORD_BOT_TOKEN" in out.stderr and "Traceback" not in out.stderr


def test_the_defaults_are_the_packaged_bot_toml_and_stated_nowhere_else():
    import tomllib
    from importlib import resources

    from bot.chat.models.fallback import RetryPolicy
    from bot.chat.models.tiers import ChoiceRules
    from bot.config import (
        DEFAULT_CONFIG,
        DiscordSettings,
        MemorySettings,
        RouterSettings,
        Settings,
        TelegramSettings,
        Tier,
    )

    packaged = resources.files("bot.defaults").joinpath("bot.toml")
    assert packaged.is_file() and DEFAULT_CONFIG.samefile(str(packaged))
    assert packaged.read_bytes() == (REPO / "config" / "bot.toml").read_bytes()  # one file, shipped
    toml = tomllib.loads(packaged.read_text())
    router, choice = toml["router"], toml["router"]["choice"]
    policy = RetryPolicy.from_settings(RouterSettings())
    assert RouterSettings().time_budget_s == policy.time_budget_s == router["time_budget_s"]
    assert RouterSettings().request_timeout_s == policy.request_timeout_s == router["request_timeout_s"]
    assert policy.max_attempts_per_tier == router["max_attempts_per_tier"]
    assert policy.max_wait_s == router["max_retry_wait_s"]
    assert (
        ChoiceRules().heavy_words == tuple(choice["heavy_words"])
        and ChoiceRules().long_chars == choice["long_chars"]
    )
    assert TelegramSettings().send_budget_s == toml["telegram"]["send_budget_s"]
    assert DiscordSettings().send_budget_s == toml["discord"]["send_budget_s"]
    assert TelegramSettings().webhook_port == toml["telegram"]["webhook_port"]
    assert MemorySettings().retry_max_s == toml["memory"]["retry_max_s"]
    assert Settings(tiers={}).daily_budget_usd == toml["bot"]["daily_budget_usd"]
    shared = toml["tier_defaults"]  # what a tier leaves out: stated there, not in Python
    tier = Tier(name="x", model="m")
    assert (tier.context_tokens, tier.vision, tier.api_key_env) == (
        shared["context_tokens"],
        shared["vision"],
        shared["api_key_env"],
    )


def test_a_bot_config_file_changes_only_what_it_states(tmp_path):
    partial = tmp_path / "partial.toml"
    partial.write_text("[router]\ntime_budget_s = 5.0\n\n[bot]\ndaily_budget_usd = 0.25\n")
    settings = load_settings(env={"BOT_CONFIG": str(partial)}, env_file=None)
    assert settings.router.time_budget_s == 5.0 and settings.daily_budget_usd == 0.25
    assert settings.router.request_timeout_s == 30.0 and list(settings.tiers) == [
        "light",
        "standard",
        "heavy",
    ]
    own = tmp_path / "own.toml"
    own.write_text('[tiers.fast]\nmodel = "m-fast"\n\n[tiers.smart]\nmodel = "m-smart"\n')
    settings = load_settings(env={"BOT_CONFIG": str(own)}, env_file=None)
    assert list(settings.tiers) == ["fast", "smart"]  # its own tiers replace the shipped ones
    assert settings.router.fallback_order == ("fast", "smart") and settings.router.default_tier == "fast"
    assert settings.router.choice.heavy_words[0] == "explain"  # the rest is still shipped


def test_chat_from_another_folder_needs_no_bot_config(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("OPENAI_", "BOT_CONFIG"))}
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "chat", "--data", str(tmp_path / "d")],
        input="where do I live?\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,  # no config/ folder here
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "offline" in out.stdout and "FileNotFoundError" not in out.stderr


SUMMARY = "\n".join(
    [
        "## Objective",
        "- plan the trip to Kyoto",
        "## Important Details",
        "- Ada's dog is Biscuit",
        "## Work State (Completed / Active / Blocked)",
        "- active: booking",
        "## Next Move",
        "- book the train",
        "## Relevant Files",
        "- none",
    ]
)


async def test_with_a_model_and_no_summary_settings_compaction_uses_the_cheapest_tier(tmp_path):
    async with FakeOpenAI(default=Echo()) as fake:
        fake.script(Answer(SUMMARY), model="m-light")
        settings = make_settings(fake.url, summary_model=None)  # no SUMMARY_*: the product's default
        async with build_pipeline(settings, tmp_path, options=FAST) as router:
            for i in range(3):
                await router.handle(msg(f"message {i} about the trip to Kyoto with Biscuit"))
            done = await router.command(msg("/compact"), "compact", "")
            summary = await router.memory.summary("test:chat")
    assert done.text.startswith("Compacted:")
    summarizer = [r for r in fake.requests if r.model == "m-light"]
    assert len(summarizer) == 1 and summarizer[0].headers["Authorization"] == f"Bearer {API_KEY}"
    assert "Biscuit" in summary["summary"]


def test_summary_settings_override_each_part_and_offline_stays_offline():
    from bot.app import summary_endpoint

    settings = make_settings("http://127.0.0.1:1/v1", summary_model=None)
    assert summary_endpoint(settings) == ("http://127.0.0.1:1/v1", "m-light", API_KEY)
    assert summary_endpoint(make_settings("http://127.0.0.1:1/v1", summary_model="offline")) is None
    env = {"OPENAI_API_KEY": API_KEY, "SUMMARY_MODEL": "m-summary", "SUMMARY_API_KEY": "sk-summary-key"}
    assert summary_endpoint(settings_from({}, env)) == (
        "https://api.openai.com/v1",
        "m-summary",
        "sk-summary-key",
    )
    env["SUMMARY_BASE_URL"] = "http://127.0.0.1:2/v1"
    assert summary_endpoint(settings_from({}, env))[0] == "http://127.0.0.1:2/v1"
    assert summary_endpoint(load_settings(env={}, env_file=None)) is None  # no model: offline
