"""Helpers shared by the tests (no tests here), one module per subject, all importable from here:

- core: settings on the fake model server, a running pipeline, messages, `wait_until`, stored rows;
- net: ports that cannot race (`TcpGate`, `ServedMemory`, `port_of`);
- engine: the memory engine in process (retrieval tests);
- backends: the memory worker behind one client interface (local host, Worker, Pyodide), for
  contract tests;
- telegram / discord: the people of a chat, recording services, the adapters on the fakes;
- cli: the `chatbot` command run in this process (`run_cli`), for tests of what it prints
  and stores; the few tests of what only a real process shows keep their child process.
"""

from __future__ import annotations

from tests.support.backends import (
    TOKEN,
    WORKER_ORIGIN,
    Backend,
    LocalBackend,
    PyodideBackend,
    WorkerBackend,
    local_memory,
    start_backend,
)
from tests.support.core import (
    API_KEY,
    FAST,
    INSTANT,
    MEMORY_TOKEN,
    MODELS,
    REPO,
    MsClock,
    clean_env,
    console_chat,
    default_config_settings,
    image_bytes,
    make_settings,
    msg,
    no_wait,
    numbered,
    prompt_section,
    running_pipeline,
    stored_messages,
    tier_totals,
    wait_until,
)
from tests.support.discord import (
    ADMIN_NAMES,
    EVERYONE_NAMES,
    RecordingDiscordService,
    World,
    answered,
    discord_e2e_settings,
    discord_env,
    discord_on_pipeline,
    discord_settings_for,
    forget_clicked_by,
    running_client,
    slash,
)
from tests.support.engine import (
    FILLER,
    add,
    fts_row,
    ids_of,
    memory,
)
from tests.support.net import (
    ServedMemory,
    TcpGate,
    port_of,
)
from tests.support.telegram import (
    ADMIN_ONLY,
    OWNER_ID,
    People,
    RecordingService,
    answers,
    ask,
    bot_on_pipeline,
    running_bot,
    telegram_bot,
    telegram_e2e_settings,
    telegram_settings,
    telegram_settings_for,
)

__all__ = [
    "ADMIN_NAMES",
    "ADMIN_ONLY",
    "API_KEY",
    "EVERYONE_NAMES",
    "FAST",
    "FILLER",
    "INSTANT",
    "MEMORY_TOKEN",
    "MODELS",
    "OWNER_ID",
    "REPO",
    "TOKEN",
    "WORKER_ORIGIN",
    "Backend",
    "LocalBackend",
    "MsClock",
    "People",
    "PyodideBackend",
    "RecordingDiscordService",
    "RecordingService",
    "ServedMemory",
    "TcpGate",
    "WorkerBackend",
    "World",
    "add",
    "answered",
    "answers",
    "ask",
    "bot_on_pipeline",
    "clean_env",
    "console_chat",
    "default_config_settings",
    "discord_e2e_settings",
    "discord_env",
    "discord_on_pipeline",
    "discord_settings_for",
    "forget_clicked_by",
    "fts_row",
    "ids_of",
    "image_bytes",
    "local_memory",
    "make_settings",
    "memory",
    "msg",
    "no_wait",
    "numbered",
    "port_of",
    "prompt_section",
    "running_bot",
    "running_client",
    "running_pipeline",
    "slash",
    "start_backend",
    "stored_messages",
    "telegram_bot",
    "telegram_e2e_settings",
    "telegram_settings",
    "telegram_settings_for",
    "tier_totals",
    "wait_until",
]
