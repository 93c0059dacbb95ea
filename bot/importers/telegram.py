"""Telegram Desktop's JSON export (`result.json`) as import records.

Two shapes: one chat (`{"name", "type", "id", "messages": [...]}`) or a whole account
(`{"personal_information", ..., "chats": {"list": [chat, ...]}}`). Messages keep their
export id as `message_id` (the id the Bot API gives the live adapter), the sender's Bot API
id as `author_id` ("user123" -> "123"), the UTC time of `date_unixtime`, and their text
flattened, with media as markers ("[photo] caption", "[voice]", "[sticker 😀]").
Service messages (joins, pins, calls) carry no words and are skipped.

Private chats map as the Bot API sees them: a `bot_chat` (the exporter and a bot) is the
bot's private chat with the exporter, `telegram:<exporter id>`, and the bot's messages are
the assistant's; a `personal_chat` is `telegram:<the other person's id>`. A whole-account
export leaves its private chats out unless `--chat` picks one: the bot is in none of them,
and other people's DM memory is no place for the exporter's conversations.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.chat.neutral import one_line
from bot.chat_keys import (
    TELEGRAM_CHANNEL_TYPES,
    TELEGRAM_USER_TYPES,
    telegram_bot_api_id,
    telegram_chat_key,
    telegram_peer_id,
)
from bot.importers.common import (
    MAX_FIELD_BYTES,
    MAX_TEXT_BYTES,
    ExportError,
    Record,
    Source,
    build,
    clean,
    field,
    message_records,
    parsed,
    read_header,
    require,
    skip,
    stream_items,
    unix_iso,
    utc_iso,
    was_cut,
)

NOT_INCLUDED = "(File not included"  # Telegram's placeholder when media were not exported
DELETED = "Deleted Account"
MEDIA_MARKERS = {
    "voice_message": "voice",
    "video_message": "video message",
    "sticker": "sticker",
    "animation": "GIF",
    "video_file": "video",
    "audio_file": "audio",
}


CHAT_FIELDS = frozenset({"name", "type", "id"})


def sources(path: Path, memory_scope: str = "chat") -> Iterator[Source]:
    """The chats of a Telegram Desktop export, one Source each, in file order.

    A whole-account export is read in one stream: each Source's records must be read (or
    left) before the next Source is asked for, as `run` does.
    """
    wanted = CHAT_FIELDS | {"personal_information"}
    header, found = read_header(path, {"messages": frozenset({"id", "type"}), "chats": frozenset()}, wanted)
    if found == "messages":
        yield _source(path, header, None, lambda: stream_items(path, "messages.item"), memory_scope, None)
        return
    if found != "chats":
        raise ExportError(path, "not a Telegram Desktop export: no `messages` or `chats` at the top level")
    me = header.get("personal_information")
    owner = me.get("user_id") if isinstance(me, dict) and isinstance(me.get("user_id"), int) else None
    for index, chat, messages in _account_chats(path):
        yield _source(path, chat, index, lambda m=messages: m, memory_scope, owner)


def _account_chats(path: Path) -> Iterator[tuple[int, dict[str, Any], Iterator[Any]]]:
    """Each chat of `chats.list`: its fields written before `messages`, and its messages,
    streamed (what the reader leaves unread is skipped)."""
    with parsed(path, 6, "messages") as (guard, events):
        index = -1
        for prefix, event, _ in events:
            if prefix != "chats.list.item" or event in ("end_map", "end_array", "map_key", "start_array"):
                continue
            index += 1
            place = f"chats.list[{index}]"
            if event != "start_map":
                raise ExportError(path, f"{place} is not an object")
            fields: dict[str, Any] = {}
            for _, event, key in events:
                if event == "end_map":
                    raise ExportError(path, f"{place} has no `messages` list")
                _, event, value = next(events)
                if key == "messages":
                    if event != "start_array":
                        raise ExportError(path, f"{place} has no `messages` list")
                    messages = _messages(events, guard, f"{place}.messages")
                    yield index, fields, messages
                    for _ in messages:
                        pass  # the rest of a chat that was left out or refused
                    skip(events, "start_map")  # fields after the messages: not needed
                    break
                if key in CHAT_FIELDS:
                    fields[key] = build(events, event, value, guard, f"{place}: `{key}`")
                else:
                    skip(events, event)


def _messages(events: Iterator[tuple[str, str, Any]], guard: Any, what: str) -> Iterator[Any]:
    for i, (_, event, value) in enumerate(events):
        if event == "end_array":
            return
        yield build(events, event, value, guard, f"{what}[{i}]")


def _owner(messages: Iterator[Any], bot_id: int) -> int | None:
    """The exporter's id in a chat with a bot: whoever writes there and is not the bot."""
    for m in messages:
        peer = telegram_peer_id(m.get("from_id") or "") if isinstance(m, dict) else None
        if peer is not None and peer != str(bot_id) and int(peer) > 0:
            return int(peer)
    return None


