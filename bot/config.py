"""Settings: read once from config/bot.toml (or BOT_CONFIG), the environment and an env file.

config/bot.toml is the one place where defaults are stated: it ships inside the package (as
`bot.defaults`, see pyproject.toml), a BOT_CONFIG file is read over it (a table it leaves out
keeps the shipped values; its own [tiers] replace the shipped ones), and the dataclass
defaults below are read from it too. Every table is filled by one mapping, `section`: a
dataclass per table, each field its key (or its environment variable, named in the field's
metadata); a key no field has, or a table no type has, is an error naming the file and key.
"""

from __future__ import annotations

import copy
import functools
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from dotenv import dotenv_values

from bot.errors import SettingsError as SettingsError  # also here: callers read bot.config
from bot.settings_map import (
    DERIVED,
    NOT_NEGATIVE,
    POSITIVE,
    Check,
    blank_to_none,
    check_keys,
    checked,
    clock_time,
    date_languages,
    env_var,
    ids,
    one_of,
    port,
    time_zone,
    url,
)
from bot.settings_map import section as section

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
T = TypeVar("T")


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


def setting(table: str, key: str, check: Check, env: str | None = None) -> Any:
    """A settings field: the shipped default of `[table] key` (a list as a tuple), checked by `check`."""
    value = default(table, key)
    return field(default=tuple(value) if isinstance(value, list) else value, metadata=checked(check, env))


