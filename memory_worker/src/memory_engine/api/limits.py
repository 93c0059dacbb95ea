"""The limits each field of the API keeps, stated in the OpenAPI document (`openapi.py`).

The checks themselves are the routes' argument functions (`route_args.py`, the reminders'
`handlers.py`); this table states the same bounds, from the same constants, as JSON Schema,
so a request the document calls valid is taken and one it calls invalid is refused (the
contract test runs schemathesis against the local host). Lengths the API counts in bytes of
UTF-8 are stated as characters (JSON Schema counts no bytes) and said in the description.
"""

from __future__ import annotations

from typing import Any

from memory_engine import catchup, notes, user_data
from memory_engine.api import http_types  # its CHAT_KEY (a pattern checked where it is defined)
from memory_engine.api.route_args import IMPORT_ID, MAX_QUERY_CHARS, MAX_REMAINING, MAX_SEARCH_K
from memory_engine.api.validation import MAX_FIELD_CHARS, MAX_TEXT_BYTES
from memory_engine.chat_state import MAX_PERSONA_CHARS
from memory_engine.dashboard import directory, views
from memory_engine.reminders import store as reminders
from memory_engine.reminders.handlers import MAX_EVERY_CHARS, MAX_ID, MAX_LEASE_MS, MAX_MS

Schema = dict[str, Any]
DIR_COUNT: Schema = {"minimum": 0, "maximum": 2**53}  # the directory's counts and clocks
CHAT_KEY: Schema = {"pattern": http_types.CHAT_KEY.pattern.replace("\\Z", "$")}

# Not blank: a character that is not white space (Python's white space: the API strips it).
WORDS = "[^\\s\\u001c-\\u001f\\u0085]"
FIELD: Schema = {"maxLength": MAX_FIELD_CHARS, "description": f"At most {MAX_FIELD_CHARS} bytes of UTF-8."}
NAMED: Schema = {**FIELD, "minLength": 1}
TEXT: Schema = {
    "minLength": 1,
    "pattern": WORDS,
    "maxLength": MAX_TEXT_BYTES,
    "description": f"Not blank; at most {MAX_TEXT_BYTES} bytes of UTF-8 (413 above).",
}
MS: Schema = {"minimum": 0, "maximum": MAX_MS, "description": "Unix time in milliseconds."}
ID: Schema = {"minimum": 1, "maximum": MAX_ID}
TOKENS: Schema = {"minimum": 0, "maximum": 10**9}
TZ: Schema = {
    "minLength": 1,
    "maxLength": 64,
    "description": "An IANA zone that exists, in any case, such as Europe/Lisbon (400 otherwise).",
}


def _words(most: int) -> Schema:
    """A text of 1 to `most` characters once trimmed."""
    return {"minLength": 1, "pattern": WORDS, "maxLength": most}