def _source(
    path: Path, chat: dict[str, Any], index: int | None, messages, scope: str, owner: int | None
) -> Source:
    place = "the chat" if index is None else f"chats.list[{index}]"
    kind = require(chat.get("type"), str, path, place, "type")
    bare = require(chat.get("id"), int, path, place, "id")
    if bare <= 0:  # a negative id would turn a group's key into someone's private chat
        raise ExportError(path, f"{place}: `id` is not a Telegram Desktop chat id (a positive number)")
    try:
        chat_id = telegram_bot_api_id(kind, bare)
    except ValueError as err:
        raise ExportError(path, f"{place}: {err}") from None
    name = str(chat.get("name") or ("Saved Messages" if kind == "saved_messages" else chat_id))[:200]
    private = kind in TELEGRAM_USER_TYPES  # the Bot API's "private": one person and the bot
    bot = bare if kind == "bot_chat" else None
    if bot is not None:
        if owner is None and index is not None:
            raise ExportError(path, f"{place}: a chat with a bot, and no `personal_information.user_id`")
        owner = owner or _owner(messages(), bare)
        if owner is None:
            raise ExportError(path, f"{place}: a chat with a bot where nobody but the bot writes")
        chat_id = owner
    key = telegram_chat_key(chat_id, private=private, user_id=None, memory_scope="chat")
    label = f"chat {name!r}" + ("" if index is None else f" ({place})")
    # Supergroup and channel message ids are the chat's own: the Bot API gives the live
    # adapter the same ones. Private chats and basic groups number messages per account,
    # so an export's id could be any live message's: those get an id of their own.
    own_ids = kind in TELEGRAM_CHANNEL_TYPES

    def records() -> Iterator[Record | None]:
        return message_records(
            path,
            label,
            messages(),
            lambda where, message: convert(path, where, message, chat_id, private, scope, bot, own_ids),
        )

    aliases = frozenset({key, str(bare), str(chat_id), name})
    return Source(label=label, name=name, key=key, aliases=aliases, records=records, private=private)


def convert(
    path: Path,
    where: str,
    m: dict[str, Any],
    chat_id: int,
    private: bool,
    scope: str,
    bot_id: int | None = None,
    own_ids: bool = True,
) -> Record | None:
    """One exported message as a Record; None for service messages and empty ones."""
    message_id = m.get("id")
    if type(message_id) is not int:  # (a bool is no id)
        message_id = require(message_id, int, path, where, "id")
    ts = _timestamp(path, where, m)
    if m.get("type", "message") != "message":
        return None  # "service" (joins, pins, calls...) and "unsupported"
    text = render(m)
    if not text or text.isspace():  # (`not text.strip()`, without the copy)
        return None
    from_id = m.get("from_id")
    author_id = _peer_id(from_id) if type(from_id) is str else None
    # Without a sender (old channel posts) the live adapter names the chat itself.
    chat = str(chat_id)
    author_id = author_id or chat
    sender = m.get("from")
    author = sender if type(sender) is str and sender else DELETED if from_id else chat
    reply_to = m.get("reply_to_message_id")
    return Record(
        _key(chat_id, private, author_id if author_id != chat else None, scope),
        field(path, where, "id", str(message_id) if own_ids else f"export:{message_id}"),
        clean(text, MAX_TEXT_BYTES),
        _author(author),
        field(path, where, "from_id", author_id),
        ts,
        "assistant" if bot_id is not None and author_id == str(bot_id) else "user",
        # the same numbering as the message ids (a bool is no id)
        "" if type(reply_to) is not int else str(reply_to) if own_ids else f"export:{reply_to}",
        cut=was_cut(text, MAX_TEXT_BYTES),
    )


