"""`chatbot doctor`: check the configuration and every service it names, and say how to fix what fails.

It reads the settings as the bot does (config/bot.toml or BOT_CONFIG, .env, the
environment), then asks each configured service one cheap question: every tier's model a
one-word completion, the memory worker `GET /health` and an authenticated read
(`GET /v1/chats/doctor:check/stats`, which stores nothing), Telegram `getMe`, Discord
`users/@me`. Each check prints one line (ok, FAIL, note, skip) and, when it failed, what to
change. The exit status is 1 when any check failed, else 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import aiohttp

from bot.chat.memory.client import HttpMemoryClient, MemoryRefused, MemoryUnavailable
from bot.chat.models.base import ModelFailure, ModelRequest
from bot.chat.models.failures import diagnose, endpoint
from bot.chat.models.openai_compat import OpenAICompatModel
from bot.config import Settings, SettingsError, Tier, load_settings
from memory_engine.api import routes

TIMEOUT_S = 15.0
TELEGRAM_API = "https://api.telegram.org/bot"
DISCORD_API = "https://discord.com/api/v10"
PROBE_CHAT = "doctor:check"  # read-only probe: a chat that does not exist answers as an empty one


@dataclass(frozen=True)
class Check:
    """The outcome of one check: `status` is ok, FAIL, note or skip."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        """True for a failure (the exit status is then 1)."""
        return self.status == "FAIL"

    def lines(self) -> list[str]:
        """How the check prints: one line, and the fix under it."""
        out = [f"{self.status:<5} {self.name}: {self.detail}"]
        if self.fix:
            out.append(f"      fix: {self.fix}")
        return out


def config_checks(settings: Settings) -> list[Check]:
    """What the settings themselves get wrong (no network)."""
    checks: list[Check] = []
    tiers = settings.tiers
    names = ", ".join(tiers) or "none"
    if not tiers:
        return [Check("config", "FAIL", "no [tiers] configured", "add at least one [tiers.NAME] to bot.toml")]
    unknown = [t for t in settings.router.fallback_order if t not in tiers]
    if settings.router.default_tier not in tiers:
        checks.append(
            Check(
                "config",
                "FAIL",
                f"[router] default_tier {settings.router.default_tier!r} is not a tier (tiers: {names})",
                "set [router] default_tier to one of the tiers",
            )
        )
    if unknown:
        checks.append(
            Check(
                "config",
                "FAIL",
                f"[router] fallback_order names unknown tiers {unknown} (tiers: {names})",
                "list only configured tiers in [router] fallback_order",
            )
        )
    if settings.memory_url and not settings.memory_token:
        checks.append(
            Check(
                "config",
                "FAIL",
                f"MEMORY_URL is set ({settings.memory_url}) but MEMORY_API_TOKEN is not",
                "set MEMORY_API_TOKEN to the worker's secret (wrangler secret put MEMORY_API_TOKEN)",
            )
        )
    if not checks:
        checks.append(Check("config", "ok", f"tiers {names}; default {settings.router.default_tier}"))
    keyed = [t for t in tiers.values() if t.api_key]
    if not keyed:
        checks.append(
            Check(
                "models",
                "note",
                "no tier has an API key: the offline model answers (memory only, no language model)",
                "set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server)",
            )
        )
    return checks


async def tier_check(tier: Tier, timeout: float) -> Check:
    """One tiny completion on the tier's model: key, model name and base URL all at once."""
    name = f"tier {tier.name}"
    where = f"model {tier.model} at {endpoint(tier)}"
    if not tier.api_key:
        return Check(
            name, "skip", f"{tier.api_key_env} is not set: this tier is not used", f"set {tier.api_key_env}"
        )
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=tier.api_key, base_url=tier.base_url, max_retries=0, timeout=timeout)
    request = ModelRequest(
        messages=({"role": "user", "content": "Say OK."},),
        chat_key=PROBE_CHAT,
        author="doctor",
        author_id="doctor",
        text="Say OK.",
    )
    try:
        await OpenAICompatModel(client, tier.model).complete(request, timeout=timeout)
    except ModelFailure as failure:
        problem = diagnose(tier, failure.kind, failure.status)
        if problem is not None:
            return Check(name, "FAIL", problem.what, problem.fix)
        return Check(name, "FAIL", f"{where}: {failure}", _transient_fix(failure))
    finally:
        await client.close()
    return Check(name, "ok", f"{where} answered")


def _transient_fix(failure: ModelFailure) -> str:
    if failure.kind == "rate_limit":
        return "the key works but is rate-limited or out of quota: check the account's limits and billing"
    if failure.kind == "refused":
        return "the endpoint refused the request: check the model name and that it speaks the OpenAI API"
    return "the endpoint is up but failing: try again later, or check the server's own logs"


