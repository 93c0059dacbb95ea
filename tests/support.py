"""Helpers shared by the tests (no tests here): fake-server settings, a running router, a chat memory."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from memory_engine import ChatMemory

from bot.app import build_router
from bot.config import Settings, settings_from
from bot.router.pipeline import Router, RouterOptions
from bot.router.types import IncomingMessage
from memory_worker.local import SqliteStorage

API_KEY = "sk-test-secret-0123456789abcdefXYZ"
MODELS = {"light": "m-light", "standard": "m-standard", "heavy": "m-heavy"}
FAST = RouterOptions(replay_interval_s=0.05, memory_retry_s=0.05, memory_retry_max_s=0.2)


async def no_wait(seconds: float) -> None:
    """An injected sleep for the tier router: every retry decision is made, no time is waited."""
    await asyncio.sleep(0)


# For tests of what the router decides, not of how long it waits (those keep FAST).
INSTANT = dataclasses.replace(FAST, sleep=no_wait)


def make_settings(
    base_url: str | None,
    *,
    api_key: str | None = API_KEY,
    fallback: tuple[str, ...] = ("standard", "light", "heavy"),
    time_budget_s: float = 10.0,
    request_timeout_s: float = 10.0,  # tests of timeouts pass their own
    attempts: int = 2,
    max_retry_wait_s: float = 2.0,
    daily_budget_usd: float = 1.0,
    memory_url: str | None = None,
    memory_token: str | None = None,
    choice: dict[str, Any] | None = None,
    summary_model: str | None = "offline",
) -> Settings:
    """Settings with three tiers on the fake server (models m-light, m-standard, m-heavy).

    Compaction summarizes offline unless `summary_model` says otherwise (None: the cheapest
    tier, the product's default), so the fake model sees only the router's calls.
    """
    data: dict[str, Any] = {
        "bot": {"daily_budget_usd": daily_budget_usd},
        "router": {
            "fallback_order": list(fallback),
            "default_tier": "standard",
            "time_budget_s": time_budget_s,
            "request_timeout_s": request_timeout_s,
            "max_attempts_per_tier": attempts,
            "max_retry_wait_s": max_retry_wait_s,
            # No "small talk" shortcut by default: short test messages stay on the default tier.
            "choice": {"short_chars": 0} if choice is None else choice,
        },
        "tiers": {
            "light": {"model": MODELS["light"], "price_in_per_mtok": 0.1, "price_out_per_mtok": 0.4},
            "standard": {"model": MODELS["standard"], "price_in_per_mtok": 0.4, "price_out_per_mtok": 1.6},
            "heavy": {"model": MODELS["heavy"], "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0},
        },
    }
    env: dict[str, str] = {}
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    if memory_url:
        env["MEMORY_URL"] = memory_url
    if memory_token:
        env["MEMORY_API_TOKEN"] = memory_token
    if summary_model:
        env["SUMMARY_MODEL"] = summary_model
    return settings_from(data, env)


@contextlib.asynccontextmanager
async def running_router(settings: Settings, data_dir: Path, **kwargs: Any) -> AsyncIterator[Router]:
    """build_router with fast outbox replay (embedded memory host unless settings say otherwise)."""
    kwargs.setdefault("options", FAST)
    async with build_router(settings, data_dir, **kwargs) as router:
        yield router


def msg(
    text: str,
    *,
    chat: str = "test:chat",
    author: str = "ada",
    author_id: str = "u1",
    message_id: str | None = None,
    admin: bool = True,
    **extra: Any,
) -> IncomingMessage:
    """An incoming message with test defaults."""
    return IncomingMessage(
        chat_key=chat,
        author=author,
        author_id=author_id,
        text=text,
        message_id=message_id,
        is_admin=admin,
        **extra,
    )


async def wait_until(
    predicate: Callable[[], Awaitable[Any] | Any], timeout: float = 5.0, what: str = "condition"
) -> Any:
    """Poll `predicate` (sync or async) until truthy, failing after `timeout` seconds; its value.

    For state with no event to wait on; where a fake offers an event (`wait_for`), use that.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)  # a poll step with a deadline, not a wait-for-luck sleep


