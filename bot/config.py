"""Settings: read once from config/bot.toml (or BOT_CONFIG), the environment and an env file.

config/bot.toml is the one place where defaults are stated: it ships inside the package (as
`bot.defaults`, see pyproject.toml), a BOT_CONFIG file is read over it (a table it leaves out
keeps the shipped values; its own [tiers] replace the shipped ones), and the dataclass
defaults below are read from it too.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from dotenv import dotenv_values

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

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What a call of these token counts costs at this tier's prices."""
        return round(
            (prompt_tokens * self.price_in_per_mtok + completion_tokens * self.price_out_per_mtok) / 1e6, 10
        )


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


def _env(name: str) -> Any:
    """Field metadata: the environment variable that overrides this field's TOML key."""
    return {"env": name}


@dataclass(frozen=True)
class TelegramSettings:
    """[telegram] and the TELEGRAM_* variables (docs/telegram.md)."""

    token: str | None = field(default=None, metadata=_env("TELEGRAM_BOT_TOKEN"))
    api_base_url: str | None = field(default=None, metadata=_env("TELEGRAM_API_BASE_URL"))
    webhook_url: str | None = field(default=None, metadata=_env("TELEGRAM_WEBHOOK_URL"))
    streaming: bool = default("telegram", "streaming")
    # How long a reply keeps being retried through a platform outage (5xx, refused, timeouts)
    # before it is logged as undelivered; the conversation in memory is intact either way.
    send_budget_s: float = default("telegram", "send_budget_s")
    webhook_listen: str = field(
        default=default("telegram", "webhook_listen"), metadata=_env("TELEGRAM_WEBHOOK_LISTEN")
    )
    webhook_port: int = field(
        default=default("telegram", "webhook_port"), metadata=_env("TELEGRAM_WEBHOOK_PORT")
    )


@dataclass(frozen=True)
class DiscordSettings:
    """[discord] and the DISCORD_* variables (docs/discord.md)."""

    token: str | None = field(default=None, metadata=_env("DISCORD_BOT_TOKEN"))
    api_base_url: str | None = field(default=None, metadata=_env("DISCORD_API_BASE_URL"))
    gateway_url: str | None = field(default=None, metadata=_env("DISCORD_GATEWAY_URL"))
    dev_guild_id: str | None = field(default=None, metadata=_env("DISCORD_DEV_GUILD_ID"))
    streaming: bool = default("discord", "streaming")
    send_budget_s: float = default("discord", "send_budget_s")


@dataclass(frozen=True)
class ConsoleSettings:
    """[console]: `chatbot chat` needs no credentials."""

    streaming: bool = default("console", "streaming")


T = TypeVar("T")


def section(cls: type[T], table: Mapping[str, Any], env: Mapping[str, str]) -> T:
    """One settings type from its TOML table and the environment, the one mapping of them all:
    each field is the table's key of its name, or its `env` variable (field metadata) when
    that is set and not blank; converted to the field's type. Keys the table does not have
    keep the field's default; a value of the wrong shape is a clear error."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls is a dataclass
        var = f.metadata.get("env")
        raw = _blank_to_none(env.get(var)) if var else None
        if raw is None and f.name not in table:
            continue
        value = raw if raw is not None else table[f.name]
        try:
            values[f.name] = _convert(value, hints[f.name])
        except (TypeError, ValueError) as exc:
            where = var if raw is not None else f"{f.name} of its table"
            raise ValueError(f"{cls.__name__}: {where} = {value!r} is not a {hints[f.name]}") from exc
    return cls(**values)


def _convert(value: Any, kind: Any) -> Any:
    """`value` (TOML or environment text) as the type `kind` of a settings field."""
    args = typing.get_args(kind)
    if type(None) in args:  # `X | None`: blank is None
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        kind = next(a for a in args if a is not type(None))
    if kind is bool:
        if isinstance(value, str):
            if value.strip().lower() not in _BOOLS:
                raise ValueError(value)
            return _BOOLS[value.strip().lower()]
        return bool(value)
    if kind in (int, float):
        if isinstance(value, bool):
            raise TypeError(value)
        return kind(value)
    if kind is str:
        return str(value).strip()
    if typing.get_origin(kind) is frozenset:
        return _ids(value)
    if typing.get_origin(kind) is tuple:
        return tuple(value.split(",") if isinstance(value, str) else value)
    return value


_BOOLS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


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
    telegram: TelegramSettings = field(default_factory=TelegramSettings)
    discord: DiscordSettings = field(default_factory=DiscordSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
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
        values += [self.telegram.token, self.discord.token]
        return tuple(v for v in values if v)


def read_env_file(path: Path) -> dict[str, str]:
    """The KEY=VALUE pairs of an env file (python-dotenv's reading: quotes, `export`, comments);
    {} when there is none. Nothing is put into os.environ."""
    if not path.is_file():
        return {}
    return {k: v for k, v in dotenv_values(path).items() if v is not None}


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
    openai_base = _blank_to_none(str(data["summary"].get("openai_base_url") or ""))
    tiers: dict[str, Tier] = {}
    for name, t in data["tiers"].items():
        key_env = t.get("api_key_env", "OPENAI_API_KEY")
        tiers[name] = Tier(
            name=name,
            model=t["model"],
            # [summary] openai_base_url: where a tier that names no endpoint is (BOT_CONFIG's too).
            base_url=_blank_to_none(t.get("base_url")) or default_base or openai_base,
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
    admins = _ids(env.get("ADMIN_USER_IDS") or "")

    return Settings(
        tiers=tiers,
        router=router,
        admin_user_ids=admins,
        record_group_messages=bool(b["record_group_messages"]),
        memory_scope=str(b["memory_scope"]),
        daily_budget_usd=float(b["daily_budget_usd"]),
        system_prompt=str(b["system_prompt"]).strip(),
        access=_access(data["access"], env),
        limits=section(LimitSettings, data["limits"], env),
        transcription=_transcription(data["transcription"], env, tiers.get(router.default_tier)),
        photos=section(PhotoSettings, data["photos"], env),
        memory=section(MemorySettings, data["memory"], env),
        memory_url=_blank_to_none(env.get("MEMORY_URL")),
        memory_token=_blank_to_none(env.get("MEMORY_API_TOKEN")),
        summary_base_url=_blank_to_none(env.get("SUMMARY_BASE_URL")),
        summary_model=_blank_to_none(env.get("SUMMARY_MODEL")),
        summary_api_key=_blank_to_none(env.get("SUMMARY_API_KEY")),
        telegram=section(TelegramSettings, data["telegram"], env),
        discord=section(DiscordSettings, data["discord"], env),
        console=section(ConsoleSettings, data["console"], env),
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
