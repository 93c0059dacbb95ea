"""Chat keys, stated once: the live adapters and the history importers compute them here.

`telegram:<chat id as the Bot API gives it>` (supergroups and channels `-100<id>`, basic
groups `-<id>`, private chats the user's id), `discord:<channel id>`; with
`memory_scope = "user"` the person's id is appended (`:<user id>`), except in Telegram
private chats, which belong to one person already.
"""

from __future__ import annotations

# Telegram Desktop's export names chats by type and gives the bare id; the Bot API marks
# the id by the peer's kind (https://core.telegram.org/api/bots/ids).
TELEGRAM_USER_TYPES = frozenset({"personal_chat", "bot_chat", "saved_messages", "verification_codes"})
TELEGRAM_GROUP_TYPES = frozenset({"private_group", "public_group"})
TELEGRAM_CHANNEL_TYPES = frozenset(
    {"private_supergroup", "public_supergroup", "private_channel", "public_channel", "gigagroup"}
)
CHANNEL_ID_SHIFT = 1_000_000_000_000  # -100<id> == -(10**12 + id)


def telegram_chat_key(chat_id: int, *, private: bool, user_id: int | str | None, memory_scope: str) -> str:
    """`telegram:<chat id>`, or `telegram:<chat id>:<user id>` for per-user memory in groups."""
    if memory_scope == "user" and not private and user_id is not None:
        return f"telegram:{chat_id}:{user_id}"
    return f"telegram:{chat_id}"


def discord_chat_key(channel_id: int | str, user_id: int | str, *, memory_scope: str) -> str:
    """`discord:<channel>`, or `discord:<channel>:<user>` with per-user memory."""
    if memory_scope == "user":
        return f"discord:{channel_id}:{user_id}"
    return f"discord:{channel_id}"


def telegram_bot_api_id(export_type: str, bare_id: int) -> int:
    """The Bot API's id of a chat that Telegram Desktop exported as (`type`, bare `id`)."""
    if export_type in TELEGRAM_CHANNEL_TYPES:
        return -(CHANNEL_ID_SHIFT + bare_id)
    if export_type in TELEGRAM_GROUP_TYPES:
        return -bare_id
    if export_type in TELEGRAM_USER_TYPES:
        return bare_id
    raise ValueError(f"unknown Telegram chat type {export_type!r}")


def telegram_peer_id(from_id: str) -> str | None:
    """The Bot API id of an exported sender: "user123" -> "123", "channel123" -> "-100123"."""
    for prefix, shift in (("user", None), ("channel", CHANNEL_ID_SHIFT), ("chat", 0)):
        if from_id.startswith(prefix) and from_id[len(prefix) :].isdigit():
            bare = int(from_id[len(prefix) :])
            return str(bare if shift is None else -(shift + bare))
    return None