async def _get(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str] | None = None
) -> tuple[int, object]:
    """GET `url`: (status, parsed JSON or None); raises aiohttp.ClientError / TimeoutError."""
    async with http.get(url, headers=headers or {}) as resp:
        try:
            data: object = await resp.json(content_type=None)
        except ValueError:
            data = None
        return resp.status, data


async def memory_check(settings: Settings, data_dir: Path, timeout: float = TIMEOUT_S) -> Check:
    """The memory worker answers /health, and accepts the token on an authenticated read."""
    if settings.memory_url is None:
        async with _embedded(data_dir) as (url, token, error):
            if error:
                return Check(
                    "memory",
                    "FAIL",
                    f"the embedded memory on {data_dir / 'memory'} did not start: {error}",
                    "check that the folder is writable and that no other `chatbot` uses it (--data)",
                )
            return await _probe_memory(url, token, f"embedded, {data_dir / 'memory'}", "", timeout)
    url, token = settings.memory_url.rstrip("/"), settings.memory_token or ""
    return await _probe_memory(url, token, settings.memory_url, "MEMORY_URL", timeout)


@contextlib.asynccontextmanager
async def _embedded(data_dir: Path) -> AsyncIterator[tuple[str, str, str]]:
    """The embedded memory host on `data_dir/memory`: (url, token, "") or ("", "", why it failed)."""
    from memory_worker.local import EmbeddedMemoryHost

    host = EmbeddedMemoryHost(Path(data_dir) / "memory", summarizer=None)
    try:
        await host.__aenter__()
    except Exception as exc:  # any start-up failure is the finding
        yield "", "", f"{type(exc).__name__}: {exc}"
        return
    try:
        yield host.url, host.token, ""
    finally:
        await host.__aexit__(None, None, None)


def _unreached(exc: MemoryUnavailable) -> str | None:
    """Why the worker could not be reached (the transport error's name); None when it answered."""
    return type(exc.__cause__).__name__ if exc.__cause__ is not None else None


async def _probe_memory(url: str, token: str, where: str, var: str, timeout: float) -> Check:
    """`GET /health`, then an authenticated read, through the bot's own memory client."""
    async with HttpMemoryClient(url, token, timeout=timeout) as client:
        answered: object = 200
        try:
            ok = bool((await client.call(routes.HEALTH)).get("ok"))
        except (MemoryUnavailable, MemoryRefused) as exc:
            if isinstance(exc, MemoryUnavailable) and (why := _unreached(exc)) is not None:
                return Check(
                    "memory",
                    "FAIL",
                    f"could not reach {where} ({why})",
                    f"check {var or 'the URL'} and that the worker is deployed (wrangler deploy) or running",
                )
            ok, answered = False, exc.status or "something that is not JSON"
        if not ok:
            return Check(
                "memory",
                "FAIL",
                f'{url}/health answered {answered}, not the memory worker\'s {{"ok": true}}',
                f"check {var or 'the URL'}: it should be the memory worker's URL, without a path",
            )
        try:
            await client.stats(PROBE_CHAT)
        except MemoryUnavailable as exc:
            if exc.status in (401, 403):
                return Check(
                    "memory",
                    "FAIL",
                    f"{where} refused the token (HTTP {exc.status})",
                    "set MEMORY_API_TOKEN to the worker's secret (the same value as `wrangler secret put "
                    "MEMORY_API_TOKEN`, or the host's MEMORY_API_TOKEN)",
                )
            if exc.status is None:
                return Check("memory", "FAIL", f"{where}: the read failed ({_unreached(exc)})", "try again")
            return Check("memory", "FAIL", f"{where}: an authenticated read answered HTTP {exc.status}", "")
        except MemoryRefused as exc:
            return Check("memory", "FAIL", f"{where}: an authenticated read answered HTTP {exc.status}", "")
    return Check("memory", "ok", f"{where} answered, token accepted")


