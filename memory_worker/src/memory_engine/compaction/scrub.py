"""What was forgotten stays out of the summary: a removed fact's or note's value is scrubbed.

`/forgetfact` and `/unremember` leave a tombstone: the value, with whose it was, in the chat's
state ("forgotten", a bounded JSON list; it goes with the person on `/forgetme` and with the chat
on `/forget`). Its only use is here: every summary the chat stores (the current one when the fact
goes, and each one a compaction commits later, from the offline summarizer or a model) loses the
lines that hold a forgotten value, since the messages that said it may be summarized again; and
a model's fact block cannot bring the value back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from memory_engine.storage import SqlStorage

STATE_KEY = "forgotten"
MAX_TOMBSTONES = 200  # the newest kept: a chat that forgets more loses the oldest scrubs first
NONE_LINE = "- none"
_OBJECTIVE = re.compile(r"^(?P<head>- Conversation with .+? about: )(?P<what>.+)\.$")


def _tombstones(sql: SqlStorage) -> list[list[str]]:
    rows = sql.exec("SELECT value FROM state WHERE key = ?", STATE_KEY)
    try:
        data = json.loads(rows[0]["value"]) if rows and rows[0]["value"] else []
    except ValueError:
        return []
    return [[str(x) for x in item[:2]] for item in data if isinstance(item, list) and len(item) >= 2]


def _store(sql: SqlStorage, items: list[list[str]]) -> None:
    sql.exec(
        "INSERT INTO state(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        STATE_KEY,
        json.dumps(items[-MAX_TOMBSTONES:], ensure_ascii=False),
    )


def forgotten_values(sql: SqlStorage) -> list[str]:
    """The values of the chat's forgotten facts and notes (for scrubbing only)."""
    return [value for _, value in _tombstones(sql) if value.strip()]


def remember_forgotten(sql: SqlStorage, author_id: str, value: str) -> None:
    """Keep a removed fact's value as a tombstone and scrub the stored summary of it now."""
    items = [t for t in _tombstones(sql) if t != [author_id, value]]
    _store(sql, [*items, [author_id, value]])
    scrub_stored(sql)


def forget_author_tombstones(sql: SqlStorage, author_id: str) -> None:
    """A forgotten person's tombstones go with them (their summary is rebuilt from what remains)."""
    items = _tombstones(sql)
    kept = [t for t in items if t[0] != author_id]
    if len(kept) != len(items):
        _store(sql, kept)


def _pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    parts = []
    for value in values:
        for item in value.split(","):
            item = " ".join(item.split())
            at = item.rfind("(")  # "Rex (dog)": the name is what must go (no regex: linear)
            if at >= 0 and item.endswith(")") and ")" not in item[at + 1 : -1]:
                item = item[:at].rstrip()
            if len(item) >= 2:
                parts.append(r"\s+".join(re.escape(w) for w in item.split()))
    if not parts:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(sorted(set(parts), key=len, reverse=True)) + r")(?!\w)", re.I)


def scrub(summary: str, values: Iterable[str]) -> str:
    """The summary without the lines holding any of `values` (a topic list loses just the topic)."""
    pattern = _pattern(values)
    if pattern is None or not summary or not pattern.search(summary):
        return summary
    out: list[str] = []
    for line in summary.split("\n"):
        if not pattern.search(line):
            out.append(line)
            continue
        topics = _OBJECTIVE.match(line)
        if topics:
            kept = [t for t in topics["what"].split("; ") if not pattern.search(t)]
            if kept:
                out.append(f"{topics['head']}{'; '.join(kept)}.")
                continue
        if line.startswith("## "):
            out.append(line)  # a heading is structure, never a value
    lines: list[str] = []
    for i, line in enumerate(out):  # a section left empty says so, as the summarizers write it
        lines.append(line)
        heading = line.startswith("## ")
        following = out[i + 1 :]
        body = next((x for x in following if x.strip()), "## ")
        if heading and body.startswith("## "):
            lines.append(NONE_LINE)
    return "\n".join(lines)


def scrub_stored(sql: SqlStorage) -> None:
    """Scrub the chat's stored summary now, and drop the last prompt (/why) that may quote it."""
    rows = sql.exec("SELECT value FROM state WHERE key = 'summary'")
    if rows:
        clean = scrub(str(rows[0]["value"] or ""), forgotten_values(sql))
        sql.exec("UPDATE state SET value = ? WHERE key = 'summary'", clean)
    sql.exec("DELETE FROM state WHERE key = 'last_prompt'")