# Per schema (a wire TypedDict's name), per property: JSON Schema keywords added to its own.
PROPERTIES: dict[str, dict[str, Schema]] = {
    "TurnRequest": {"text": TEXT, "author": FIELD, "author_id": FIELD, "message_id": FIELD},
    "ReplyRequest": {
        "tier": NAMED,
        "model": NAMED,
        "text": {"maxLength": MAX_TEXT_BYTES},
        "latency_ms": {"minimum": 0},
        "cost_usd": {"minimum": 0},
        "message_id": FIELD,
        "error": {"maxLength": 2048},
        "author_id": FIELD,
        "reply_to_message_id": FIELD,
        "reply_to_author_id": FIELD,
    },
    "Usage": {"prompt_tokens": TOKENS, "completion_tokens": TOKENS},
    "SettingsRequest": {"persona": {"maxLength": MAX_PERSONA_CHARS}},
    "ImportRequest": {
        "remaining": {"minimum": 0, "maximum": MAX_REMAINING},
        "import_id": {"pattern": f"^{IMPORT_ID.pattern}$"},
        "batch": {"minimum": 1, "maximum": MAX_REMAINING},
    },
    "ImportedMessage": {
        "text": TEXT,
        "author": FIELD,
        "author_id": FIELD,
        "message_id": FIELD,
        "ts": {**FIELD, "format": "date-time"},
        "reply_to_message_id": FIELD,
        "reply_to_author_id": FIELD,
    },
    "NoteRequest": {"text": _words(notes.MAX_NOTE_CHARS), "author": FIELD, "author_id": FIELD},
    "SearchQuery": {"q": {"maxLength": MAX_QUERY_CHARS}, "k": {"minimum": 1, "maximum": MAX_SEARCH_K}},
    "AuthorQuery": {"author_id": NAMED},
    "ExportQuery": {
        "author_id": NAMED,
        "after": {"minimum": 0, "maximum": 2**63 - 1},
        "upto": {"minimum": 0, "maximum": 2**63 - 1},
        "limit": {"minimum": 1, "maximum": user_data.MAX_PAGE},
    },
    "ReminderRequest": {
        "text": _words(reminders.MAX_TEXT),
        "due_at": MS,
        "author": FIELD,
        "author_id": FIELD,
        "tz": {"maxLength": 64},
        "every": {"description": f"The repeat rule: an object of at most {MAX_EVERY_CHARS} characters."},
    },
    "DeliveredRequest": {"reminder_id": ID, "due_at": MS, "sent_at": MS, "next_due_at": MS},
    "TimezoneRequest": {"timezone": TZ, "author_id": NAMED, "author": FIELD},
    "FollowupsRequest": {"author_id": NAMED, "author": FIELD},
    "OfferRequest": {"items": {"maxItems": reminders.MAX_LEASE}},
    "DispatchItem": {"key": FIELD, "chat_key": FIELD, "reminder_id": ID, "due_at": MS},
    "LeaseRequest": {
        "owner": NAMED,
        "prefixes": {"maxItems": 8, "items": {"type": "string", **FIELD}},
        "limit": {"minimum": 1, "maximum": reminders.MAX_LEASE},
        "lease_ms": {"minimum": 1, "maximum": MAX_LEASE_MS},
    },
    "AckRequest": {"keys": {"maxItems": reminders.MAX_LEASE, "items": {"type": "string", **FIELD}}},
    "ReleaseRequest": {"key": FIELD, "owner": NAMED, "retry_at": MS},
    "AroundQuery": {"n": {"minimum": 0, "maximum": views.MAX_AROUND}},
    "ChatReport": {
        "chat_key": CHAT_KEY,
        "title": FIELD,
        "last_ts": FIELD,
        "messages": DIR_COUNT,
        "people": DIR_COUNT,
        "authors": {"items": {"type": "string", **FIELD}},
        "usage": {"maxItems": directory.MAX_REPORT_ROWS},
    },
    "UsageDay": {"day": FIELD, "tier": FIELD, "calls": DIR_COUNT, "errors": DIR_COUNT},
    "DirectoryQuery": {"chats": {"items": {"type": "string", **CHAT_KEY}}, "since": FIELD, "month": FIELD},
    "AuthRequest": {
        "action": {"enum": list(directory.AUTH_ACTIONS)},
        "key": {"maxLength": 200},
        "until": DIR_COUNT,
        "now": DIR_COUNT,
        "limit": {"minimum": 1, "maximum": 10_000},
    },
    "CatchupQuery": {"author_id": NAMED, "limit": {"minimum": 1, "maximum": catchup.MAX_LIMIT}},
}

# Per schema: keywords on the object itself (a rule across its properties).
OBJECTS: dict[str, Schema] = {
    "SettingsRequest": {
        "anyOf": [
            {"required": ["mode"], "properties": {"mode": {"type": "string"}}},
            {"required": ["persona"], "properties": {"persona": {"type": "string"}}},
        ],
        "description": 'Give `mode`, `persona` ("" resets it) or both (400 for neither).',
    },
    "ReplyRequest": {
        # A successful attempt carries the answer's words; a failed one need not.
        "if": {"required": ["ok"], "properties": {"ok": {"const": False}}},
        "else": {"required": ["text"], "properties": {"text": {"type": "string", "pattern": WORDS}}},
    },
    "ImportRequest": {"dependentRequired": {"import_id": ["batch"], "batch": ["import_id"]}},
}


def refine(name: str, schema: Schema) -> Schema:
    """`schema` (the TypedDict `name`'s object) with the API's limits stated on it."""
    for prop, extra in PROPERTIES.get(name, {}).items():
        target = schema["properties"][prop]
        schema["properties"][prop] = _merge(target, extra)
    for key, value in OBJECTS.get(name, {}).items():
        schema[key] = f"{schema.get(key, '')} {value}".strip() if key == "description" else value
    return schema


def _merge(target: Schema, extra: Schema) -> Schema:
    """A property's schema with the limits added (onto the string/number member of a nullable)."""
    if "type" in target and isinstance(target["type"], list):  # ["string", "null"]
        kept = [t for t in target["type"] if t != "null"]
        own = {k: v for k, v in extra.items() if k != "description"}
        members = [{"type": t, **own} for t in kept] + [{"type": "null"}]
        merged: Schema = {"anyOf": members}
        if "description" in extra:
            merged["description"] = extra["description"]
        return merged
    return {**target, **extra}
