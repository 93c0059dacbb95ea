"""Where an import went: each chat key it wrote to, and the command that chats in it."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from bot.chat.neutral import one_line, printable


def chat_command(key: str, data_dir: Path | None) -> str:
    """`chatbot chat` in the chat `key` (on `data_dir`'s embedded memory, or MEMORY_URL when None)."""
    parts = ["chatbot", "chat", "--chat", key]
    if data_dir is not None:
        parts += ["--data", str(data_dir)]
    return shlex.join(parts)


def where_lines(
    counts: Mapping[str, int], names: Mapping[str, str], data_dir: Path | None, *, verb: str = "imported"
) -> list[str]:
    """One line per chat key: its name, how many messages, and the command to chat in it."""
    lines = []
    for key in sorted(counts):
        name = one_line(printable(names.get(key, "")))  # an export's name, for a terminal
        label = f" ({name})" if name and name != key else ""
        n = counts[key]
        lines.append(
            f"  {key}{label}: {n} message{'s' if n != 1 else ''} {verb}; "
            f"chat in it: {chat_command(key, data_dir)}"
        )
    if lines:
        lines.append("  (add --as NAME to speak as one of its people, by display name or id)")
    return lines
