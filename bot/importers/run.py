"""`chatbot import telegram|discord PATH`: check the whole export, then send it in batches.

Pass 1 reads every selected chat (a file of up to 64 MB parsed whole by orjson, a bigger one
streamed: memory stays bounded however big the file; the same records and refusals) and
refuses the file at the first malformed message, before anything is sent, so a broken file
imports nothing. What it read is spooled to an unnamed temporary file (gone when the import
ends, or if it dies) as the bodies of `POST /v1/chats/{chat}/import`, ready to send: each
message encoded once, batches per chat key. Pass 2 only sends them, one in flight while the
next is read, so the memory worker is never left waiting for the client. Message ids come
from the export, so a second run, or a run after an interrupted one, skips what is already
stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import orjson
from tqdm import tqdm

from bot.chat.memory.client import HttpMemoryClient, MemoryClient, MemoryRefused, MemoryUnavailable
from bot.chat.neutral import one_line, printable
from bot.chat.retry import RetryPlan, patiently
from bot.config import Settings
from bot.errors import ChatForgotten, ImportFailed
from bot.importers import discord, telegram
from bot.importers.common import MAX_TEXT_BYTES, ExportError, Record, Source
from bot.importers.where import where_lines
from memory_engine.api import wire

READERS: dict[str, Callable[[Path, str], Iterator[Source]]] = {
    "telegram": telegram.sources,
    "discord": discord.sources,
}
# Bigger batches cost the worker fewer statements and index segments per message (1000 -> 5000:
# about 8% less work in process); the bytes bound keeps a request far below the API's 32 MiB.
BATCH_MESSAGES = 5000
BATCH_BYTES = 4 * 1024 * 1024
SIZE_OF_THE_REST = 120  # a message's JSON besides its text and author: names, ids, time
MAX_MESSAGE_JSON = 6 * MAX_TEXT_BYTES + 6 * 1024  # every character escaped as \u00XX
IMPORT_TIMEOUT_S = 300.0  # one batch may wait behind a compaction of a big chat
# A batch the worker did not take is sent again after 0.5 s, 2 s and 8 s.
RETRY = RetryPlan(budget_s=math.inf, first_s=0.5, max_s=8.0, factor=4.0, max_tries=4)
# The end of a batch that is not its chat's last (wire.ImportRequest): more follow, and how many
# messages (the worker need not store the rows its retention cap deletes before the end).
MORE = b',"more":true,"remaining":%d'
RUN = b',"import_id":"%s","batch":%d'
PROGRESS_MIN = 2000  # smaller imports finish before a bar would say anything


@dataclass
class Plan:
    """What pass 1 found: messages per chat key, and the exported chats chosen."""

    messages: dict[str, int] = field(default_factory=dict)
    empty: int = 0  # service messages, bots, messages with no words
    chosen: list[str] = field(default_factory=list)
    private_left_out: int = 0  # private chats, not asked for
    names: dict[str, str] = field(default_factory=dict)  # chat key -> the exported chat's name
    warnings: list[str] = field(default_factory=list)  # private chats asked for: whose memory
    batches: dict[str, int] = field(default_factory=dict)  # chat key -> batches spooled
    cut: int = 0  # messages over MAX_TEXT_BYTES, cut to fit

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
    cut: int = 0  # messages over MAX_TEXT_BYTES, cut to fit
    stopped: dict[str, str] = field(default_factory=dict)  # key -> why its import stopped

    def line(self) -> str:
        """The one summary line."""
        took = f" in {self.seconds:.1f} s" if self.seconds >= 0.05 else ""
        return (
            f"imported {self.imported} messages{took}, skipped {self.skipped} already in memory "
            f"and {self.empty} without words (service messages, bots, empty), chats: {len(self.chats)}"
            + _cut(self.cut)
            + _left_out(self.private_left_out)
            + (f"; stopped {len(self.stopped)} chats (see below)" if self.stopped else "")
        )


def _cut(n: int) -> str:
    limit = f"{MAX_TEXT_BYTES // 1024} KB"
    return f"; cut {n} messages over {limit} to their first {limit} (the memory's limit)" if n else ""


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

    With `spool`, the records to send are written there as the bodies of `POST /import`,
    ready to send: batches of at most BATCH_MESSAGES (and about BATCH_BYTES) per chat key, in order.
    """
    if not path.exists():
        raise ExportError(path, "no such file or folder")
    with _no_collection():
        return _check(platform, path, chat=chat, scope=scope, progress=progress, spool=spool)


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector off: pass 1 makes millions of objects and no cycles, and each
    collection would walk every one still alive (about a tenth of the pass)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _check(
    platform: str, path: Path, *, chat: str | None, scope: str, progress: bool | None, spool: IO[bytes] | None
) -> Plan:
    plan, seen = Plan(), []
    batches = None if spool is None else _Batches(spool, plan.batches)
    big = path.is_file() and path.stat().st_size > 4 * 1024 * 1024
    with _bar(progress if progress is not None else (None if big else False), None, "checking") as bar:
        for source in READERS[platform](path, scope):
            seen.append(f"{one_line(printable(source.name))} ({source.key})")  # for a terminal
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
            counts, n = plan.messages, 0
            for n, record in enumerate(source.records(), 1):
                if record is None:
                    plan.empty += 1
                    continue
                plan.cut += record.cut
                key = record.key
                if key in counts:
                    counts[key] += 1
                else:
                    counts[key] = 1
                    plan.names[key] = source.name
                if batches is not None:
                    batches.add(record)
                if not n % 1000:
                    bar.update(1000)
            bar.update(n % 1000)
            if batches is not None:
                batches.flush()  # the end of a chat: what it holds goes now (memory stays flat)
    if chat is not None and not plan.chosen:
        listed = "; ".join(seen[:20]) + (" ..." if len(seen) > 20 else "")
        raise ExportError(path, f"no chat {chat!r} in this export; it holds: {listed or 'no chats'}")
    return plan


