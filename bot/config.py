"""Settings: read once from config/bot.toml (or BOT_CONFIG), the environment and an env file.

config/bot.toml is the one place where defaults are stated: it ships inside the package (as
`bot.defaults`, see pyproject.toml), a BOT_CONFIG file is read over it (a table it leaves out
keeps the shipped values; its own [tiers] replace the shipped ones), and the dataclass
defaults below are read from it too.
"""

from __future__ import annotations

import copy
import functools
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

_SOURCE_CONFIG = Path(__file__).resolve().parent.parent / "config" / "bot.toml"


def _packaged_config() -> Path:
    """config/bot.toml as installed with the package (bot.defaults), or in the source tree."""
    try:
        packaged = resources.files("bot.defaults").joinpath("bot.toml")
        if packaged.is_file():
            return Path(str(packaged))
    except ModuleNotFoundError:  # a source checkout on PYTHONPATH, not installed
        pass
    return _SOURCE_CONFIG


DEFAULT_CONFIG = _packaged_config()


@functools.cache
def _defaults() -> dict[str, Any]:
    with open(DEFAULT_CONFIG, "rb") as fh:
        return tomllib.load(fh)


def default(section: str, key: str) -> Any:
    """The shipped default of `[section] key` (section may be dotted: "router.choice")."""
    table: Any = _defaults()
    for part in section.split("."):
        table = table[part]
    return copy.deepcopy(table[key])


