"""The docs say what the code does: environment variables, log fields, deployment notes."""

from __future__ import annotations

import ast
import json
import re
import sys
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


# -- docs/architecture.md: the map names real files, every package, and the imports as they are

ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
TOPS = ("bot/", "memory_worker/", "tests/", "config/", "docs/", "benchmarks/", "deploy/")


def code_folders() -> list[Path]:
    """Every folder of bot/ and memory_worker/ that holds Python modules."""
    found = {p.parent for top in ("bot", "memory_worker") for p in (REPO / top).rglob("*.py")}
    return sorted(f for f in found if "node_modules" not in f.parts)


def named_paths(text: str) -> list[str]:
    """The backticked paths of a doc: ending in .py or /, one word or more."""
    return re.findall(r"`([\w./-]+(?:\.py|/))`", text)


def exists(path: str, folder: str | None = None) -> bool:
    """A path from the repository root, from the folder it is named under, or a real path's tail."""
    if path.startswith(TOPS):
        return (REPO / path).exists()
    if folder is not None and (REPO / folder / path).exists():
        return True
    tail = "/" + path.rstrip("/")
    return any(
        p.as_posix().endswith(tail) for top in ("bot", "memory_worker") for p in (REPO / top).rglob("*")
    )


def folder_rows() -> dict[str, list[str]]:
    """The map's folders table: folder -> its row's cells."""
    table = ARCHITECTURE.split("| folder | what lives there | may import |", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in table.strip().splitlines()[1:]]
    return {row[0].strip("`"): row for row in rows}


def test_every_path_the_map_names_exists():
    rows = folder_rows()
    paths = named_paths(ARCHITECTURE)
    assert {"bot/chat/pipeline.py", "bot/chat/memory/client.py", "memory_worker/local/server.py"} <= set(
        paths
    )
    missing = [p for p in paths if not exists(p)]
    for folder, row in rows.items():  # in the folders table, a module may be named from its row's folder
        missing = [p for p in missing if not (p in row[1] and exists(p, folder))]
    assert missing == []


def test_the_map_names_every_package_folder():
    rows = folder_rows()
    packages = {f.relative_to(REPO).as_posix() + "/" for f in code_folders()}
    assert {"bot/chat/commands/", "memory_worker/src/memory_engine/facts/"} <= packages
    assert packages - set(rows) == set()
    assert [f for f in rows if f.startswith(("bot/", "memory_worker/")) and not (REPO / f).is_dir()] == []


def module_name(path: Path) -> str:
    """The dotted name a file is imported by (`memory_engine` and `entry` live under memory_worker/src)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[:2] == ["memory_worker", "src"]:
        parts = parts[2:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path, modules: set[str]) -> Iterator[str]:
    """The project modules a file imports (`from a.b import c`: `a.b.c` when c is a module)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            ]
        else:
            continue
        yield from (
            n for n in names if n.split(".", 1)[0] in ("bot", "memory_engine", "memory_worker", "entry")
        )


def test_each_folder_imports_only_what_the_map_says():
    rows = folder_rows()
    files = [p for f in code_folders() for p in f.glob("*.py")]
    modules = {module_name(p) for p in files}
    home = {module_name(p): p.parent for p in files}
    wrong = []
    for path in files:
        folder = path.parent.relative_to(REPO).as_posix() + "/"
        allowed = re.findall(r"`([\w.]+)`", rows[folder][2])
        for name in project_imports(path, modules):
            target = name if name in home else name.rsplit(".", 1)[0]
            if home.get(target) == path.parent or any(name == a or name.startswith(a + ".") for a in allowed):
                continue
            wrong.append(f"{path.relative_to(REPO)} imports {name}")
    assert wrong == [], "update the 'may import' column of docs/architecture.md, or the import"


def test_the_engine_imports_the_standard_library_alone():
    engine = REPO / "memory_worker" / "src" / "memory_engine"
    outside = []
    for path in engine.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and not node.level
                else []
            )
            top = {n.split(".", 1)[0] for n in names if n}
            outside += [f"{path.name}: {t}" for t in top - sys.stdlib_module_names - {"memory_engine"}]
    assert outside == []


# -- the command tables of README.md, docs/telegram.md and docs/discord.md come from the registry


def test_each_command_table_is_the_registry_rendered():
    from bot.chat.commands import docs
    from bot.chat.commands.handlers import COMMANDS

    texts = {doc.name: doc.read_text(encoding="utf-8") for doc in docs.DOCS}
    assert {name: docs.platforms_in(text) for name, text in texts.items()} == {
        "README.md": ["all"],
        "telegram.md": ["telegram"],
        "discord.md": ["discord"],
    }
    for name, text in texts.items():
        assert docs.refreshed(text) == text, f"{name}: run python -m bot.chat.commands.docs"
    # Every command the registry offers is in each table of its platforms, under its name.
    for command in COMMANDS:
        for name, platform in (("README.md", "all"), ("telegram.md", "telegram"), ("discord.md", "discord")):
            table = texts[name].split(f"<!-- commands:{platform} -->", 1)[1].split("<!-- /commands -->", 1)[0]
            shown = re.search(rf"^\| `/{command.name}\b", table, re.M) is not None
            assert shown == (platform == "all" or command.on(platform)), (name, command.name)
    assert (
        "`/start`" not in texts["discord.md"].split("<!-- commands:discord -->", 1)[1].split("<!-- /", 1)[0]
    )


def test_the_command_tables_are_rewritten_when_they_drift(tmp_path, monkeypatch, capsys):
    from bot.chat.commands import docs
    from bot.chat.commands.registry import Command, Registry

    stale = tmp_path / "telegram.md"
    stale.write_text(
        "intro\n\n<!-- commands:telegram -->\n| old |\n<!-- /commands -->\n\nafter\n", encoding="utf-8"
    )
    monkeypatch.setattr(docs, "DOCS", (stale,))
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    assert docs.main(["--check"]) == 1
    assert "telegram.md: differs" in capsys.readouterr().out
    assert docs.main([]) == 0
    text = stale.read_text(encoding="utf-8")
    assert (
        "| `/remind [TEXT]` | everyone |" in text and "| old |" not in text and text.endswith("\n\nafter\n")
    )
    assert docs.main(["--check"]) == 0

    async def nothing(ctx):  # pragma: no cover - never run
        raise AssertionError

    one = Registry([Command("ping", "say pong | loudly", nothing, who="admin", aliases=("p",))])
    assert (
        docs.markdown_table(one, "telegram").splitlines()[2]
        == "| `/ping`, `/p` | admins | say pong \\| loudly |"
    )
    assert docs.markdown_table(one, "discord").splitlines()[2] == "| `/ping` | admins | say pong \\| loudly |"
