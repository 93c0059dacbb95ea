"""Chat titles for the dashboard: the Telegram adapter passes the chat's name with each message,
the gateway sends it on the turn, and the memory keeps it for the directory."""

from __future__ import annotations

import httpx
import pytest

from bot.chat.memory.client import HttpMemoryClient
from memory_worker.local.embedded import EmbeddedMemoryHost
from tests.dashboard.support import AUTH, TOKEN
from tests.support import RecordingService, running_bot, telegram_settings_for

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def test_the_telegram_adapter_names_the_chat(tg):
    service = RecordingService()
    alice = tg.user(111, "Alice", "alice")
    group = tg.group(-100500, "Friends <3")
    async with running_bot(service, telegram_settings_for(tg), tg):
        tg.send(group, alice, "@memo_test_bot hello")
        tg.send(tg.private_chat(alice), alice, "hi")
        await tg.wait_until(lambda: len(service.handled) == 2)
    titles = {m.chat_key: m.chat_title for m in service.handled}
    assert titles["telegram:-100500"] == "Friends <3"
    assert titles["telegram:111"] == "Alice"  # a private chat: the person's name


async def test_the_turn_carries_the_title_to_the_directory(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path / "m", token=TOKEN) as host,
        HttpMemoryClient(host.url, TOKEN) as memory,
    ):
        await memory.turn("telegram:-7", "hello", author="Ada", author_id="u1", title="Book club")
        await memory.turn("telegram:-7", "again", author="Ada", author_id="u1")  # no title: it stays
        async with httpx.AsyncClient(base_url=host.url, trust_env=False) as c:
            listed = (await c.post("/v1/directory/list", headers=AUTH, json={})).json()
    assert [(e["chat_key"], e["title"], e["messages"], e["people"]) for e in listed["chats"]] == [
        ("telegram:-7", "Book club", 2, 1)
    ]