# A chat has few senders and each writes many messages: their names and ids are worked out once.
@functools.lru_cache(maxsize=4096)
def _author(name: str) -> str:
    return clean(one_line(name), MAX_FIELD_BYTES)


_peer_id = functools.lru_cache(maxsize=4096)(telegram_peer_id)


@functools.lru_cache(maxsize=4096)
def _key(chat_id: int, private: bool, user: str | None, scope: str) -> str:
    return telegram_chat_key(chat_id, private=private, user_id=user, memory_scope=scope)


def _timestamp(path: Path, where: str, m: dict[str, Any]) -> str:
    unix = m.get("date_unixtime")
    if unix is not None:
        try:
            return unix_iso(int(unix))
        except (TypeError, ValueError, OverflowError, OSError):
            raise ExportError(path, f"{where}: `date_unixtime` is not a number of seconds") from None
    date = require(m.get("date"), str, path, where, "date")
    try:
        # Exports before 2023 have only `date`, in the exporting computer's local time.
        return utc_iso(datetime.fromisoformat(date))
    except ValueError:
        raise ExportError(path, f"{where}: `date` is not an ISO-8601 time") from None


def flatten(text: Any) -> str:
    """Telegram's `text` (a string, or a list of strings and entities) as plain text."""
    if type(text) is str:
        return text
    if not isinstance(text, list):
        return ""
    parts = []
    for part in text:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            words = str(part.get("text") or "")
            href = part.get("href")
            # A hidden link keeps its address: people search for the site they shared.
            parts.append(f"{words} ({href})" if href and href != words else words)
    return "".join(parts)


# The fields of a message that make a marker: one look at its keys tells a message without any.
_MARKED = frozenset(
    {"forwarded_from", "photo", "media_type", "file", "file_name", "poll", "contact_information"}
    | {"location_information"}
)


def render(m: dict[str, Any]) -> str:
    """The words of a message: markers for forwarding and media, then the flattened text."""
    words = flatten(m.get("text")).strip()
    if _MARKED.isdisjoint(m):
        return words
    marks = []
    if m.get("forwarded_from"):
        marks.append(f"[forwarded from {m['forwarded_from']}]")
    media = _media(m)
    if media:
        marks.append(media)
    return " ".join(p for p in (*marks, words) if p)


def _media(m: dict[str, Any]) -> str:
    if "photo" in m:
        return "[photo]"
    kind = m.get("media_type")
    if kind == "sticker":
        emoji = m.get("sticker_emoji")
        return f"[sticker {emoji}]" if emoji else "[sticker]"
    if kind == "audio_file":
        title = " - ".join(str(m[k]) for k in ("performer", "title") if m.get(k))
        return f"[audio {title}]" if title else "[audio]"
    if kind in MEDIA_MARKERS:
        return f"[{MEDIA_MARKERS[kind]}]"
    if "file" in m or "file_name" in m:
        name = m.get("file_name") or _file_name(m.get("file"))
        return f"[file {name}]" if name else "[file]"
    if isinstance(m.get("poll"), dict):
        return f"[poll {m['poll'].get('question', '')}]".replace(" ]", "]")
    if isinstance(m.get("contact_information"), dict):
        c = m["contact_information"]
        name = " ".join(str(c[k]) for k in ("first_name", "last_name") if c.get(k))
        return f"[contact {name}]" if name else "[contact]"
    if "location_information" in m:
        return f"[location {m['place_name']}]" if m.get("place_name") else "[location]"
    return ""


def _file_name(file: Any) -> str:
    if not isinstance(file, str) or file.startswith(NOT_INCLUDED):
        return ""
    return file.rsplit("/", 1)[-1]
