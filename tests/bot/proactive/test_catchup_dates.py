"""The offline `/catchup` digest: every date dateparser reads is under dates, and a person's later
messages are not lost behind their first (issue 40, first hour 12)."""

from __future__ import annotations

from bot.chat.proactive.catchup import digest
from memory_engine.api.wire import Message
from memory_engine.catchup import CatchupAnswer

SAID = [
    ("Ana", "Hi all, I hope everyone enjoyed the long mountain hike and the picnic by the river"),
    ("Ana", "We need the forms by the 14th of May"),
    ("Ben", "see you on Friday"),
    ("Ben", "I may come later"),
    ("Carl", "just a sec"),
    ("Carl", "the meeting moved to 2026-12-20"),
    ("Dora", "on se voit le 3 mai"),
    ("Dora", "now we are done"),
    ("Eve", "back in two weeks"),
]


def _answer() -> CatchupAnswer:
    messages: list[Message] = [
        {
            "id": i + 2,
            "role": "user",
            "author": who,
            "author_id": who.lower(),
            "text": text,
            "ts": f"2026-12-01T10:{i:02d}:00Z",
            "message_id": f"m{i}",
        }
        for i, (who, text) in enumerate(SAID)
    ]
    return {
        "since": "last_message",
        "since_ts": "2026-12-01T09:00:00Z",
        "total": len(messages),
        "messages": messages,
    }


def _section(lines: list[str], title: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(("-", " "))), len(lines))
    return lines[start + 1 : end]


def test_every_date_dateparser_reads_is_under_dates_and_only_those():
    lines = digest(_answer(), "Zoe", "zoe", languages=("en", "fr")).splitlines()
    dates = "\n".join(_section(lines, "Dates mentioned"))
    for text in ("by the 14th of May", "on Friday", "2026-12-20", "le 3 mai", "in two weeks"):
        assert text in dates, (text, dates)
    for text in ("I may come later", "just a sec", "now we are done", "Hi all"):
        assert text not in dates, (text, dates)


def test_each_persons_later_messages_are_not_lost_behind_their_first():
    text = digest(_answer(), "Zoe", "zoe")
    who = _section(text.splitlines(), "Who said what")
    ana = "\n".join(line for line in who if "Ana" in line or line.startswith("  "))
    assert "long mountain hike" in ana and "We need the forms by the 14th of May" in ana
    for person in ("Ben", "Carl", "Dora", "Eve"):
        assert any(line.startswith(f"- {person} (") for line in who)
