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
import re
import sys
import uuid
from pathlib import Path
from typing import TextIO

from bot.router.types import ChatService, CommandResult, IncomingMessage

QUIT = {"/quit", "/exit", "/q"}


class ConsoleSession:
    """One console user talking in one chat; turns input lines into answers."""

    def __init__(self, router: ChatService, chat_key: str, *, data_dir: Path | None = None, author: str | None = None) -> None:
        self.router = router
        self.chat_key = chat_key
        self.data_dir = data_dir
        name = author or chat_key.split(":", 1)[-1] or "me"
        self.author = name
        self.author_id = name

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
        """The full answer to one input line (message or command)."""
        command = self.parse_command(line)
        if command is not None:
            return self.render(await self.router.command(self.message(line), *command))
        reply = await self.router.handle(self.message(line))
        return reply.text

    def render(self, result: CommandResult) -> str:
        """A command result as console text; a chart is saved next to the data."""
        text = result.text
        if result.image_png is not None:
            folder = self.data_dir or Path(".")
            folder.mkdir(parents=True, exist_ok=True)
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.chat_key)
            path = folder / f"usage-{safe}.png"
            path.write_bytes(result.image_png)
            text += f"\n(chart saved to {path})"
        return text


async def run_console(
    router: ChatService,
    chat_key: str,
    *,
    data_dir: Path | None = None,
    offline: bool = False,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    interactive: bool | None = None,
    streaming: bool = True,
) -> int:
    """Run the console chat until end of input or /quit; the exit status."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    if interactive is None:
        interactive = stdin.isatty()
    session = ConsoleSession(router, chat_key, data_dir=data_dir)
    if interactive:
        where = f" (memory in {data_dir})" if data_dir else ""
        stdout.write(f"Chatting as {session.author} in {chat_key}{where}. /help for commands, Ctrl-D to quit.\n")
        if offline:
            stdout.write("No model is configured (OPENAI_API_KEY unset): the offline model answers from memory.\n")
        stdout.flush()
    while True:
        if interactive:
            stdout.write("you> ")
            stdout.flush()
        line = await asyncio.to_thread(stdin.readline)
        if not line:  # end of input
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
            async for piece in router.stream(session.message(line)):
                stdout.write(piece)
                stdout.flush()
            stdout.write("\n\n")
        else:
            text = await session.answer(line)
            stdout.write(("bot> " if interactive else "") + text.rstrip("\n") + "\n\n")
        stdout.flush()