async def telegram_check(settings: Settings, http: aiohttp.ClientSession) -> Check:
    """`getMe` with TELEGRAM_BOT_TOKEN."""
    token = settings.telegram.token
    if not token:
        return Check("telegram", "skip", "TELEGRAM_BOT_TOKEN is not set (only `chatbot telegram` needs it)")
    base = (settings.telegram.api_base_url or TELEGRAM_API).rstrip("/")
    # As python-telegram-bot does: a `{token}` placeholder, else the token appended.
    bot_url = base.replace("{token}", token) if "{token}" in base else base + token
    try:
        status, data = await _get(http, f"{bot_url}/getMe")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        if (shape := _bot_api_shape(base)) is not None:
            return shape
        return Check(
            "telegram",
            "FAIL",
            f"could not reach {base.replace('{token}', '<token>')} ({type(exc).__name__})",
            "check the network, or TELEGRAM_API_BASE_URL",
        )
    if status == 404 and (shape := _bot_api_shape(base)) is not None:
        return shape
    result = data.get("result") if isinstance(data, dict) else None
    if status == 200 and isinstance(result, dict):
        return Check("telegram", "ok", f"getMe: @{result.get('username')} (id {result.get('id')})")
    if status in (401, 404):  # Telegram answers 404 to a token of the wrong shape
        return Check(
            "telegram",
            "FAIL",
            f"Telegram refused TELEGRAM_BOT_TOKEN (HTTP {status})",
            "copy the token again from @BotFather (/mybots -> API Token); it looks like 123456:ABC-...",
        )
    return Check("telegram", "FAIL", f"getMe answered HTTP {status}", "try again later")


def _bot_api_shape(base: str) -> Check | None:
    """When a Bot API base URL is not of the shape the token is appended to (`…/bot`), what it
    must look like; None when it is (the failure is another one)."""
    if "{token}" in base or base.endswith("/bot"):
        return None
    return Check(
        "telegram",
        "FAIL",
        f"TELEGRAM_API_BASE_URL {base} does not end in /bot: the token is appended to it, so "
        "every call goes to a wrong address",
        f"set it to {base}/bot (as https://api.telegram.org/bot; a local Bot API server: "
        "http://HOST:PORT/bot), or put {token} where the token goes",
    )


async def discord_check(settings: Settings, http: aiohttp.ClientSession) -> Check:
    """`GET /users/@me` with DISCORD_BOT_TOKEN."""
    token = settings.discord.token
    if not token:
        return Check("discord", "skip", "DISCORD_BOT_TOKEN is not set (only `chatbot discord` needs it)")
    base = (settings.discord.api_base_url or DISCORD_API).rstrip("/")
    try:
        status, data = await _get(http, f"{base}/users/@me", {"Authorization": f"Bot {token}"})
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Check(
            "discord",
            "FAIL",
            f"could not reach {base} ({type(exc).__name__})",
            "check the network, or DISCORD_API_BASE_URL",
        )
    if status == 200 and isinstance(data, dict):
        return Check("discord", "ok", f"users/@me: {data.get('username')} (id {data.get('id')})")
    if status == 401:
        return Check(
            "discord",
            "FAIL",
            "Discord refused DISCORD_BOT_TOKEN (HTTP 401)",
            "reset the token in the Developer Portal (your application -> Bot -> Reset Token) and set it",
        )
    return Check("discord", "FAIL", f"users/@me answered HTTP {status}", "try again later")


async def run_checks(settings: Settings, data_dir: Path, *, timeout: float = TIMEOUT_S) -> list[Check]:
    """Every check, in the order they print."""
    checks = config_checks(settings)
    # With no key at all the note of config_checks says it once, not one skip per tier.
    asked = [] if settings.offline else list(settings.tiers.values())
    checks += await asyncio.gather(*(tier_check(t, timeout) for t in asked))
    checks.append(await memory_check(settings, data_dir, timeout))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
        checks.append(await telegram_check(settings, http))
        checks.append(await discord_check(settings, http))
    return checks


def report(checks: list[Check], out: TextIO) -> int:
    """Print the checks and the verdict; the exit status (1 when any failed)."""
    for check in checks:
        for line in check.lines():
            print(line, file=out)
    failed = sum(c.failed for c in checks)
    print(f"{failed} problem{'s' if failed != 1 else ''} found" if failed else "all checks passed", file=out)
    return 1 if failed else 0


def main(data_dir: Path, *, timeout: float = TIMEOUT_S, out: TextIO | None = None) -> int:
    """`chatbot doctor`: run every check and print them; 0 when all passed, 1 otherwise."""
    out = out or sys.stdout
    try:
        settings = load_settings()
    except (OSError, ValueError, KeyError) as exc:  # a missing BOT_CONFIG, bad TOML, a tier without model
        # Each value out of its set or format on its own line, all of them.
        for problem in exc.problems if isinstance(exc, SettingsError) else (str(exc),):
            print(f"FAIL  config: could not read the settings: {problem}", file=out)
        print("      fix: check BOT_CONFIG (a TOML file like config/bot.toml) and .env", file=out)
        return 1
    return report(asyncio.run(run_checks(settings, data_dir, timeout=timeout)), out)
