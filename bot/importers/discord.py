"""DiscordChatExporter's JSON (one channel per file) as import records.

`{"guild", "channel": {"id", "type", "name"}, "messages": [{"id", "type", "timestamp",
"content", "author": {"id", "name", "nickname", "isBot"}, "attachments", "embeds",
"stickers", "reference", "mentions"}]}`. Like the live adapter, only people's messages
(types Default and Reply, no bots) are kept, under `discord:<channel id>`; mentions read
"@name", attachments and stickers become markers ("[photo cat.png]", "[sticker Wave]").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.chat.neutral import one_line
from bot.chat_keys import discord_chat_key
from bot.importers.common import (
    MAX_FIELD_BYTES,
    MAX_TEXT_BYTES,
    ExportError,
    Record,
    Source,
    clean,
    field,
    message_records,
    read_header,
    require,
    stream_items,
    utc_iso,
    was_cut,
)

KEPT_TYPES = frozenset({"Default", "Reply"})  # the live adapter's ANSWERED_TYPES
KINDS = {
    "photo": (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".heic", ".avif"),
    "video": (".mp4", ".mov", ".webm", ".mkv", ".avi"),
    "audio": (".mp3", ".ogg", ".wav", ".m4a", ".flac", ".opus"),
}
_MENTION = re.compile(r"<@!?(\d+)>")


def files(path: Path) -> list[Path]:
    """The export files at `path`: the file itself, or every .json file in a folder."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*.json") if p.is_file())
    return [path]


def sources(path: Path, memory_scope: str = "chat") -> Iterator[Source]:
    """One Source per exported channel file."""
    for file in files(path):
        yield _source(file, memory_scope)


def _source(path: Path, scope: str) -> Source:
    header, found = read_header(path, {"messages": frozenset({"channel"})}, frozenset({"guild", "channel"}))
    if found != "messages" or not isinstance(header.get("channel"), dict):
        raise ExportError(path, "not a DiscordChatExporter JSON export: no `channel` and `messages`")
    channel = header["channel"]
    channel_id = require(channel.get("id"), (str, int), path, "channel", "id")
    if not re.fullmatch(r"[0-9]{1,20}", str(channel_id)):  # ASCII: "٣".isdigit() is True
        raise ExportError(path, "channel: `id` is not a Discord id")
    guild: dict[str, Any] = header["guild"] if isinstance(header.get("guild"), dict) else {}
    name = str(channel.get("name") or channel_id)
    if guild.get("name") and guild.get("name") != "Direct Messages":
        name = f"{guild['name']} #{name}"
    key = discord_chat_key(channel_id, 0, memory_scope="chat")
    label = f"channel {name!r}"

    def records() -> Iterator[Record | None]:
        return message_records(
            path,
            label,
            stream_items(path, "messages.item"),
            lambda where, message: convert(path, where, message, str(channel_id), scope),
        )

    aliases = frozenset({key, str(channel_id), name, str(channel.get("name") or "")} - {""})
    return Source(label=label, name=name, key=key, aliases=aliases, records=records)


def convert(path: Path, where: str, m: dict[str, Any], channel_id: str, scope: str) -> Record | None:
    """One exported message as a Record; None for system messages, bots and empty ones."""
    message_id = m.get("id")
    if type(message_id) is not str:
        message_id = str(require(message_id, (str, int), path, where, "id"))
    stamp = require(m.get("timestamp"), str, path, where, "timestamp")
    try:
        ts = _utc(stamp)
    except ValueError:
        raise ExportError(path, f"{where}: `timestamp` is not an ISO-8601 time") from None
    author = m.get("author")
    if type(author) is not dict:
        author = require(author, dict, path, where, "author")
    author_id = author.get("id")
    if type(author_id) is not str:
        author_id = str(require(author_id, (str, int), path, f"{where}.author", "id"))
    if m.get("type", "Default") not in KEPT_TYPES or author.get("isBot"):
        return None  # joins, pins, calls, thread starts; other bots (the live bot skips them too)
    text, content = render(m), m.get("content")
    if not text or text.isspace():  # (`not text.strip()`, without the copy)
        return None
    name = author.get("nickname") or author.get("name") or author_id
    return Record(
        _key(channel_id, author_id, scope),
        field(path, where, "id", message_id),
        clean(text, MAX_TEXT_BYTES),
        _name(name if type(name) is str else str(name)),
        field(path, where, "author.id", author_id),
        ts,
        # `render` cuts the content before it expands mentions: over the limit either way.
        cut=was_cut(text, MAX_TEXT_BYTES) or (type(content) is str and was_cut(content, MAX_TEXT_BYTES)),
    )


# Each person writes many messages: their names and chat keys are worked out once.
@functools.lru_cache(maxsize=4096)
def _name(name: str) -> str:
    return clean(one_line(name), MAX_FIELD_BYTES)


@functools.lru_cache(maxsize=4096)
def _key(channel_id: str, author_id: str, scope: str) -> str:
    return discord_chat_key(channel_id, author_id, memory_scope=scope)


def _utc(stamp: str) -> str:
    """An ISO-8601 time (DiscordChatExporter writes the exporter's offset) as the memory's UTC form."""
    return utc_iso(datetime.fromisoformat(stamp.replace("Z", "+00:00")))


def render(m: dict[str, Any]) -> str:
    """The words of a message: content with mentions as @names, then attachment markers."""
    names = {
        str(u.get("id")): clean(str(u.get("nickname") or u.get("name") or ""), MAX_FIELD_BYTES)
        for u in m.get("mentions") or []
        if isinstance(u, dict)
    }
    # Cut before expanding: 5,000 mentions of a long name must not grow to gigabytes.
    content = clean(str(m.get("content") or ""), MAX_TEXT_BYTES)
    # Exports made with --markdown false keep Discord's raw <@id> mentions.
    content = _mentions(content, names).strip()
    parts = []
    forwarded = m.get("forwardedMessage")
    if isinstance(forwarded, dict):
        inner = str(forwarded.get("content") or "").strip()
        parts.append("[forwarded]" + (f" {inner}" if inner else ""))
        parts += [_attachment(a) for a in forwarded.get("attachments") or [] if isinstance(a, dict)]
    if content:
        parts.append(content)
    parts += [_attachment(a) for a in m.get("attachments") or [] if isinstance(a, dict)]
    parts += [f"[sticker {s.get('name')}]" for s in m.get("stickers") or [] if isinstance(s, dict)]
    if not content:
        # An embed alone (a bot's card, a link preview without the link) still says something.
        for e in m.get("embeds") or []:
            if isinstance(e, dict) and (e.get("title") or e.get("description")):
                parts.append(" ".join(str(e[k]) for k in ("title", "description") if e.get(k)))
    return " ".join(p for p in parts if p)


def _mentions(content: str, names: dict[str, str]) -> str:
    """`<@id>` as `@name`, stopping once the text is past MAX_TEXT_BYTES (cut later)."""
    out, size, end = [], 0, 0
    for match in _MENTION.finditer(content):
        out.append(content[end : match.start()])
        out.append(f"@{names.get(match.group(1)) or match.group(1)}")
        end = match.end()
        size += len(out[-2]) + len(out[-1])
        if size > MAX_TEXT_BYTES:
            return "".join(out)
    out.append(content[end:])
    return "".join(out)


def _attachment(a: dict[str, Any]) -> str:
    name = str(a.get("fileName") or "")
    lower = name.lower()
    kind = next((k for k, ends in KINDS.items() if lower.endswith(ends)), "file")
    return f"[{kind} {name}]" if name else f"[{kind}]"