class _Batches:
    """The spool of pass 1: each batch as a line `key count size` and then `size` bytes, the
    JSON body of one `POST /import`, encoded in one call (pass 2 only sends it)."""

    def __init__(self, spool: IO[bytes], counts: dict[str, int]) -> None:
        self.spool, self.counts = spool, counts  # counts: batches written per chat key
        self.bodies: dict[str, list[dict[str, str]]] = {}
        self.sizes: dict[str, int] = {}

    def add(self, record: Record) -> None:
        key = record.key
        bodies = self.bodies.get(key)
        if bodies is None:
            bodies = self.bodies[key] = []
            self.sizes[key] = 0
        bodies.append(record.body())
        # Its JSON's size when the text needs no escapes (a close guess: `_write` checks it).
        self.sizes[key] += len(record.text) + len(record.author) + SIZE_OF_THE_REST
        if len(bodies) >= BATCH_MESSAGES or self.sizes[key] >= BATCH_BYTES:
            self._write(key, self.bodies.pop(key))

    def flush(self) -> None:
        for key in list(self.bodies):
            self._write(key, self.bodies.pop(key))

    def _write(self, key: str, bodies: list[dict[str, str]]) -> None:
        self.sizes.pop(key, None)
        body = orjson.dumps({"messages": bodies})
        if len(body) > BATCH_BYTES + MAX_MESSAGE_JSON and len(bodies) > 1:  # escapes, non-ASCII text
            half = len(bodies) // 2
            self._write(key, bodies[:half])
            self._write(key, bodies[half:])
            return
        self.spool.write(f"{key} {len(bodies)} {len(body)}\n".encode())
        self.spool.write(body)
        self.counts[key] = self.counts.get(key, 0) + 1


def spooled(spool: IO[bytes]) -> Iterator[tuple[str, int, bytes]]:
    """(chat key, messages, encoded body) of each batch pass 1 spooled, in order."""
    spool.seek(0)
    while line := spool.readline():
        key, count, size = line.split()
        yield key.decode(), int(count), spool.read(int(size))