def with_defaults(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (a parsed bot.toml) read over the shipped defaults: tables merge, values replace.

    A config with its own [tiers] replaces the shipped tiers whole, and then the shipped
    fallback order and default tier (which name the shipped tiers) give way to its own tiers.
    """
    merged = copy.deepcopy(_defaults())
    if "tiers" in data:
        merged["tiers"] = {}
        merged["router"].pop("fallback_order", None)
        merged["router"].pop("default_tier", None)
    _merge(merged, data)
    return merged


def _merge(into: dict[str, Any], data: Mapping[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


@dataclass(frozen=True)
class Tier:
    """One model tier: where to call, which model, how big, how expensive."""

    name: str
    model: str
    base_url: str | None = None
    api_key: str | None = None
    context_tokens: int = 128000  # when a tier does not say (bot.toml states it for each tier)
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    vision: bool = False  # the model accepts image parts
    api_key_env: str = "OPENAI_API_KEY"  # where the key came from: named in error hints


@dataclass(frozen=True)
class AccessSettings:
    """Who may use the bot ([access]; ALLOWED_USER_IDS / ALLOWED_CHAT_IDS replace the lists)."""

    allowed_user_ids: frozenset[str] = frozenset()  # empty and no chats listed: everyone
    allowed_chat_ids: frozenset[str] = frozenset()
    refusal_interval_s: float = default("access", "refusal_interval_s")


@dataclass(frozen=True)
class LimitSettings:
    """Daily caps ([limits]); 0 means no cap."""

    user_messages_per_day: int = default("limits", "user_messages_per_day")
    chat_messages_per_day: int = default("limits", "chat_messages_per_day")
    user_cost_usd_per_day: float = default("limits", "user_cost_usd_per_day")
    chat_cost_usd_per_day: float = default("limits", "chat_cost_usd_per_day")


@dataclass(frozen=True)
class TranscriptionSettings:
    """Speech to text ([transcription]): endpoint and key resolved (the default tier's unless set)."""

    model: str = default("transcription", "model")
    base_url: str | None = None
    api_key: str | None = None  # None: no transcription (offline)
    max_duration_s: float = default("transcription", "max_duration_s")
    max_bytes: int = default("transcription", "max_bytes")
    timeout_s: float = default("transcription", "timeout_s")


@dataclass(frozen=True)
class PhotoSettings:
    """Photos ([photos]): the size sent to a vision tier, the largest file taken."""

    max_side_px: int = default("photos", "max_side_px")
    max_bytes: int = default("photos", "max_bytes")


@dataclass(frozen=True)
class RouterSettings:
    """How the router picks, retries and falls back between tiers."""

    fallback_order: tuple[str, ...] = tuple(default("router", "fallback_order"))
    default_tier: str = default("router", "default_tier")
    time_budget_s: float = default("router", "time_budget_s")
    request_timeout_s: float = default("router", "request_timeout_s")
    max_attempts_per_tier: int = default("router", "max_attempts_per_tier")
    max_retry_wait_s: float = default("router", "max_retry_wait_s")  # longer Retry-After: next tier
    choice: Mapping[str, Any] = field(default_factory=dict)  # [router.choice]: tier-choice signals


@dataclass(frozen=True)
class PlatformSettings:
    """Credentials and switches of one chat platform."""

    token: str | None = None
    api_base_url: str | None = None
    gateway_url: str | None = None  # Discord only
    webhook_url: str | None = None  # Telegram only
    dev_guild_id: str | None = None  # Discord only
    streaming: bool = default("telegram", "streaming")
    # How long a reply keeps being retried through a platform outage (5xx, refused, timeouts)
    # before it is logged as undelivered; the conversation in memory is intact either way.
    send_budget_s: float = default("telegram", "send_budget_s")
    webhook_listen: str = default("telegram", "webhook_listen")  # Telegram only
    webhook_port: int = default("telegram", "webhook_port")  # Telegram only


@dataclass(frozen=True)
class MemorySettings:
    """How the bot talks to the memory worker: its timeout, and the outbox replay and back-off."""

    timeout_s: float = default("memory", "timeout_s")
    replay_interval_s: float = default("memory", "replay_interval_s")
    retry_s: float = default("memory", "retry_s")
    retry_max_s: float = default("memory", "retry_max_s")


@dataclass(frozen=True)
class FollowupSettings:
    """[followups]: when the day-after check-ins are asked (see config/bot.toml)."""

    checkin_time: str = default("followups", "checkin_time")
    quiet_start: str = default("followups", "quiet_start")
    quiet_end: str = default("followups", "quiet_end")

    @classmethod
    def from_table(cls, t: Mapping[str, Any]) -> FollowupSettings:
        """From the merged [followups] table."""
        return cls(str(t["checkin_time"]), str(t["quiet_start"]), str(t["quiet_end"]))


@dataclass(frozen=True)
class ReminderSettings:
    """[reminders]: parsing and delivery of reminders (see config/bot.toml)."""

    default_timezone: str = default("reminders", "default_timezone")
    date_only_time: str = default("reminders", "date_only_time")
    languages: tuple[str, ...] = tuple(default("reminders", "languages"))
    late_after_s: float = default("reminders", "late_after_s")
    poll_s: float = default("reminders", "poll_s")
    lease_s: float = default("reminders", "lease_s")
    retry_s: float = default("reminders", "retry_s")

    @classmethod
    def from_table(cls, t: Mapping[str, Any]) -> ReminderSettings:
        """From the merged [reminders] table."""
        return cls(
            default_timezone=str(t["default_timezone"]),
            date_only_time=str(t["date_only_time"]),
            languages=tuple(str(x) for x in t["languages"]),
            late_after_s=float(t["late_after_s"]),
            poll_s=float(t["poll_s"]),
            lease_s=float(t["lease_s"]),
            retry_s=float(t["retry_s"]),
        )


@dataclass(frozen=True)
class Settings:
    """Everything the composition root needs, read once."""

    tiers: Mapping[str, Tier]
    router: RouterSettings = field(default_factory=RouterSettings)
    admin_user_ids: frozenset[str] = frozenset()
    record_group_messages: bool = default("bot", "record_group_messages")
    memory_scope: str = default("bot", "memory_scope")  # "chat" or "user"
    daily_budget_usd: float = default("bot", "daily_budget_usd")
    system_prompt: str = default("bot", "system_prompt")
    access: AccessSettings = field(default_factory=AccessSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    transcription: TranscriptionSettings = field(default_factory=TranscriptionSettings)
    photos: PhotoSettings = field(default_factory=PhotoSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    memory_url: str | None = None  # unset: embedded local memory host
    memory_token: str | None = None
    summary_base_url: str | None = None
    summary_model: str | None = None
    summary_api_key: str | None = None
    telegram: PlatformSettings = field(default_factory=PlatformSettings)
    discord: PlatformSettings = field(default_factory=PlatformSettings)
    console: PlatformSettings = field(default_factory=PlatformSettings)
    reminders: ReminderSettings = field(default_factory=ReminderSettings)
    followups: FollowupSettings = field(default_factory=FollowupSettings)

    @property
    def offline(self) -> bool:
        """True when no tier has an API key: the offline model answers."""
        return not any(t.api_key for t in self.tiers.values())

    def secrets(self) -> tuple[str, ...]:
        """Every secret value held, so logs, errors and /why can redact them."""
        values = [t.api_key for t in self.tiers.values()]
        values += [self.memory_token, self.summary_api_key, self.transcription.api_key]
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


def settings_from(data: Mapping[str, Any], env: Mapping[str, str]) -> Settings:
    """Build Settings from parsed TOML (read over the shipped defaults) and an environment mapping."""
    data = with_defaults(data)
    default_base = _blank_to_none(env.get("OPENAI_BASE_URL"))
    tiers: dict[str, Tier] = {}
    for name, t in data["tiers"].items():
        key_env = t.get("api_key_env", "OPENAI_API_KEY")
        tiers[name] = Tier(
            name=name,
            model=t["model"],
            base_url=_blank_to_none(t.get("base_url")) or default_base,
            api_key=_blank_to_none(env.get(key_env)),
            context_tokens=int(t.get("context_tokens", Tier.context_tokens)),
            price_in_per_mtok=float(t.get("price_in_per_mtok", 0.0)),
            price_out_per_mtok=float(t.get("price_out_per_mtok", 0.0)),
            vision=bool(t.get("vision", False)),
            api_key_env=key_env,
        )
    r = data["router"]
    router = RouterSettings(
        fallback_order=tuple(r.get("fallback_order") or tiers.keys()),
        default_tier=r.get("default_tier") or next(iter(tiers), ""),
        time_budget_s=float(r["time_budget_s"]),
        request_timeout_s=float(r["request_timeout_s"]),
        max_attempts_per_tier=int(r["max_attempts_per_tier"]),
        max_retry_wait_s=float(r["max_retry_wait_s"]),
        choice=dict(r["choice"]),
    )
    b = data["bot"]
    m = data["memory"]
    admins = _ids(env.get("ADMIN_USER_IDS") or "")

    def platform(section: str, prefix: str, names: tuple[str, ...] = ()) -> PlatformSettings:
        """One platform's table; of the environment only PREFIX_NAME for the `names` it has."""
        p = data[section]

        def var(name: str) -> str | None:
            # Only the variables the platform has are read (the docs list exactly these).
            return _blank_to_none(env.get(f"{prefix}_{name}")) if name in names else None

        return PlatformSettings(
            token=var("BOT_TOKEN"),
            api_base_url=var("API_BASE_URL"),
            gateway_url=var("GATEWAY_URL"),
            webhook_url=var("WEBHOOK_URL"),
            dev_guild_id=var("DEV_GUILD_ID"),
            streaming=bool(p["streaming"]),
            send_budget_s=float(p.get("send_budget_s", PlatformSettings.send_budget_s)),
            webhook_listen=var("WEBHOOK_LISTEN")
            or str(p.get("webhook_listen", PlatformSettings.webhook_listen)),
            webhook_port=int(var("WEBHOOK_PORT") or p.get("webhook_port", PlatformSettings.webhook_port)),
        )

    return Settings(
        tiers=tiers,
        router=router,
        admin_user_ids=admins,
        record_group_messages=bool(b["record_group_messages"]),
        memory_scope=str(b["memory_scope"]),
        daily_budget_usd=float(b["daily_budget_usd"]),
        system_prompt=str(b["system_prompt"]).strip(),
        access=_access(data["access"], env),
        limits=LimitSettings(
            user_messages_per_day=int(data["limits"]["user_messages_per_day"]),
            chat_messages_per_day=int(data["limits"]["chat_messages_per_day"]),
            user_cost_usd_per_day=float(data["limits"]["user_cost_usd_per_day"]),
            chat_cost_usd_per_day=float(data["limits"]["chat_cost_usd_per_day"]),
        ),
        transcription=_transcription(data["transcription"], env, tiers.get(router.default_tier)),
        photos=PhotoSettings(
            max_side_px=int(data["photos"]["max_side_px"]), max_bytes=int(data["photos"]["max_bytes"])
        ),
        memory=MemorySettings(
            timeout_s=float(m["timeout_s"]),
            replay_interval_s=float(m["replay_interval_s"]),
            retry_s=float(m["retry_s"]),
            retry_max_s=float(m["retry_max_s"]),
        ),
        memory_url=_blank_to_none(env.get("MEMORY_URL")),
        memory_token=_blank_to_none(env.get("MEMORY_API_TOKEN")),
        summary_base_url=_blank_to_none(env.get("SUMMARY_BASE_URL")),
        summary_model=_blank_to_none(env.get("SUMMARY_MODEL")),
        summary_api_key=_blank_to_none(env.get("SUMMARY_API_KEY")),
        telegram=platform(
            "telegram",
            "TELEGRAM",
            ("BOT_TOKEN", "API_BASE_URL", "WEBHOOK_URL", "WEBHOOK_LISTEN", "WEBHOOK_PORT"),
        ),
        discord=platform("discord", "DISCORD", ("BOT_TOKEN", "API_BASE_URL", "GATEWAY_URL", "DEV_GUILD_ID")),
        console=platform("console", "CONSOLE"),
        reminders=ReminderSettings.from_table(data["reminders"]),
        followups=FollowupSettings.from_table(data["followups"]),
    )


def _ids(value: Any) -> frozenset[str]:
    """Platform ids from "1, 2" or a TOML list (numbers or strings), as text."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return frozenset(str(x).strip() for x in items if str(x).strip())


def _access(table: Mapping[str, Any], env: Mapping[str, str]) -> AccessSettings:
    """[access], with ALLOWED_USER_IDS / ALLOWED_CHAT_IDS replacing its lists when set."""
    users = _blank_to_none(env.get("ALLOWED_USER_IDS"))
    chats = _blank_to_none(env.get("ALLOWED_CHAT_IDS"))
    return AccessSettings(
        allowed_user_ids=_ids(users if users is not None else table.get("allowed_user_ids")),
        allowed_chat_ids=_ids(chats if chats is not None else table.get("allowed_chat_ids")),
        refusal_interval_s=float(table["refusal_interval_s"]),
    )


def _transcription(
    table: Mapping[str, Any], env: Mapping[str, str], default_tier: Tier | None
) -> TranscriptionSettings:
    """[transcription]: its own endpoint and key when given, else the default tier's."""
    key_env = _blank_to_none(str(table.get("api_key_env") or ""))
    api_key = _blank_to_none(env.get(key_env)) if key_env else None
    base_url = _blank_to_none(str(table.get("base_url") or ""))
    if default_tier is not None:
        api_key = api_key or default_tier.api_key
        base_url = base_url or default_tier.base_url
    return TranscriptionSettings(
        model=str(table["model"]),
        base_url=base_url or _blank_to_none(env.get("OPENAI_BASE_URL")),
        api_key=api_key,
        max_duration_s=float(table["max_duration_s"]),
        max_bytes=int(table["max_bytes"]),
        timeout_s=float(table["timeout_s"]),
    )
