"""Facts from the model's compaction reply: asked for in the same call, parsed defensively.

The summarizer answers with the anchored summary followed by one fenced JSON block, a list
of `{"author_id", "key", "value"}` for what the speakers state about themselves. A light
model follows "markdown, then one ```json block" more reliably than a JSON object that
wraps 600 words of markdown in a string (escaping newlines is where small models slip).
The block is cut off before the summary is validated; whatever is wrong with it (missing,
not JSON, unknown keys, strangers' ids, overlong values) drops those facts, never the
compaction.
"""

from __future__ import annotations

import json
import re
from typing import Any

# The keys a fact may have; `favorite_<thing>` besides. List keys hold several items.
KEYS = frozenset(
    {
        *("name", "location", "job", "employer", "age", "birthday", "pronouns"),
        *("likes", "dislikes", "pets", "family"),
    }
)
LIST_KEYS = frozenset(["likes", "dislikes", "pets", "family"])
MAX_FACTS = 50  # per reply
MAX_VALUE_CHARS = 100
_EMPTY = ("none", "null", "unknown", "n/a")
_FAVORITE = re.compile(r"^favou?rite_([a-z][a-z_]{0,39})$")
# The last fenced block tagged json, or untagged holding a JSON array or object.
_BLOCK = re.compile(
    r"```[ \t]*(?:json[ \t]*\n(?P<tagged>.*?)|\n(?P<body>\s*[\[{].*?))\n?[ \t]*```[ \t]*$", re.S | re.I | re.M
)
_FACTS_HEADING = re.compile(r"\n[ \t]*(?:#+[ \t]*)?(?:\*\*)?facts(?:\*\*)?:?[ \t]*$", re.I)

INSTRUCTIONS = (
    "\n\nAfter the summary, add one fenced code block tagged json: a JSON array of the facts "
    "the speakers state about themselves in the new messages, as they are now, each "
    '{"author_id": "<the author_id of the message>", "key": "<key>", "value": "<short value>"}. '
    "Keys: name, location, job, employer, age, birthday, pronouns, likes, dislikes, "
    'favorite_<thing> (e.g. favorite_book), pets (e.g. "Biscuit (dog)"), family (e.g. '
    '"Ana (sister)"). No facts from questions, negations, hypotheticals or about other '
    "people; an empty array [] when there are none. Nothing after the block."
)


def split_reply(reply: str) -> tuple[str, Any]:
    """(the summary text, the parsed facts block or None) of a compaction reply."""
    if not isinstance(reply, str):
        return reply, None
    found = list(_BLOCK.finditer(reply))
    if not found:
        return reply, None
    last = found[-1]
    summary = reply[: last.start()].rstrip()
    summary = _FACTS_HEADING.sub("", summary).rstrip()
    try:
        return summary, json.loads(last.group("tagged") or last.group("body") or "")
    except (ValueError, RecursionError):
        return summary, None


def _key(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    key = raw.strip().lower().replace(" ", "_").replace("-", "_")
    if key in KEYS:
        return key
    m = _FAVORITE.match(key)
    return f"favorite_{m.group(1)}" if m else None


def _values(raw: Any, key: str) -> list[str]:
    items = raw if isinstance(raw, list) and key in LIST_KEYS else [raw]
    out = []
    for item in items:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            continue
        value = " ".join(item.split())  # one line, no control characters
        if value and len(value) <= MAX_VALUE_CHARS and value.lower() not in _EMPTY:
            out.append(value)
    return out


def clean_facts(raw: Any, authors: set[str]) -> list[tuple[str, str, str]]:
    """(author_id, key, value) for each usable fact about one of `authors`, at most MAX_FACTS."""
    if not isinstance(raw, list):
        return []
    out: list[tuple[str, str, str]] = []
    for fact in raw:
        if not isinstance(fact, dict):
            continue
        author_id = fact.get("author_id")
        if isinstance(author_id, int) and not isinstance(author_id, bool):
            author_id = str(author_id)
        key = _key(fact.get("key"))
        if not isinstance(author_id, str) or author_id not in authors or key is None:
            continue
        for value in _values(fact.get("value"), key):
            if (author_id, key, value) not in out:
                out.append((author_id, key, value))
        if len(out) >= MAX_FACTS:
            return out[:MAX_FACTS]
    return out
