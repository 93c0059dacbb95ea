"""`/catchup` and "what did I miss?": a digest of what was said since the asker's last message.

The memory worker gives the messages since then (or of the last day when they never wrote
here), at most a bounded number; this module makes the digest without a model, by
extraction: who said what (each person's most telling message), what was decided, questions
to the asker and mentions of them, and the dates mentioned. Every line quotes the chat's own
words, attributed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from memory_engine import routes
from memory_engine.catchup import CatchupAnswer
from memory_engine.wire import Message

from bot.router.registry import Command, CommandContext
from bot.router.types import CommandResult

MAX_LINES = 5  # per section
QUOTE_CHARS = 140
_WHAT_DID_I_MISS = re.compile(  # the whole message: "what's new in Python?" is another question
    r"^\W*(?:so\W+|ok\W+|hey\W+)?(?:what\s+(?:did|have)\s+i\s+miss(?:ed)?|catch\s+me\s+up|what'?s\s+new\s+here)"
    r"(?:\s+(?:here|in\s+(?:this|the)\s+(?:chat|group)|while\s+i\s+was\s+(?:away|out|gone)|today))?\W*$",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|let'?s|we'?ll|we will|agreed|agree on|plan is|going with|settled on|"
    r"confirmed|final(?:ly)?|booked)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\b(?:today|tonight|tomorrow|next (?:week|month)|"
    r"(?:next |on )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}|"
    r"\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*|"
    r"\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?|\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}|\d{1,2}\s?(?:am|pm))\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-zÀ-ÿ']{4,}")
_SMALL = frozenset(
    [
        "this",
        "that",
        "with",
        "have",
        "just",
        "what",
        "when",
        "where",
        "there",
        "their",
        "they",
        "them",
        "then",
        "than",
        "been",
        "were",
        "will",
        "would",
        "could",
        "should",
        "about",
        "really",
        "okay",
        "yeah",
        "haha",
        "also",
        "very",
        "much",
        "some",
        "like",
        "from",
        "your",
        "yours",
        "mine",
    ]
)


def asks_what_i_missed(text: str) -> bool:
    """True for "what did I miss?" (and the like) addressed to the bot."""
    return bool(_WHAT_DID_I_MISS.match(text.strip()))


def _quote(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= QUOTE_CHARS else one_line[: QUOTE_CHARS - 1].rstrip() + "…"


def _weight(text: str) -> int:
    return len({w.lower() for w in _WORD.findall(text)} - _SMALL)


def _line(m: Message) -> str:
    return f'- {m["author"] or "someone"}: "{_quote(m["text"])}"'


def _section(title: str, lines: Iterable[str]) -> list[str]:
    chosen = list(lines)
    if not chosen:
        return []
    more = f" (and {len(chosen) - MAX_LINES} more)" if len(chosen) > MAX_LINES else ""
    return [f"{title}{more}:", *chosen[-MAX_LINES:]]


def _names(asker: str) -> re.Pattern[str] | None:
    words = [w for w in re.findall(r"\w+", asker) if len(w) >= 2]
    if not words:
        return None
    return re.compile(r"(?<![\w@])@?(?:" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)


def digest(answer: CatchupAnswer, asker: str, asker_id: str) -> str:
    """The extractive digest of a catch-up answer, for `asker`."""
    since = _when(answer["since_ts"])
    mark = f"since your last message ({since})" if answer["since"] == "last_message" else "in the last day"
    people = [m for m in answer["messages"] if m["role"] == "user" and m["author_id"] != asker_id]
    if not people:
        return f"Nothing new here {mark}."
    counts = Counter(m["author"] or "someone" for m in people)
    said = f"{len(people)} message{'' if len(people) == 1 else 's'}"
    head = f"{said} from {len(counts)} {'person' if len(counts) == 1 else 'people'} {mark}"
    if answer["total"] > len(answer["messages"]):
        head += f" (the last {len(answer['messages'])} of {answer['total']} shown)"
    lines = [head + ".", "Who said what:"]
    for who, n in counts.most_common(8):
        theirs = [m for m in people if (m["author"] or "someone") == who]
        best = max(reversed(theirs), key=lambda m: _weight(m["text"]))
        lines.append(f'- {who} ({n}): "{_quote(best["text"])}"')
    names = _names(asker)
    lines += _section("Decided", (_line(m) for m in people if _DECISION.search(m["text"])))
    lines += _section(
        "Questions to you and mentions", (_line(m) for m in people if names and names.search(m["text"]))
    )
    lines += _section("Dates mentioned", (_line(m) for m in people if _DATE.search(m["text"])))
    return "\n".join(lines)


def _when(ts: str) -> str:
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts
    return moment.strftime("%a %d %b %H:%M UTC")


async def catchup(ctx: CommandContext) -> CommandResult:
    """`/catchup`: what was said here since your last message."""
    query: dict[str, str | int | None] = {"author_id": ctx.message.author_id or "-", "limit": 200}
    answer = await ctx.memory.client.call(routes.CATCHUP, ctx.chat, query=query)
    return CommandResult(ctx.redact(digest(answer, ctx.message.author, ctx.message.author_id)))


COMMANDS = (
    Command(
        "catchup",
        "what was said here since your last message: who said what, decisions, questions to you, dates",
        catchup,
        aliases=("missed",),
    ),
)