def stored_messages(memory_dir: Path, chat_key: str) -> list[dict[str, Any]]:
    """Every message row of one chat, read straight from its database file (read-only), in id order."""
    import sqlite3

    from memory_worker.host import ChatStore

    path = ChatStore(memory_dir).path_for(chat_key)
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM messages ORDER BY id")]
    finally:
        conn.close()


def tier_totals(usage: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """{tier: (calls, errors)} from GET /usage."""
    return {t: (int(r["calls"]), int(r["errors"])) for t, r in (usage.get("tiers") or {}).items()}


class TcpGate:
    """A TCP relay on a 127.0.0.1 port of its own, which can be shut (connections refused) and
    opened again, in front of a server that may move (`open(target_port)`).

    The port cannot race: it is bound once, on port 0, by a socket that never listens and is
    held until `close()`. The listening socket shares it (SO_REUSEPORT); while it is shut, the
    kernel refuses connections there (nothing listens) and no other server can take the port.
    """

    def __init__(self, target_port: int = 0) -> None:
        self.target_port = target_port
        self._hold = socket.socket()
        self._hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self._hold.bind(("127.0.0.1", 0))
        self.port: int = self._hold.getsockname()[1]
        self._server: asyncio.AbstractServer | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>."""
        return f"http://127.0.0.1:{self.port}"

    async def open(self, target_port: int | None = None) -> None:
        """Listen: connections go through to the target (a new one when given)."""
        await self.shut()  # open once: a second open moves the target
        if target_port is not None:
            self.target_port = target_port
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port, reuse_port=True)

    async def shut(self) -> None:
        """Stop listening and cut every open connection: the next connect is refused."""
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._pipes):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def close(self) -> None:
        """Shut, and give the port back."""
        await self.shut()
        self._hold.close()

    async def __aenter__(self) -> TcpGate:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._pipes.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                if dst.transport:
                    dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self._pipes.difference_update((writer, up_writer))


def port_of(url: str) -> int:
    """The port of an http://host:port URL (servers bind port 0 and report it in their URL)."""
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


class World:
    """A guild with an admin, a member and an owner-listed user, plus a DM channel."""

    def __init__(self, fake_discord: Any) -> None:
        self.guild = fake_discord.add_guild("Test guild")
        self.general = self.guild["channels"][0]
        self.thread = fake_discord.add_channel(self.guild, "a thread", parent=self.general)
        self.admin = fake_discord.make_user("alice")
        self.member = fake_discord.make_user("bob")
        self.owner_listed = fake_discord.make_user("carol")  # in ADMIN_USER_IDS, no admin role
        fake_discord.add_member(self.guild, self.admin, roles=[fake_discord.admin_role(self.guild)])
        fake_discord.add_member(self.guild, self.member)
        fake_discord.add_member(self.guild, self.owner_listed)
        self.dm = fake_discord.add_dm(self.member)


class People:
    """Alice (group admin), Bob (plain member), their group and private chats."""

    def __init__(self, tg: Any) -> None:
        self.alice = tg.user(111, "Alice", "alice")
        self.bob = tg.user(222, "Bob", "bob")
        self.group = tg.group(-100777, "Team")
        self.alice_dm = tg.private_chat(self.alice)
        self.bob_dm = tg.private_chat(self.bob)
        tg.set_role(self.group, self.alice, "administrator")


_SERVING = re.compile(r"^memory host serving .* on (http://\S+)$", re.M)


class ServedMemory:
    """`chatbot memory serve --port 0` as a subprocess, its output kept in a file.

    The system picks the port (no free-port guess that another process could take first);
    `start` reads the URL the host prints, so each restart may get a new `url`.
    """

    def __init__(self, data: Path, token: str, env: dict[str, str] | None = None, log: Path | None = None):
        self.data, self.token, self.env = data, token, env or {}
        self.log = log or data.parent / f"{data.name}-serve.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.starts = 0

    async def start(self, timeout: float = 20) -> None:
        """Start the host, wait for the URL it prints and for /health to answer 200."""
        chatbot = Path(sys.executable).with_name("chatbot")
        env = dict(os.environ, MEMORY_API_TOKEN=self.token, **self.env)
        offset = self.log.stat().st_size if self.log.exists() else 0
        args = ["memory", "serve", "--host", "127.0.0.1", "--port", "0", "--data", str(self.data)]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(chatbot), *args],
                env=env,
                stdout=out,
                stderr=out,
            )
        self.starts += 1

        def printed_url() -> str | None:
            assert self.proc is not None and self.proc.poll() is None, self.output()[-2000:]
            with open(self.log, "rb") as f:
                f.seek(offset)
                found = _SERVING.search(f.read().decode("utf-8", "replace"))
            return found.group(1) if found else None

        self.url = await wait_until(printed_url, timeout=timeout, what="the memory host's URL")
        async with httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=2) as client:

            async def healthy() -> bool:
                try:
                    return (await client.get("/health")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_until(healthy, timeout=timeout, what="memory host health")

    def output(self) -> str:
        """Everything the host printed so far (all its runs)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill9(self) -> None:
        """SIGKILL, and reap."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM; the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stop_quietly(self) -> None:
        """Make sure nothing is left running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


# -- the memory engine in process (retrieval tests) -------------------------------------------


def memory(tmp_path: Path | None = None) -> ChatMemory:
    """A fresh chat memory over SqliteStorage (in memory unless a directory is given)."""
    return ChatMemory(SqliteStorage(":memory:" if tmp_path is None else tmp_path / "chat.sqlite3"))


def ids_of(m: ChatMemory, query: str, k: int = 10) -> list[str]:
    """The message_ids `search` returns for `query`, best first."""
    return [r["message_id"] for r in m.search(query, k)["results"]]


def add(m: ChatMemory, *rows: tuple[str, str] | tuple[str, str, str]) -> None:
    """Import (author, text[, ts]) rows with message ids m1, m2, ..."""
    start = len(m.sql.exec("SELECT id FROM messages"))
    m.import_messages(
        [
            {
                "role": "user",
                "author": row[0],
                "author_id": row[0].lower(),
                "text": row[1],
                "message_id": f"m{start + n + 1}",
                **({"ts": row[2]} if len(row) > 2 else {}),
            }
            for n, row in enumerate(rows)
        ]
    )


FILLER = [
    ("Zed", "the weather is grey and wet again"),
    ("Yan", "my tea went cold while I was typing"),
    ("Zed", "the bus was late this morning"),
    ("Yan", "planning to repaint the kitchen soon"),
]


def fts_row(m: ChatMemory, message_id: str) -> dict:
    """The FTS5 row of one message: every column."""
    return m.sql.exec(
        "SELECT body, author, context_before, context_after, date FROM messages_fts "
        "WHERE rowid = (SELECT id FROM messages WHERE message_id = ?)",
        message_id,
    )[0]


def prompt_section(prompt: str, title: str) -> str:
    """One section of a memory prompt (or of /why), e.g. "Recent messages"; "" when absent."""
    if f"{title}:" not in prompt:
        return ""
    return prompt.split(f"{title}:", 1)[1].split("\n\n", 1)[0]


def numbered(text: str) -> dict[str, int]:
    """{"name: Ada": 1, ...} from the "#N ..." lines of /facts, /forgetfact or /remember."""
    return {m.group(2).strip(): int(m.group(1)) for m in re.finditer(r"#(\d+) ([^\n]+)", text)}


def image_bytes(width: int = 64, height: int = 48, color: str = "red", fmt: str = "PNG") -> bytes:
    """A real picture (Pillow, which matplotlib brings), for photo tests."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, fmt)
    return out.getvalue()


def default_config_settings(env: dict[str, str], **tables: dict[str, Any]) -> Settings:
    """The shipped config/bot.toml (vision tiers, [transcription]...) with `tables` merged over it
    (`tiers` replaces the shipped tiers)."""
    import tomllib

    from bot.config import DEFAULT_CONFIG

    with open(DEFAULT_CONFIG, "rb") as fh:
        data = tomllib.load(fh)
    for name, values in tables.items():
        if name == "tiers":
            data["tiers"] = dict(values)
        else:
            data.setdefault(name, {}).update(values)
    return settings_from(data, env)
