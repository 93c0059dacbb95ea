"""The docs say what the code does: environment variables, log fields, deployment notes."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bot.config import settings_from
from memory_engine.settings import retention_setting
from memory_worker.local.cli import settings_from_env
from tests.support import REPO
from tests.support.net import ServedMemory

README = (REPO / "README.md").read_text(encoding="utf-8")
DEPLOY = (REPO / "deploy" / "README.md").read_text(encoding="utf-8")
EXAMPLE_ENV = (REPO / "config" / "example.env").read_text(encoding="utf-8")
NAME = r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,}"  # OPENAI_API_KEY, CHATBOT_DATA; not "JSON"-like words

# How the code reads a variable by its literal name.
LITERAL_READS = [
    rf'environ\.get\(\s*"({NAME})"',
    rf'environ\[\s*"({NAME})"\s*\]',
    rf'getenv\(\s*"({NAME})"',
    rf'\b(?:env|merged)\.get\(\s*"({NAME})"',
    rf'(?<![\w.])get\(\s*"({NAME})"\)',  # a host's own getter: get("MEMORY_API_TOKEN")
    rf'_var\(\s*[\w.]+,\s*"({NAME})"\)',  # entry.py: the Worker's env
]


def sources() -> Iterator[Path]:
    for top in ("bot", "memory_worker"):
        for path in (REPO / top).rglob("*.py"):
            if "node_modules" not in path.parts:
                yield path


class Recording(dict[str, str]):
    """An environment that notes every name asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def variables_read() -> set[str]:
    """Every environment variable the code reads: literal names, and what the settings ask for."""
    found: set[str] = set()
    for path in sources():
        text = path.read_text(encoding="utf-8")
        for pattern in LITERAL_READS:
            found.update(re.findall(pattern, text))
    env = Recording()
    shipped = tomllib.loads((REPO / "config" / "bot.toml").read_text(encoding="utf-8"))
    settings_from(shipped, env)  # names built at run time: PREFIX_BOT_TOKEN, each tier's api_key_env
    settings_from_env(env)
    retention_setting(lambda name: env.get(name))
    return found | env.asked


def documented_anywhere() -> set[str]:
    """Names the README, docs/ and deploy/README.md mention (text or examples), and config/example.env."""
    texts = [README, DEPLOY, *(p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md"))]
    names = {n for t in texts for n in re.findall(rf"\b({NAME})\b", t)}
    return names | example_env_names()


def example_env_names() -> set[str]:
    return set(re.findall(rf"^#?\s*({NAME})=", EXAMPLE_ENV, re.M))


def readme_table_names() -> set[str]:
    """The variables of the README's configuration table (its first column)."""
    table = README.split("| variable | meaning |", 1)[1].split("\n\n", 1)[0]
    return {n for row in table.splitlines()[2:] for n in re.findall(rf"`({NAME})`", row.split("|")[1])}


def test_every_variable_read_is_documented():
    read = variables_read()
    assert {"OPENAI_API_KEY", "CHATBOT_DATA", "LOG_FORMAT", "DISCORD_BOT_TOKEN", "RETENTION_MESSAGES"} <= read
    assert read - documented_anywhere() == set()


def test_every_variable_documented_is_read():
    declared = readme_table_names() | example_env_names()
    assert {"CHATBOT_DATA", "MEMORY_URL", "DISCORD_GATEWAY_URL"} <= declared
    assert declared - variables_read() == set()


def test_the_readme_cites_no_issue_numbers():
    assert re.findall(r"\bissues? #?\d+|#\d{2,}\b", README, re.I) == []


def test_example_env_names_the_worker_wrangler_deploys():
    name = tomllib.loads((REPO / "memory_worker" / "wrangler.toml").read_text(encoding="utf-8"))["name"]
    url = re.search(r"^#?\s*MEMORY_URL=(\S+)", EXAMPLE_ENV, re.M)
    assert url is not None and url.group(1).startswith(f"https://{name}.")


def test_deploy_readme_backs_up_with_the_command_and_adds_the_host_on_linux():
    backups = DEPLOY.split("## Backups", 1)[1]
    assert "chatbot memory backup" in backups and "chatbot memory restore" in backups
    for command in re.findall(r"docker run[^`]*?(?=\ndocker run|\n```)", DEPLOY, re.S):
        if "host.docker.internal" in command:
            assert "--add-host host.docker.internal:host-gateway" in command, command


def test_the_dockerfile_installs_dependencies_before_the_code():
    lines = (REPO / "deploy" / "Dockerfile").read_text(encoding="utf-8").splitlines()
    deps = next(i for i, line in enumerate(lines) if "pip install -r" in line)
    code = next(i for i, line in enumerate(lines) if line.startswith("COPY bot"))
    package = next(i for i, line in enumerate(lines) if "pip install --no-deps ." in line)
    assert deps < code < package


async def test_memory_serve_logs_the_json_fields_deploy_readme_names(tmp_path):
    paragraph = DEPLOY.split("`chatbot memory serve` always logs", 1)[1].split("The bots write", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", paragraph)) - {"request"}  # the value of `msg`, not a field
    assert {"ts", "msg", "chat", "request_id", "route", "status"} <= named
    host = ServedMemory(tmp_path / "memory", "docs-token-0123456789abcdef", env={"LOG_FORMAT": "text"})
    try:
        await host.start()
        async with httpx.AsyncClient(base_url=host.url, trust_env=False) as client:
            answer = await client.get(
                "/v1/chats/docs:check/stats", headers={"Authorization": "Bearer docs-token-0123456789abcdef"}
            )
            assert answer.status_code == 200
        assert host.terminate() == 0
    finally:
        host.stop_quietly()
    lines = [json.loads(line) for line in host.output().splitlines() if line.startswith("{")]
    request = next(line for line in lines if (line.get("msg"), line.get("chat")) == ("request", "docs:check"))
    keys = set().union(*(line.keys() for line in lines))
    # Every field the doc names is written (`exc` only with a traceback, which this run has none of).
    assert named - {"exc", "method"} <= keys, named - keys
    assert {"ts", "level", "logger", "msg", "chat", "request_id", "method", "route", "status", "ms"} <= set(
        request
    )
    assert not {"time", "message", "chat_key"} & keys  # the names the doc used to give
