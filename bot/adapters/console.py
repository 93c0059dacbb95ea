"""The console adapter: `chatbot chat`.

Interactive on a terminal (a prompt, answers streamed as they come). When standard input
is not a terminal it reads one message per line and prints one answer per message,
followed by an empty line, so it can be scripted:

    printf 'my name is Ada\\nwhat is my name?\\n' | chatbot chat --data /tmp/d

Lines starting with `/` are commands (`/help` lists them; `/quit` ends). The console user
is the admin of their own memory.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import sys
import threading
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import TextIO

from bot.adapters.reminder_sends import console_send
from bot.chat.neutral import printable
from bot.chat.types import ChatService, CommandResult, IncomingMessage

QUIT = {"/quit", "/exit", "/q"}
PROMPT = "you> "


class _Prompt:
    """Whether the prompt is on screen waiting for a line: a reminder printed then draws it again."""

    def __init__(self) -> None:
        self.shown = False

    def redraw(self) -> str:
        """The prompt to print after a reminder ("" while no prompt waits)."""
        return PROMPT if self.shown else ""


class ConsoleSession:
    """One console user talking in one chat; turns input lines into answers."""

    def __init__(
        self,
        service: ChatService,
        chat_key: str,
        *,
        data_dir: Path | None = None,
        author: str | None = None,
        author_id: str | None = None,
    ) -> None:
        self.service = service
        self.chat_key = chat_key
        self.data_dir = data_dir
        # In a console chat the key names its user; in another chat (an imported group) its
        # id is no person: speak as "console" unless `--as` names one of its people.
        own = chat_key.split(":", 1)[-1] if chat_key.startswith("console:") else "console"
        name = author or own or "me"
        self.author = name
        self.author_id = author_id or name  # `chatbot chat --as`: a person of an imported chat

    def message(self, text: str) -> IncomingMessage:
        """The neutral message for one line typed by the console user."""
        return IncomingMessage(
            chat_key=self.chat_key,
            author=self.author,
            author_id=self.author_id,
            text=text,
            message_id=f"console-{uuid.uuid4().hex}",
            is_admin=True,  # the console user owns this memory
            platform="console",
        )

    @staticmethod
    def parse_command(line: str) -> tuple[str, str] | None:
        """`"/mode full"` -> ("mode", "full"); None for an ordinary message."""
        if not line.startswith("/") or line.startswith("//"):
            return None
        name, _, args = line[1:].partition(" ")
        return name.strip().lower(), args.strip()

    async def answer(self, line: str) -> str:
        """The full answer to one input line (message or command), fit for a terminal."""
        command = self.parse_command(line)
        if command is not None:
            return printable(self.render(await self.service.command(self.message(line), *command)))
        reply = await self.service.handle(self.message(line))
        return printable(reply.text)

    def render(self, result: CommandResult) -> str:
        """A command result as console text; its files are saved next to the data."""
        text = result.full_text
        for file in result.files:
            folder = self.data_dir or Path(".")
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.chat_key)
            stem, dot, ext = file.name.rpartition(".")
            path = folder / (f"{stem}-{safe}.{ext}" if dot else f"{file.name}-{safe}")
            # an export is one person's data: the owner's alone
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(file.data)
            path.chmod(0o600)
            text += f"\n({'chart' if file.is_image else 'file'} saved to {path})"
        return text


async def run_console(
    service: ChatService,
    chat_key: str,
    *,
    data_dir: Path | None = None,
    offline: bool = False,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    interactive: bool | None = None,
    streaming: bool = True,
    stop: asyncio.Event | None = None,
    author: str | None = None,
    author_id: str | None = None,
) -> int:
    """Run the console chat until end of input, /quit or `stop` (after the answer in hand); exit status."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if interactive is None:
        interactive = stdin.isatty()
    session = ConsoleSession(service, chat_key, data_dir=data_dir, author=author, author_id=author_id)
    waiting = _Prompt()  # a reminder printed while the prompt waits draws it again
    service.reminders.start("console", console_send(stdout, chat_key, waiting.redraw), prefix=chat_key)
    if interactive:
        where = f" (memory in {data_dir})" if data_dir else ""
        stdout.write(
            f"Chatting as {session.author} in {chat_key}{where}. /help for commands, Ctrl-D to quit.\n"
        )
        if offline:
            stdout.write(
                "No model is configured (OPENAI_API_KEY unset): the offline model answers from memory.\n"
            )
        stdout.flush()
    reader = _LineReader(stdin)
    while True:
        if interactive:
            stdout.write(PROMPT)
            stdout.flush()
            waiting.shown = True
        line = await _unless_stopped(reader.next_line(), stop)
        waiting.shown = False
        if not line:  # end of input, or asked to stop
            if interactive:
                stdout.write("\n")
            return 0
        line = line.strip()
        if not line:
            continue
        if line.lower() in QUIT:
            return 0
        if interactive and streaming and session.parse_command(line) is None:
            stdout.write("bot> ")
            async for piece in service.stream(session.message(line)):
                stdout.write(printable(piece))  # names and quoted words may carry escapes
                stdout.flush()
            stdout.write("\n\n")
        else:
            text = await session.answer(line)
            stdout.write(("bot> " if interactive else "") + text.rstrip("\n") + "\n\n")
        stdout.flush()
        if stop is not None and stop.is_set():
            return 0


async def _unless_stopped(line: Awaitable[str], stop: asyncio.Event | None) -> str:
    """The next input line, or "" as soon as `stop` is set (a shutdown does not wait for typing)."""
    if stop is None:
        return await line
    reading = asyncio.ensure_future(line)
    stopping = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if reading in done:
        return reading.result()
    reading.cancel()
    return ""


class _LineReader:
    """Reads input lines on a daemon thread, one line per request.

    Not asyncio.to_thread and not input(): a default-executor thread blocked on input keeps
    the process alive after Ctrl-C, and GNU readline in a thread swallows SIGINT. A daemon
    thread reading the raw file descriptor (no Python buffer lock held at exit) has neither
    problem; objects without a descriptor (tests' StringIO) are read with readline().
    """

    def __init__(self, stdin: TextIO) -> None:
        self._stdin = stdin
        try:
            self._fd: int | None = stdin.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._wanted = threading.Semaphore(0)
        self._loop = asyncio.get_running_loop()
        self._lines: asyncio.Queue[str] = asyncio.Queue()
        threading.Thread(target=self._run, name="console-input", daemon=True).start()

    def _read(self) -> str:
        if self._fd is None:
            return self._stdin.readline()
        while "\n" not in self._buffer:
            chunk = os.read(self._fd, 65536)
            if not chunk:  # end of input: the last line may lack its newline
                line, self._buffer = self._buffer + self._decoder.decode(b"", final=True), ""
                return line
            self._buffer += self._decoder.decode(chunk)
        line, _, self._buffer = self._buffer.partition("\n")
        return line + "\n"

    def _run(self) -> None:
        while True:
            self._wanted.acquire()  # read only when asked: the prompt comes after the answer
            try:
                line = self._read()
            except Exception:  # a closed or broken stdin ends the chat like end of input
                line = ""
            self._loop.call_soon_threadsafe(self._lines.put_nowait, line)
            if not line:
                return

    async def next_line(self) -> str:
        """The next line with its newline, or "" at the end of input."""
        self._wanted.release()
        return await self._lines.get()
