"""The ways in: `/dashboard` in a chat (an admin's private link to that chat) and `chatbot dashboard`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import httpx

from bot.chat.commands.dashboard import COMMANDS
from bot.chat.commands.registry import CommandContext
from bot.chat.memory.client import HttpMemoryClient
from bot.cli import main as cli
from memory_worker.local.embedded import EmbeddedMemoryHost
from tests.dashboard.support import CHAT, OTHER, TOKEN, seed
from tests.support import msg


async def test_an_admins_link_from_the_chat_is_private_and_opens_that_chat_alone(tmp_path):
    async with (
        EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN) as host,
        HttpMemoryClient(host.url, TOKEN) as memory,
        httpx.AsyncClient(base_url=host.url, trust_env=False) as browser,
    ):
        await seed(browser)
        message = msg("/dashboard", author_id="42", admin=True, chat=CHAT)
        ctx = CommandContext(
            message=message,
            args="",
            invoked_as="dashboard",
            memory=cast(Any, SimpleNamespace(client=memory)),
            chats=cast(Any, None),
            tiers={},
            secrets=(),
            registry=cast(Any, None),
        )
        command = COMMANDS[0]
        assert command.admin  # members are refused before the handler runs
        result = await command.handler(ctx)
        assert result.private  # Telegram: their private chat; Discord: ephemeral; console: printed
        link = next(word for word in result.text.split() if word.startswith("http"))
        assert urlsplit(link).netloc == urlsplit(host.url).netloc
        r = await browser.post("/dashboard/login", data={"link": urlsplit(link).query.removeprefix("link=")})
        assert r.status_code == 303
        overview = (await browser.get("/dashboard")).text
        assert "Chess club" in overview and "Secret server" not in overview
        assert (await browser.get(f"/dashboard/chat/{OTHER}")).status_code == 404


def test_chatbot_dashboard_prints_an_owners_link_for_the_configured_worker(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_URL", "https://memory.example.workers.dev")
    monkeypatch.setenv("MEMORY_API_TOKEN", TOKEN)
    assert cli(["dashboard", "--no-open"]) == 0
    link = capsys.readouterr().out.strip()
    assert link.startswith("https://memory.example.workers.dev/dashboard/login?link=")
    monkeypatch.delenv("MEMORY_URL")
    assert cli(["dashboard", "--no-open"]) == 2


def test_chatbot_chat_says_where_its_embedded_dashboard_is(tmp_path):
    from tests.support.cli import run_cli
    from tests.support.core import clean_env

    run = run_cli(
        "chat",
        "--data",
        str(tmp_path / "data"),
        "--chat",
        "console:grace",
        cwd=tmp_path,
        env=clean_env(),
        stdin="hello\n",
    )
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stderr.splitlines() if x.startswith("dashboard (one-time link"))
    assert "http://127.0.0.1:" in line and "/dashboard/login?link=" in line
