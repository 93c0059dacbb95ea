"""The command tables of the docs, rendered from the registry, so no doc lists commands by hand.

A table sits between `<!-- commands:PLATFORM -->` and `<!-- /commands -->` in README.md
(`all`: every platform), docs/telegram.md (`telegram`) and docs/discord.md (`discord`).
`python -m bot.chat.commands.docs` rewrites them; `--check` exits 1 when one differs from
the registry (the tests compare the same).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bot.chat.commands.handlers import COMMANDS
from bot.chat.commands.registry import Command, Registry

ROOT = Path(__file__).resolve().parents[3]
DOCS = (ROOT / "README.md", ROOT / "docs" / "telegram.md", ROOT / "docs" / "discord.md")
EVERY = "all"  # the platform of a table that lists every platform's commands
_BLOCK = re.compile(r"(<!-- commands:(\w+) -->\n)(.*?)(<!-- /commands -->)", re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _typed(command: Command, platform: str) -> str:
    """How the command is typed: Discord shows each option by name, the others one word per argument."""
    if platform != "discord":
        names = [command.usage(), *(f"/{alias}" for alias in command.aliases)]
        return ", ".join(f"`{_cell(name)}`" for name in names)
    words = ["|".join(a.choices) if a.choices else a.name for a in command.args]
    return "`" + _cell(" ".join([f"/{command.name}", *(f"[{w}]" for w in words)])) + "`"


def markdown_table(registry: Registry, platform: str) -> str:
    """The commands offered on `platform` (`all`: anywhere) as a Markdown table: command, who, what."""
    rows = ["| command | who | what |", "| --- | --- | --- |"]
    for command in registry:
        if not command.listed or not (platform == EVERY or command.on(platform)):
            continue
        typed = _typed(command, platform)
        if platform == EVERY and command.platforms is not None:
            typed += " (" + ", ".join(sorted(p.capitalize() for p in command.platforms)) + ")"
        who = "admins" if command.admin else "everyone"
        rows.append(f"| {typed} | {who} | {_cell(command.help)} |")
    return "\n".join(rows) + "\n"


def refreshed(text: str, registry: Registry = COMMANDS) -> str:
    """`text` with each marked table rendered again from `registry`."""
    return _BLOCK.sub(lambda m: m[1] + markdown_table(registry, m[2]) + m[4], text)


def platforms_in(text: str) -> list[str]:
    """The platforms of the marked tables in `text`, in order."""
    return [m[2] for m in _BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the docs' command tables (or, with --check, say which differ)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a table differs; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        if (new := refreshed(text)) != text:
            stale.append(doc)
            if not args.check:
                doc.write_text(new, encoding="utf-8")
    for doc in stale:
        print(f"{doc.relative_to(ROOT)}: {'differs' if args.check else 'rewritten'}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
