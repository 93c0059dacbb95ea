"""Settings: read once from config/bot.toml (or BOT_CONFIG), the environment and an env file."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "bot.toml"


@dataclass(frozen=True)
class Tier:
    """One model tier: where to call, which model, how big, how expensive."""

    name: str
    model: str
    base_url: str | None = None
    api_key: str | None = None
    context_tokens: int = 128000
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0


@dataclass(frozen=True)
class RouterSettings:
    """How the router picks, retries and falls back between tiers."""

    fallback_order: tuple[str, ...] = ("standard", "light", "heavy")
    default_tier: str = "standard"
    time_budget_s: float = 60.0
    request_timeout_s: float = 30.0
    max_attempts_per_tier: int = 2
    max_retry_wait_s: float = 5.0  # longest Retry-After waited for; longer: next tier at once
    choice: Mapping[str, Any] = field(default_factory=dict)  # [router.choice]: tier-choice signals


@dataclass(frozen=True)
class PlatformSettings:
    """Credentials and switches of one chat platform."""

    token: str | None = None
    api_base_url: str | None = None
    gateway_url: str | None = None  # Discord only
    webhook_url: str | None = None  # Telegram only
    dev_guild_id: str | None = None  # Discord only
    streaming: bool = True
    # How long a reply keeps being retried through a platform outage (5xx, refused, timeouts)
    # before it is logged as undelivered; the conversation in memory is intact either way.
    send_budget_s: float = 60.0
    webhook_listen: str = "0.0.0.0"  # Telegram only: where the webhook server listens
    webhook_port: int = 8443  # Telegram only


@dataclass(frozen=True)
class Settings:
    """Everything the composition root needs, read once."""

    tiers: Mapping[str, Tier]
    router: RouterSettings = field(default_factory=RouterSettings)
    admin_user_ids: frozenset[str] = frozenset()
    record_group_messages: bool = True
    memory_scope: str = "chat"  # "chat" or "user"
    daily_budget_usd: float = 1.0
    memory_url: str | None = None  # unset: embedded local memory host
    memory_token: str | None = None
    summary_base_url: str | None = None
    summary_model: str | None = None
    summary_api_key: str | None = None
    telegram: PlatformSettings = field(default_factory=PlatformSettings)
    discord: PlatformSettings = field(default_factory=PlatformSettings)
    console: PlatformSettings = field(default_factory=PlatformSettings)

    @property
    def offline(self) -> bool:
        """True when no tier has an API key: the offline model answers."""
        return not any(t.api_key for t in self.tiers.values())

    def secrets(self) -> tuple[str, ...]:
        """Every secret value held, so logs, errors and /why can redact them."""
        values = [t.api_key for t in self.tiers.values()]
        values += [self.memory_token, self.summary_api_key]
        values += [p.token for p in (self.telegram, self.discord, self.console)]
        return tuple(v for v in values if v)


def read_env_file(path: Path) -> dict[str, str]:
    """Parse a simple KEY=VALUE env file (comments and blank lines ignored)."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        values[key] = value.strip().strip("'\"")
    return values


def load_settings(env: Mapping[str, str] | None = None, env_file: Path | None = Path(".env")) -> Settings:
    """Read settings from the TOML file, then the env file, then the environment (wins)."""
    merged: dict[str, str] = {}
    if env_file is not None:
        merged.update(read_env_file(env_file))
    merged.update(os.environ if env is None else env)
    config_path = Path(merged.get("BOT_CONFIG") or DEFAULT_CONFIG)
    with open(config_path, "rb") as fh:
        data = tomllib.load(fh)
    return settings_from(data, merged)


def _blank_to_none(value: str | None) -> str | None:
    return value.strip() if value and value.strip() else None


def settings_from(data: Mapping, env: Mapping[str, str]) -> Settings:
    """Build Settings from parsed TOML and an environment mapping."""
    default_base = _blank_to_none(env.get("OPENAI_BASE_URL"))
    tiers: dict[str, Tier] = {}
    for name, t in (data.get("tiers") or {}).items():
        key_env = t.get("api_key_env", "OPENAI_API_KEY")
        tiers[name] = Tier(
            name=name,
            model=t["model"],
            base_url=_blank_to_none(t.get("base_url")) or default_base,
            api_key=_blank_to_none(env.get(key_env)),
            context_tokens=int(t.get("context_tokens", 128000)),
            price_in_per_mtok=float(t.get("price_in_per_mtok", 0.0)),
            price_out_per_mtok=float(t.get("price_out_per_mtok", 0.0)),
        )
    r = data.get("router") or {}
    router = RouterSettings(
        fallback_order=tuple(r.get("fallback_order") or tiers.keys()),
        default_tier=r.get("default_tier") or next(iter(tiers), "standard"),
        time_budget_s=float(r.get("time_budget_s", 60.0)),
        request_timeout_s=float(r.get("request_timeout_s", 30.0)),
        max_attempts_per_tier=int(r.get("max_attempts_per_tier", 2)),
        max_retry_wait_s=float(r.get("max_retry_wait_s", 5.0)),
        choice=dict(r.get("choice") or {}),
    )
    b = data.get("bot") or {}
    admins = frozenset(x.strip() for x in (env.get("ADMIN_USER_IDS") or "").split(",") if x.strip())

    def platform(section: str, prefix: str) -> PlatformSettings:
        p = data.get(section) or {}
        return PlatformSettings(
            token=_blank_to_none(env.get(f"{prefix}_BOT_TOKEN")),
            api_base_url=_blank_to_none(env.get(f"{prefix}_API_BASE_URL")),
            gateway_url=_blank_to_none(env.get(f"{prefix}_GATEWAY_URL")),
            webhook_url=_blank_to_none(env.get(f"{prefix}_WEBHOOK_URL")),
            dev_guild_id=_blank_to_none(env.get(f"{prefix}_DEV_GUILD_ID")),
            streaming=bool(p.get("streaming", True)),
            send_budget_s=float(p.get("send_budget_s", 60.0)),
            webhook_listen=_blank_to_none(env.get(f"{prefix}_WEBHOOK_LISTEN")) or "0.0.0.0",
            webhook_port=int(_blank_to_none(env.get(f"{prefix}_WEBHOOK_PORT")) or 8443),
        )

    return Settings(
        tiers=tiers,
        router=router,
        admin_user_ids=admins,
        record_group_messages=bool(b.get("record_group_messages", True)),
        memory_scope=str(b.get("memory_scope", "chat")),
        daily_budget_usd=float(b.get("daily_budget_usd", 1.0)),
        memory_url=_blank_to_none(env.get("MEMORY_URL")),
        memory_token=_blank_to_none(env.get("MEMORY_API_TOKEN")),
        summary_base_url=_blank_to_none(env.get("SUMMARY_BASE_URL")),
        summary_model=_blank_to_none(env.get("SUMMARY_MODEL")),
        summary_api_key=_blank_to_none(env.get("SUMMARY_API_KEY")),
        telegram=platform("telegram", "TELEGRAM"),
        discord=platform("discord", "DISCORD"),
        console=platform("console", "CONSOLE"),
    )