async def send(spool: IO[bytes], memory: MemoryClient, plan: Plan, *, progress: bool | None) -> ImportReport:
    """Pass 2: send the batches of `spool`, one in flight while the next is read."""
    report = ImportReport(empty=plan.empty, private_left_out=plan.private_left_out, cut=plan.cut)
    started = time.perf_counter()
    show = progress if progress is not None else (None if plan.total >= PROGRESS_MIN else False)
    with _bar(show, plan.total, "importing", leave=True) as bar:
        in_flight: asyncio.Task[None] | None = None

        async def store(key: str, count: int, body: bytes) -> None:
            try:
                answer = await _import_batch(memory, key, body)
            except ChatForgotten as stop:
                report.stopped[key] = str(stop)
                return
            report.imported += int(answer.get("imported", 0))
            report.skipped += int(answer.get("skipped", 0))
            report.chats[key] = report.chats.get(key, 0) + int(answer.get("imported", 0))
            bar.update(count)

        try:
            # Batches go in order (ids grow with them), one at a time; the next one is read
            # while the worker stores this one. Each but a chat's last says `more` (the
            # worker indexes what the chat imported once, with its last batch) and how
            # many messages of the chat follow (`remaining`).
            sent: dict[str, int] = {}
            left = dict(plan.messages)  # messages of each chat not sent yet
            run = secrets.token_hex(8).encode()  # names this import's batches (`import_id`)
            for key, count, body in spooled(spool):
                sent[key] = sent.get(key, 0) + 1
                left[key] -= count
                tail = RUN % (run, sent[key])  # a later batch is refused once the chat was forgotten
                if plan.names.get(key):  # the chat's name in the export: the dashboard's title
                    body = body[:-1] + b',"title":' + orjson.dumps(plan.names[key]) + b"}"
                if sent[key] < plan.batches.get(key, 0):
                    tail += MORE % left[key]
                body = body[:-1] + tail + b"}"  # (the body ends with "}")
                if in_flight is not None:
                    await in_flight
                if key in report.stopped:  # forgotten under the import: nothing more of it
                    bar.update(count)
                    continue
                in_flight = asyncio.ensure_future(store(key, count, body))
                await asyncio.sleep(0)  # let it start sending
            if in_flight is not None:
                await in_flight
        finally:
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await in_flight
    report.seconds = time.perf_counter() - started
    return report


async def _import_batch(memory: MemoryClient, key: str, body: bytes) -> wire.ImportAnswer:
    async def send() -> wire.ImportAnswer:
        try:
            return await memory.import_encoded(key, body)
        except MemoryRefused as err:
            if err.status == 409:  # forgotten since the import's first batch of this chat
                raise ChatForgotten(err.error) from err
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
                f"chats: {len(plan.messages)}{_cut(plan.cut)}"
                f"{_left_out(plan.private_left_out)}; nothing sent",
                file=out,
            )
            for line in where_lines(plan.messages, plan.names, where, verb="to import"):
                print(line, file=out)
            chats = dict.fromkeys(plan.messages, 0)
            return ImportReport(empty=plan.empty, chats=chats, private_left_out=plan.private_left_out)
        async with open_memory(settings, data_dir) as memory:
            report = await send(spool, memory, plan, progress=progress)
    print(report.line(), file=out)
    for key, why in report.stopped.items():
        had = report.chats.get(key, 0)
        print(f"  {key}: stopped after {had} of its {plan.messages.get(key, 0)} messages: {why}", file=out)
    stored = {
        key: plan.messages.get(key, n) for key, n in report.chats.items() if key not in report.stopped
    }  # imported or skipped
    for line in where_lines(stored, plan.names, where, verb="in memory"):
        print(line, file=out)
    return report


def run_import(platform: str, path: Path, data_dir: Path, chat: str | None, dry_run: bool) -> int:
    """`chatbot import ...`: 0 when imported, 2 for a file it refuses, 1 when the memory failed
    or a chat was forgotten while it was imported (its import stopped there)."""
    from bot.config import load_settings

    try:
        report = asyncio.run(
            import_export(platform, path, load_settings(), data_dir, chat=chat, dry_run=dry_run)
        )
    except ExportError as err:
        print(f"error: {printable(str(err))}; nothing was imported", file=sys.stderr)  # an export's words
        return 2
    except ImportFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted: run the same command again to finish (stored messages are skipped)", file=sys.stderr
        )
        return 130
    return 1 if report.stopped else 0  # not all of it is in memory, on purpose: said above
