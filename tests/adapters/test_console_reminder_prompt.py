"""A reminder delivered to the console while the prompt waits: printed on its own line, then the
prompt drawn again (issue 40, first hour 9)."""

from __future__ import annotations

import asyncio
import io
import threading
from typing import Any

from bot.adapters.console import run_console
from bot.chat.proactive.delivery import Send
from tests.support import wait_until

CHAT = "console:ada"


class _Desk:
    """The reminder desk's one method the console calls: keeps the send it is given."""

    def __init__(self) -> None:
        self.send: Send | None = None

    def start(self, platform: str, send: Send, prefix: str | None = None, **_: Any) -> None:
        self.send = send


class _Service:
    """A chat service that only delivers reminders (no line is ever answered here)."""

    def __init__(self) -> None:
        self.reminders = _Desk()


class _HeldInput(io.StringIO):
    """A stdin whose first read waits until `release` (a person who has not typed yet), then ends."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def isatty(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:
        self.released.wait(30)
        return ""


async def _deliver_while_waiting(interactive: bool) -> str:
    service, stdin, out = _Service(), _HeldInput(), io.StringIO()
    console = asyncio.create_task(
        run_console(service, CHAT, stdin=stdin, stdout=out, interactive=interactive)  # type: ignore[arg-type]
    )
    try:
        if interactive:
            await wait_until(lambda: out.getvalue().endswith("you> "), what="the prompt")
        send = await wait_until(lambda: service.reminders.send, what="the console's send")
        await send(CHAT, "⏰ Reminder for ada: call mum", "r1")
    finally:
        stdin.released.set()
        assert await console == 0
    return out.getvalue()


async def test_a_reminder_at_the_prompt_draws_the_prompt_again():
    text = await _deliver_while_waiting(interactive=True)
    assert text.endswith("you> \n⏰ Reminder for ada: call mum\nyou> \n"), repr(text[-80:])


async def test_a_piped_console_prints_the_reminder_without_a_prompt():
    text = await _deliver_while_waiting(interactive=False)
    assert text == "\n⏰ Reminder for ada: call mum\n"
