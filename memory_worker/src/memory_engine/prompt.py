"""The memory prompt: what the model is shown of a chat's memory, quoted as data.

The recent messages are not in it: the bot sends them as chat turns (the turn answer's
`recent`), so the prompt carries only what the turns do not (retrieved older messages, the
summary, facts and notes), and no message reaches the model twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from json.encoder import encode_basestring

from memory_engine.api import wire

HEADER = "Relevant chat memory. Use these exact prior words only when helpful."


# Line breaks that json.dumps leaves as they are, but that readers may still break on.
_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _quote(text: str) -> str:
    # A JSON string keeps each message on one line inside quotes, so remembered text can
    # neither fake a section of this prompt nor read as an instruction of its own.
    # (What json.dumps(text, ensure_ascii=False) returns, without a new encoder per call.)
    quoted = encode_basestring(text)
    if quoted.isascii():  # the breaks are not ASCII (and most text is): nothing to replace
        return quoted
    for char, escaped in _BREAKS.items():
        quoted = quoted.replace(char, escaped)
    return quoted


def _name(name: str) -> str:
    # Names are chosen by users too: one line, bounded, never a line of its own.
    return " ".join(name.split())[:64]


def _speaker(msg: wire.Message) -> str:
    if msg["role"] == "assistant":
        return "assistant"
    return _name(msg.get("author") or "") or msg["role"]


def _when(ts: str) -> str:
    return ts[:16].replace("T", " ")


def _line(msg: wire.Message) -> str:
    ts = _when(msg.get("ts") or "")
    return f"- [{ts}] {_speaker(msg)}: {_quote(msg['text'])}"


# What str.splitlines cuts at besides "\n" (and "\r\n").
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def _quoted_lines(text: str) -> str:
    """Each line of `text` (as str.splitlines cuts them) behind "> ", joined by "\n"."""
    if text.isascii() and not any(b in text for b in _OTHER_BREAKS):
        # A summary's usual form (~30 lines a turn): one replace instead of a string per line.
        return "> " + (text[:-1] if text.endswith("\n") else text).replace("\n", "\n> ")
    return "\n".join("> " + line for line in text.splitlines())


def render_prompt(
    retrieved: Iterable[wire.Message],
    summary: str | None,
    facts: Iterable[wire.Fact],
    notes: Iterable[wire.Fact] = (),
    topic_started_at: str | None = None,
) -> str:
    """The memory prompt: header, retrieved, then summary, facts and notes when present."""
    parts = [HEADER]
    retrieved = list(retrieved)
    if topic_started_at:  # /new: said once, so /why shows where the recent window begins
        parts.append(f"(new topic started {_when(topic_started_at)} UTC: recent messages begin there)")
    if retrieved:
        parts.append("Retrieved older messages:\n" + "\n".join(_line(m) for m in retrieved))
    if summary:
        parts.append("Summary of earlier conversation (quoted):\n" + _quoted_lines(summary))
    by_author: dict[str, list[str]] = {}
    names: dict[str, str] = {}  # a few people state most of the facts: each name cleaned once
    for f in facts:
        who = f["author"] or f["author_id"]
        name = names.get(who)
        if name is None:
            name = names[who] = _name(who) or "someone"
        by_author.setdefault(name, []).append(f"{f['key']} = {_quote(f['value'])}")
    if by_author:
        parts.append(
            "Known facts:\n"
            + "\n".join(f"- {author}: " + "; ".join(items) for author, items in by_author.items())
        )
    notes = list(notes)
    if notes:
        parts.append(
            "Notes the chat asked to keep (quoted):\n"
            + "\n".join(
                f"- {_quote(n['value'])} ({_name(n['author'] or n['author_id']) or 'someone'})" for n in notes
            )
        )
    return "\n\n".join(parts)
