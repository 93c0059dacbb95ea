"""`chatbot memory serve`: the local host as a process, configured from the environment.

The settings have the Worker's names (`MEMORY_API_TOKEN`, `SUMMARY_BASE_URL`,
`SUMMARY_MODEL`, `SUMMARY_API_KEY`, `RETENTION_MESSAGES`); an old name is still accepted
with a deprecation warning.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memory_engine.settings import retention_setting
from memory_worker.local import logs
from memory_worker.local.embedded import EmbeddedMemoryHost

log = logging.getLogger("memory_worker.local")


@dataclass(frozen=True)
class HostSettings:
    """What `chatbot memory serve` reads from its environment."""

    token: str | None
    summary_base_url: str | None
    summary_model: str | None
    summary_api_key: str | None
    retention: int | None


def settings_from_env(environ: Mapping[str, str]) -> HostSettings:
    """The host's settings from `environ`; warns (DeprecationWarning and a log line) on old names."""

    def get(name: str) -> str | None:
        return environ.get(name, "").strip() or None

    retention, notes = retention_setting(get)
    for note in notes:
        log.warning(note)
        if "deprecated" in note:
            warnings.warn(note, DeprecationWarning, stacklevel=2)
    return HostSettings(
        token=get("MEMORY_API_TOKEN"),
        summary_base_url=get("SUMMARY_BASE_URL"),
        summary_model=get("SUMMARY_MODEL"),
        summary_api_key=get("SUMMARY_API_KEY"),
        retention=retention,
    )


def is_loopback(host: str) -> bool:
    """True when `host` names this machine only (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serving_token(host: str, token: str | None) -> str | None:
    """The API token to serve with: `token`, else one generated for a loopback host (printed).

    None (after printing why) when `token` is unset and `host` is not loopback.
    """
    if token:
        return token
    if not is_loopback(host):
        print("refusing to serve on a non-loopback address without MEMORY_API_TOKEN")
        return None
    import secrets

    token = secrets.token_urlsafe(32)
    print(f"MEMORY_API_TOKEN not set; generated one for this run: {token}", flush=True)
    return token


def serve_forever(host: str, port: int, data_dir: Path) -> int:
    """`chatbot memory serve`: serve until SIGINT/SIGTERM; returns the exit code.

    With port 0 the system picks a free port; the first line printed names the URL served.
    """
    logs.configure()
    settings = settings_from_env(os.environ)
    url = settings.summary_base_url
    if url and not (urlsplit(url).scheme in ("http", "https") and urlsplit(url).netloc):
        print(
            f"error: SUMMARY_BASE_URL = {url!r} is not a URL: it must start with http:// or https://",
            file=sys.stderr,
        )
        return 2
    token = serving_token(host, settings.token)
    if token is None:
        return 2

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        embedded = EmbeddedMemoryHost(
            data_dir,
            token=token,
            port=port,
            bind=host,
            summary_base_url=settings.summary_base_url,
            summary_model=settings.summary_model,
            summary_api_key=settings.summary_api_key,
            retention=settings.retention,
        )
        async with embedded:
            assert embedded.host is not None
            print(f"memory host serving {data_dir} on {embedded.url}", flush=True)
            log.info(
                "serving",
                extra={
                    "fields": {"data": str(data_dir), "port": embedded.port, "version": embedded.host.version}
                },
            )
            await stop.wait()
            log.info(
                "stopping: finishing in-flight requests",
                extra={"fields": {"in_flight": embedded.host.in_flight}},
            )
        # __aexit__ answered the in-flight requests, stopped the alarms, checkpointed every WAL.
        log.info("stopped cleanly")

    asyncio.run(run())
    return 0
