"""`chatbot import telegram|discord PATH`: check the whole export, then send it in batches.

Pass 1 reads every selected chat (streamed: memory stays flat however big the file) and
refuses the file at the first malformed message, before anything is sent, so a broken file
imports nothing. What it read is spooled, one converted record a line, to an unnamed
temporary file (gone when the import ends, or if it dies); pass 2 sends each chat's records
from there through `POST /v1/chats/{chat}/import`, reading the next batch while the memory
worker stores the one before. Message ids come from the export, so a second run, or a run
after an interrupted one, skips what is already stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO, cast

from memory_engine import wire
from tqdm import tqdm

from bot.chat.memory import HttpMemoryClient, MemoryClient, MemoryRefused, MemoryUnavailable
from bot.chat.retry import RetryPlan, patiently
from bot.config import Settings
from bot.importers import discord, telegram
from bot.importers.common import ExportError, Source
from bot.importers.where import where_lines

READERS: dict[str, Callable[[Path, str], Iterator[Source]]] = {
    "telegram": telegram.sources,
    "discord": discord.sources,
}
# Bigger batches cost the worker fewer statements and index segments per message (1000 -> 5000:
# about 8% less work in process); the bytes bound keeps a request far below the API's 32 MiB.
BATCH_MESSAGES = 5000
BATCH_BYTES = 4 * 1024 * 1024
IMPORT_TIMEOUT_S = 300.0  # one batch may wait behind a compaction of a big chat
# A batch the worker did not take is sent again after 0.5 s, 2 s and 8 s.
RETRY = RetryPlan(budget_s=math.inf, first_s=0.5, max_s=8.0, factor=4.0, max_tries=4)
PROGRESS_MIN = 2000  # smaller imports finish before a bar would say anything


class ImportFailed(RuntimeError):
    """The memory worker refused or did not take a batch; what was sent before it stays stored."""


@dataclass
class Plan:
    """What pass 1 found: messages per chat key, and the exported chats chosen."""

    messages: dict[str, int] = field(default_factory=dict)
    empty: int = 0  # service messages, bots, messages with no words
    chosen: list[str] = field(default_factory=list)
    private_left_out: int = 0  # private chats, not asked for
    names: dict[str, str] = field(default_factory=dict)  # chat key -> the exported chat's name
    warnings: list[str] = field(default_factory=list)  # private chats asked for: whose memory

    @property
    def total(self) -> int:
        """Messages to send."""
        return sum(self.messages.values())


@dataclass
class ImportReport:
    """What an import did."""

    imported: int = 0
    skipped: int = 0  # already in memory (same message id)
    empty: int = 0
    chats: dict[str, int] = field(default_factory=dict)  # key -> messages imported
    seconds: float = 0.0
    private_left_out: int = 0

    def line(self) -> str:
        """The one summary line."""
        took = f" in {self.seconds:.1f} s" if self.seconds >= 0.05 else ""
        return (
            f"imported {self.imported} messages{took}, skipped {self.skipped} already in memory "
            f"and {self.empty} without words (service messages, bots, empty), chats: {len(self.chats)}"
            + _left_out(self.private_left_out)
        )


def _left_out(n: int) -> str:
    return f"; left out {n} private chats (import one with --chat NAME)" if n else ""


def _selected(source: Source, chat: str | None) -> bool:
    return (chat is None and not source.private) or chat in source.aliases


def check(
    platform: str,
    path: Path,
    *,
    chat: str | None,
    scope: str,
    progress: bool | None,
    spool: IO[bytes] | None = None,
) -> Plan:
    """Pass 1: read and validate every selected chat; what would be imported. Raises ExportError.

    With `spool`, each record to send is written there as a line of JSON, `[chat key, body]`,
    and `null` after each chat.
    """
    if not path.exists():
        raise ExportError(path, "no such file or folder")
    plan, seen = Plan(), []
    big = path.is_file() and path.stat().st_size > 4 * 1024 * 1024
    with _bar(progress if progress is not None else (None if big else False), None, "checking") as bar:
        for source in READERS[platform](path, scope):
            seen.append(f"{source.name} ({source.key})")
            if not _selected(source, chat):
                plan.private_left_out += source.private and chat is None
                continue
            plan.chosen.append(source.label)
            if source.private:
                person = source.key.split(":", 1)[1]
                plan.warnings.append(
                    f"warning: {source.label} is the private chat of {person} with the bot ({source.key}); "
                    "its messages become the bot's memory of that person"
                )
            for n, record in enumerate(source.records(), 1):
                if record is None:
                    plan.empty += 1
                else:
                    plan.messages[record.key] = plan.messages.get(record.key, 0) + 1
                    plan.names[record.key] = source.name
                    if spool is not None:
                        spool.write(_dumps([record.key, record.body()]).encode())
                        spool.write(b"\n")
                if n % 1000 == 0:
                    bar.update(1000)
            if spool is not None:
                spool.write(b"null\n")  # the end of a chat: pass 2 sends what it holds
    if chat is not None and not plan.chosen:
        listed = "; ".join(seen[:20]) + (" ..." if len(seen) > 20 else "")
        raise ExportError(path, f"no chat {chat!r} in this export; it holds: {listed or 'no chats'}")
    return plan


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _spooled(spool: IO[bytes]) -> Iterator[tuple[str, dict[str, Any], int] | None]:
    """(chat key, body, size in bytes) of each record pass 1 spooled, in order; None after a chat."""
    spool.seek(0)
    for line in spool:
        record = json.loads(line)
        yield None if record is None else (record[0], record[1], len(line))


async def send(spool: IO[bytes], memory: MemoryClient, plan: Plan, *, progress: bool | None) -> ImportReport:
    """Pass 2: send the checked records of `spool` in batches per chat key, one batch in flight."""
    report = ImportReport(empty=plan.empty, private_left_out=plan.private_left_out)
    started = time.perf_counter()
    buffers: dict[str, list[dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    show = progress if progress is not None else (None if plan.total >= PROGRESS_MIN else False)
    with _bar(show, plan.total, "importing", leave=True) as bar:
        in_flight: asyncio.Task[None] | None = None

        async def store(key: str, batch: list[dict[str, Any]]) -> None:
            answer = await _import_batch(memory, key, batch)
            report.imported += int(answer.get("imported", 0))
            report.skipped += int(answer.get("skipped", 0))
            report.chats[key] = report.chats.get(key, 0) + int(answer.get("imported", 0))
            bar.update(len(batch))

        async def flush(key: str) -> None:
            # Batches go in order (ids grow with them), one at a time; the next one is read
            # while the worker stores this one.
            nonlocal in_flight
            batch = buffers.pop(key, [])
            sizes.pop(key, None)
            if in_flight is not None:
                await in_flight
                in_flight = None
            if batch:
                in_flight = asyncio.ensure_future(store(key, batch))
                await asyncio.sleep(0)  # let it start sending

        try:
            for record in _spooled(spool):
                if record is None:  # a chat's end: its buffers go now (memory stays flat)
                    for key in list(buffers):
                        await flush(key)
                    continue
                key, body, size = record
                buffers.setdefault(key, []).append(body)
                sizes[key] = sizes.get(key, 0) + size
                if len(buffers[key]) >= BATCH_MESSAGES or sizes[key] >= BATCH_BYTES:
                    await flush(key)
            for key in list(buffers):
                await flush(key)
            if in_flight is not None:
                await in_flight
        finally:
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await in_flight
    report.seconds = time.perf_counter() - started
    return report


async def _import_batch(memory: MemoryClient, key: str, batch: list[dict[str, Any]]) -> wire.ImportAnswer:
    # Record.body() is the import route's message (role is one of the API's roles).
    bodies = [cast(wire.ImportedMessage, body) for body in batch]

    async def send() -> wire.ImportAnswer:
        try:
            return await memory.import_messages(key, bodies)
        except MemoryRefused as err:
            raise ImportFailed(f"the memory worker refused a batch for {key}: {err.error}") from err
        except MemoryUnavailable as err:
            if err.status in (401, 403):  # no retry heals a wrong token
                raise ImportFailed(
                    f"the memory worker refused the token ({err}): check MEMORY_API_TOKEN "
                    "(the worker's secret); nothing more was sent"
                ) from err
            if err.status == 404:  # nor a URL that is not the worker's
                raise ImportFailed(
                    f"no memory API at that address ({err}): check MEMORY_URL (the worker's URL, "
                    "without a path); nothing more was sent"
                ) from err
            raise

    try:
        return await patiently(
            send,
            what=f"import batch for {key}",
            plan=RETRY,
            transient=(MemoryUnavailable,),
            final=(ImportFailed,),
        )
    except MemoryUnavailable as err:
        raise ImportFailed(
            f"the memory worker did not take a batch for {key} ({err}); run the same "
            "command again: what is stored already is skipped"
        ) from err


@contextlib.contextmanager
def _bar(show: bool | None, total: int | None, what: str, leave: bool = False) -> Iterator[Any]:
    """A tqdm bar on stderr (messages, rate, time left); `show=None`: only on a terminal."""
    with tqdm(
        total=total,
        desc=what,
        unit="msg",
        unit_scale=True,
        file=sys.stderr,
        disable=None if show is None else not show,
        leave=leave,
        mininterval=0.5,
    ) as bar:
        yield bar


@contextlib.asynccontextmanager
async def open_memory(settings: Settings, data_dir: Path) -> AsyncIterator[MemoryClient]:
    """MEMORY_URL when set, else the embedded host on `data_dir/memory` (as `chatbot chat` does)."""
    if settings.memory_url is not None:
        async with HttpMemoryClient(
            settings.memory_url, settings.memory_token, timeout=IMPORT_TIMEOUT_S
        ) as client:
            yield client
        return
    from memory_worker.local import EmbeddedMemoryHost

    async with (
        EmbeddedMemoryHost(Path(data_dir) / "memory", token=None, summarizer=None) as host,
        HttpMemoryClient(host.url, host.token, timeout=IMPORT_TIMEOUT_S) as client,
    ):
        yield client


async def import_export(
    platform: str,
    path: Path,
    settings: Settings,
    data_dir: Path,
    *,
    chat: str | None = None,
    dry_run: bool = False,
    progress: bool | None = None,
    out: TextIO | None = None,
) -> ImportReport:
    """Check, then import, one export file (or a folder of Discord exports); prints the summary line."""
    out = out or sys.stdout
    scope = settings.memory_scope
    with tempfile.TemporaryFile() as spool:  # unnamed: nobody else can open it, gone at close or exit
        plan = check(
            platform, Path(path), chat=chat, scope=scope, progress=progress, spool=None if dry_run else spool
        )
        where = None if settings.memory_url else Path(data_dir)
        for warning in plan.warnings:
            print(warning, file=out)
        if dry_run:
            print(
                f"would import up to {plan.total} messages ({plan.empty} without words), "
                f"chats: {len(plan.messages)}{_left_out(plan.private_left_out)}; nothing sent",
                file=out,
            )
            for line in where_lines(plan.messages, plan.names, where, verb="to import"):
                print(line, file=out)
            chats = dict.fromkeys(plan.messages, 0)
            return ImportReport(empty=plan.empty, chats=chats, private_left_out=plan.private_left_out)
        async with open_memory(settings, data_dir) as memory:
            report = await send(spool, memory, plan, progress=progress)
    print(report.line(), file=out)
    stored = {key: plan.messages.get(key, n) for key, n in report.chats.items()}  # imported or skipped
    for line in where_lines(stored, plan.names, where, verb="in memory"):
        print(line, file=out)
    return report


def run_import(platform: str, path: Path, data_dir: Path, chat: str | None, dry_run: bool) -> int:
    """`chatbot import ...`: 0 when imported, 2 for a file it refuses, 1 when the memory failed."""
    from bot.config import load_settings

    try:
        asyncio.run(import_export(platform, path, load_settings(), data_dir, chat=chat, dry_run=dry_run))
    except ExportError as err:
        print(f"error: {err}; nothing was imported", file=sys.stderr)
        return 2
    except ImportFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted: run the same command again to finish (stored messages are skipped)", file=sys.stderr
        )
        return 130
    return 0
