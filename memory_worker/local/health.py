"""`GET /health` of the local host: the Worker's answer, plus the state of the storage on request."""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
from pathlib import Path
from typing import NotRequired, TypedDict

from memory_engine.api.wire import Health
from memory_worker.local.alarms import AlarmTable
from memory_worker.local.chats import ChatStore


@functools.cache  # importlib.metadata is slow to import and to read: once per process
def host_version() -> str:
    """The installed package version ("dev" when running from a bare checkout)."""
    try:
        from importlib.metadata import version

        return version("chatbot")
    except Exception:
        return "dev"


class StorageState(TypedDict):
    """`/health?detail=1`'s `storage`: no chat data, only counts, free space, whether writes work."""

    data_dir_writable: bool
    open_chats: int
    pending_alarms: int | None
    compactions_running: int
    disk_free_bytes: NotRequired[int]
    error: NotRequired[str]


class HealthAnswer(Health, total=False):
    """`GET /health` of the local host: the Worker's answer, and with `?detail=1` (or when
    storage is broken) the host's version, its storage state, requests in flight, uptime."""

    host_version: str
    storage: StorageState
    in_flight: int
    uptime_s: float


def storage_state(data_dir: Path, store: ChatStore, alarms: AlarmTable, compactions: int) -> StorageState:
    """What the storage looks like now; an `error` key when it is not healthy.

    No chat data: only counts, free space and whether the data folder takes a write.
    """
    state: StorageState = {
        "data_dir_writable": False,
        "open_chats": store.open_count,
        "pending_alarms": None,
        "compactions_running": compactions,
    }
    probe = data_dir / f".health-{os.getpid()}"
    try:  # a real write: a full or read-only disk shows up here
        probe.write_bytes(b"ok")
        state["data_dir_writable"] = True
    except OSError as err:
        state["error"] = err.strerror or "not writable"
    finally:
        probe.unlink(missing_ok=True)
    try:
        state["disk_free_bytes"] = shutil.disk_usage(data_dir).free
        state["pending_alarms"] = alarms.count()
    except (OSError, sqlite3.Error) as err:
        state["error"] = str(err)
    return state


def healthy(state: StorageState) -> bool:
    """True when the storage state says the host can serve writes."""
    return bool(state["data_dir_writable"]) and "error" not in state