def with_defaults(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` (a parsed bot.toml) read over the shipped defaults: tables merge, values replace.

    A config with its own [tiers] replaces the shipped tiers whole, and then the shipped
    fallback order and default tier (which name the shipped tiers) give way to its own tiers
    (empty: every tier in its order, the first one by default).
    """
    merged = copy.deepcopy(_defaults())
    if "tiers" in data:
        merged["tiers"] = {}
        merged["router"]["fallback_order"] = []
        merged["router"]["default_tier"] = ""
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
    """One model tier ([tiers.NAME] over [tier_defaults]): where to call, which model, its size and prices."""

    name: str = field(metadata=DERIVED)  # the table's name
    model: str
    # resolved: its own, else OPENAI_BASE_URL, else [summary]'s
    base_url: str | None = field(default=None, metadata=checked(url()))
    api_key: str | None = field(default=None, metadata=DERIVED)  # read from `api_key_env`
    context_tokens: int = setting("tier_defaults", "context_tokens", POSITIVE)
    price_in_per_mtok: float = setting("tier_defaults", "price_in_per_mtok", NOT_NEGATIVE)
    price_out_per_mtok: float = setting("tier_defaults", "price_out_per_mtok", NOT_NEGATIVE)
    vision: bool = default("tier_defaults", "vision")  # the model accepts image parts
    api_key_env: str = default("tier_defaults", "api_key_env")  # where the key is: named in error hints

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What a call of these token counts costs at this tier's prices."""
        return round(
            (prompt_tokens * self.price_in_per_mtok + completion_tokens * self.price_out_per_mtok) / 1e6, 10
        )


@dataclass(frozen=True)
class AccessSettings:
    """Who may use the bot ([access]; ALLOWED_USER_IDS / ALLOWED_CHAT_IDS replace the lists)."""

    # Both empty: everyone.
    allowed_user_ids: frozenset[str] = field(
        default=frozenset(default("access", "allowed_user_ids")), metadata=env_var("ALLOWED_USER_IDS")
    )
    allowed_chat_ids: frozenset[str] = field(
        default=frozenset(default("access", "allowed_chat_ids")), metadata=env_var("ALLOWED_CHAT_IDS")
    )
    refusal_interval_s: float = setting("access", "refusal_interval_s", NOT_NEGATIVE)


@dataclass(frozen=True)
class LimitSettings:
    """Daily caps ([limits]); 0 means no cap."""

    user_messages_per_day: int = setting("limits", "user_messages_per_day", NOT_NEGATIVE)
    chat_messages_per_day: int = setting("limits", "chat_messages_per_day", NOT_NEGATIVE)
    user_cost_usd_per_day: float = setting("limits", "user_cost_usd_per_day", NOT_NEGATIVE)
    chat_cost_usd_per_day: float = setting("limits", "chat_cost_usd_per_day", NOT_NEGATIVE)


@dataclass(frozen=True)
class TranscriptionSettings:
    """Speech to text ([transcription]): endpoint and key resolved (the default tier's unless set)."""

    model: str = default("transcription", "model")
    # resolved: its own, else the default tier's, else OPENAI_BASE_URL
    base_url: str | None = field(default=None, metadata=checked(url()))
    api_key_env: str | None = None  # where its own key is; None: the default tier's key
    api_key: str | None = field(default=None, metadata=DERIVED)  # None: no transcription (offline)
    max_duration_s: float = setting("transcription", "max_duration_s", POSITIVE)
    max_bytes: int = setting("transcription", "max_bytes", POSITIVE)
    timeout_s: float = setting("transcription", "timeout_s", POSITIVE)


@dataclass(frozen=True)
class PhotoSettings:
    """Photos ([photos]): the size sent to a vision tier, the largest file taken."""

    max_side_px: int = setting("photos", "max_side_px", POSITIVE)
    max_bytes: int = setting("photos", "max_bytes", POSITIVE)


@dataclass(frozen=True)
class ChoiceRules:
    """The tier router's signals: thresholds and words ([router.choice]; see bot/chat/models/tiers.py)."""

    long_chars: int = setting("router.choice", "long_chars", NOT_NEGATIVE)
    very_long_chars: int = setting("router.choice", "very_long_chars", NOT_NEGATIVE)
    short_chars: int = setting("router.choice", "short_chars", NOT_NEGATIVE)
    long_conversation: int = setting("router.choice", "long_conversation", NOT_NEGATIVE)  # messages
    heavy_at: int = default("router.choice", "heavy_at")
    light_at: int = default("router.choice", "light_at")
    heavy_words: tuple[str, ...] = tuple(default("router.choice", "heavy_words"))


@dataclass(frozen=True)
class RouterSettings:
    """[router]: how the tier router picks a tier, and how the fallback retries and moves on."""

    fallback_order: tuple[str, ...] = tuple(default("router", "fallback_order"))
    default_tier: str = default("router", "default_tier")
    time_budget_s: float = setting("router", "time_budget_s", POSITIVE)
    request_timeout_s: float = setting("router", "request_timeout_s", POSITIVE)
    max_attempts_per_tier: int = setting("router", "max_attempts_per_tier", POSITIVE)
    # A longer Retry-After: the next tier.
    max_retry_wait_s: float = setting("router", "max_retry_wait_s", NOT_NEGATIVE)
    choice: ChoiceRules = field(default_factory=ChoiceRules)  # [router.choice]


@dataclass(frozen=True)
class TelegramSettings:
    """[telegram] and the TELEGRAM_* variables (docs/telegram.md)."""

    token: str | None = field(default=None, metadata=env_var("TELEGRAM_BOT_TOKEN"))
    api_base_url: str | None = field(default=None, metadata=checked(url(), "TELEGRAM_API_BASE_URL"))
    webhook_url: str | None = field(default=None, metadata=checked(url(), "TELEGRAM_WEBHOOK_URL"))
    streaming: bool = default("telegram", "streaming")
    # How long a reply keeps being retried through a platform outage (5xx, refused, timeouts)
    # before it is logged as undelivered; the conversation in memory is intact either way.
    send_budget_s: float = setting("telegram", "send_budget_s", NOT_NEGATIVE)
    webhook_listen: str = field(
        default=default("telegram", "webhook_listen"), metadata=env_var("TELEGRAM_WEBHOOK_LISTEN")
    )
    webhook_port: int = setting("telegram", "webhook_port", port, "TELEGRAM_WEBHOOK_PORT")


@dataclass(frozen=True)
class DiscordSettings:
    """[discord] and the DISCORD_* variables (docs/discord.md)."""

    token: str | None = field(default=None, metadata=env_var("DISCORD_BOT_TOKEN"))
    api_base_url: str | None = field(default=None, metadata=checked(url(), "DISCORD_API_BASE_URL"))
    gateway_url: str | None = field(default=None, metadata=checked(url("ws", "wss"), "DISCORD_GATEWAY_URL"))
    dev_guild_id: str | None = field(default=None, metadata=env_var("DISCORD_DEV_GUILD_ID"))
    streaming: bool = default("discord", "streaming")
    send_budget_s: float = setting("discord", "send_budget_s", NOT_NEGATIVE)


@dataclass(frozen=True)
class ConsoleSettings:
    """[console]: `chatbot chat` needs no credentials."""

    streaming: bool = default("console", "streaming")


@dataclass(frozen=True)
class MemoryRetry:
    """How the bot retries the memory worker: after a failure it is skipped `retry_s`, doubling
    up to `retry_max_s`; the outbox is replayed every `replay_interval_s` (the memory gateway)."""

    replay_interval_s: float = setting("memory", "replay_interval_s", POSITIVE)
    retry_s: float = setting("memory", "retry_s", POSITIVE)
    retry_max_s: float = setting("memory", "retry_max_s", POSITIVE)


@dataclass(frozen=True)
class MemorySettings(MemoryRetry):
    """[memory]: how the bot talks to the memory worker: its retries, and each request's timeout."""

    timeout_s: float = setting("memory", "timeout_s", POSITIVE)


@dataclass(frozen=True)
class FollowupSettings:
    """[followups]: when the day-after check-ins are asked (see config/bot.toml)."""

    checkin_time: str = setting("followups", "checkin_time", clock_time)
    quiet_start: str = setting("followups", "quiet_start", clock_time)
    quiet_end: str = setting("followups", "quiet_end", clock_time)


@dataclass(frozen=True)
class ReminderSettings:
    """[reminders]: parsing and delivery of reminders (see config/bot.toml)."""

    default_timezone: str = setting("reminders", "default_timezone", time_zone)
    date_only_time: str = setting("reminders", "date_only_time", clock_time)
    languages: tuple[str, ...] = setting("reminders", "languages", date_languages)
    late_after_s: float = setting("reminders", "late_after_s", NOT_NEGATIVE)
    poll_s: float = setting("reminders", "poll_s", POSITIVE)
    lease_s: float = setting("reminders", "lease_s", POSITIVE)
    retry_s: float = setting("reminders", "retry_s", POSITIVE)


@dataclass(frozen=True)
class _BotTable:
    """[bot]: kept in `Settings` itself."""

    record_group_messages: bool = default("bot", "record_group_messages")
    memory_scope: str = setting("bot", "memory_scope", one_of("chat", "user"))  # "chat" or "user"
    daily_budget_usd: float = setting("bot", "daily_budget_usd", NOT_NEGATIVE)
    system_prompt: str = default("bot", "system_prompt")


@dataclass(frozen=True)
class _SummaryTable:
    """[summary]: the endpoint of a tier that names none (the SUMMARY_* variables: the rest)."""

    openai_base_url: str | None = setting("summary", "openai_base_url", url())


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
    try:
        with open(config_path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{config_path}: cannot be read as TOML ({exc})") from exc
    return settings_from(data, merged, source=str(config_path))


_URL_VARIABLES = ("MEMORY_URL", "OPENAI_BASE_URL", "SUMMARY_BASE_URL")  # read outside any table

# Each table of bot.toml and the type that holds it ([tiers.NAME] and [bot]/[summary] apart).
_TABLES: dict[str, type] = {
    "access": AccessSettings,
    "limits": LimitSettings,
    "transcription": TranscriptionSettings,
    "photos": PhotoSettings,
    "router": RouterSettings,
    "memory": MemorySettings,
    "telegram": TelegramSettings,
    "discord": DiscordSettings,
    "console": ConsoleSettings,
    "reminders": ReminderSettings,
    "followups": FollowupSettings,
    "bot": _BotTable,
    "summary": _SummaryTable,
}


def settings_from(data: Mapping[str, Any], env: Mapping[str, str], source: str = "settings") -> Settings:
    """Build Settings from parsed TOML (read over the shipped defaults) and an environment mapping;
    `source` (the file) is named in errors."""
    unknown = sorted(set(data) - {*_TABLES, "tiers", "tier_defaults"})
    if unknown:
        raise SettingsError(
            f"{source}: no table [{unknown[0]}] (tables: {', '.join(sorted(_TABLES))}, tiers)"
        )
    data = with_defaults(data)
    problems: list[str] = []  # every wrong value, said at once (doctor lists each)

    def table(cls: type[T], name: str) -> T:
        return section(cls, data[name], env, name, source, problems)

    # In the order of _TABLES: the problems of several bad tables are named in that order.
    access, limits = table(AccessSettings, "access"), table(LimitSettings, "limits")
    transcription, photos = table(TranscriptionSettings, "transcription"), table(PhotoSettings, "photos")
    router, memory = table(RouterSettings, "router"), table(MemorySettings, "memory")
    telegram, discord = table(TelegramSettings, "telegram"), table(DiscordSettings, "discord")
    console, reminders = table(ConsoleSettings, "console"), table(ReminderSettings, "reminders")
    followups, bot, summary = (
        table(FollowupSettings, "followups"),
        table(_BotTable, "bot"),
        table(_SummaryTable, "summary"),
    )
    tiers = _tiers(data, env, source, summary.openai_base_url, problems)
    for var in _URL_VARIABLES:
        value = blank_to_none(env.get(var))
        if value is not None and (wrong := url()(value)):
            problems.append(f"{source}: {var} = {value!r} {wrong}")
    if problems:
        raise SettingsError(*problems)
    router = replace(
        router,
        fallback_order=router.fallback_order or tuple(tiers),
        default_tier=router.default_tier or next(iter(tiers), ""),
    )
    return Settings(
        tiers=tiers,
        router=router,
        admin_user_ids=ids(env.get("ADMIN_USER_IDS") or ""),
        record_group_messages=bot.record_group_messages,
        memory_scope=bot.memory_scope,
        daily_budget_usd=bot.daily_budget_usd,
        system_prompt=bot.system_prompt,
        access=access,
        limits=limits,
        transcription=_transcription(transcription, env, tiers.get(router.default_tier)),
        photos=photos,
        memory=memory,
        memory_url=blank_to_none(env.get("MEMORY_URL")),
        memory_token=blank_to_none(env.get("MEMORY_API_TOKEN")),
        summary_base_url=blank_to_none(env.get("SUMMARY_BASE_URL")),
        summary_model=blank_to_none(env.get("SUMMARY_MODEL")),
        summary_api_key=blank_to_none(env.get("SUMMARY_API_KEY")),
        telegram=telegram,
        discord=discord,
        console=console,
        reminders=reminders,
        followups=followups,
    )


def _tiers(
    data: Mapping[str, Any],
    env: Mapping[str, str],
    source: str,
    openai_base: str | None,
    problems: list[str] | None = None,
) -> dict[str, Tier]:
    """[tiers.NAME], each over [tier_defaults]; key from its `api_key_env`; endpoint: its own,
    else OPENAI_BASE_URL, else [summary] openai_base_url (BOT_CONFIG's too)."""
    check_keys(Tier, data["tier_defaults"], "tier_defaults", source)
    default_base = blank_to_none(env.get("OPENAI_BASE_URL"))
    tiers: dict[str, Tier] = {}
    for name, table in data["tiers"].items():
        check_keys(Tier, table, f"tiers.{name}", source)
        tier = section(
            Tier, {**data["tier_defaults"], **table}, env, f"tiers.{name}", source, problems, name=name
        )
        tiers[name] = replace(
            tier,
            base_url=tier.base_url or default_base or openai_base,
            api_key=blank_to_none(env.get(tier.api_key_env)),
        )
    return tiers


def _transcription(
    t: TranscriptionSettings, env: Mapping[str, str], tier: Tier | None
) -> TranscriptionSettings:
    """[transcription]'s key from its `api_key_env`; its endpoint and key, else the default tier's."""
    api_key = blank_to_none(env.get(t.api_key_env)) if t.api_key_env else None
    base_url = t.base_url
    if tier is not None:
        api_key = api_key or tier.api_key
        base_url = base_url or tier.base_url
    return replace(t, base_url=base_url or blank_to_none(env.get("OPENAI_BASE_URL")), api_key=api_key)
