"""Learning from one user message into the chat's memory: the rules' facts, and what the message
before it in the chat adds.

- The values a message says were so before ("left Lyon for Montreal": Lyon) go in first, so that
  the new ones supersede them and they are the history.
- An answer to the chat's previous message, a question ("how many dogs do you have?" "two, Rex
  and Ash"), is its author's fact (facts/answers.py reads it).
- Names people use for each other: "welcome seun!", "hi moose" right after that person's message
  add an alias fact to them. An alias is an ordinary fact: `/facts` lists it, `/forgetfact N`
  removes it, the offline answerer and retrieval's author boost know people by it. A name that
  is already a word of their display name, their stated name or an alias, or of anyone else
  who spoke lately, adds nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_engine.api import wire
from memory_engine.facts.answers import addressed, context_facts, may_answer
from memory_engine.facts.extract import facts_and_past, looks_like_correction

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory


LOOK_BACK = 500  # messages whose authors' names a greeting may use instead
_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "ı": "i"})


def _fold(text: str) -> str:
    low = unicodedata.normalize("NFKD", text.casefold().translate(_LETTERS))
    return "".join(c for c in low if not unicodedata.combining(c))


def learn_alias(memory: ChatMemory, author_id: str, name: str, source: int, ts: str) -> None:
    """Add `name` to the aliases of `author_id` (their display name read from their last message)."""
    rows = memory.sql.exec(
        "SELECT author FROM messages WHERE author_id = ? AND role = 'user' ORDER BY id DESC LIMIT 1",
        author_id,
    )
    author = str(rows[0]["author"]) if rows else ""
    if not author:
        return  # their message is not stored yet (or gone): nobody to name
    known = {_fold(w) for w in author.replace(",", " ").split()}
    facts = memory.sql.exec(
        "SELECT value FROM facts WHERE author_id = ? AND key IN ('name', 'alias') AND superseded_at IS NULL "
        "AND kind = 'fact'",
        author_id,
    )
    for f in facts:
        known |= {_fold(w.strip()) for w in str(f["value"]).replace(",", " ").split()}
    if _fold(name) in known:
        return
    # "hi Marcus!" after Lan's message greets Marcus, not Lan: a word of anyone else's name who
    # spoke lately is theirs (a bounded look back: greetings are rare, the window is cheap).
    recent = memory.sql.exec(
        "SELECT DISTINCT author FROM messages WHERE id > ? AND id <= ? AND author_id != ? AND role = 'user'",
        source - LOOK_BACK,
        source,
        author_id,
    )
    if any(_fold(name) in {_fold(w) for w in str(r["author"] or "").split()} for r in recent):
        return
    memory.learn_fact(author, author_id, "alias", name, source)


def last_said(before: Sequence[wire.Message]) -> tuple[str, str] | None:
    """(text, author id) of the newest user message of `before` (the turn's messages before it)."""
    said = next((m for m in reversed(before) if m["role"] == "user"), None)
    return (str(said["text"]), str(said["author_id"] or "")) if said else None


def learn_in_context(
    memory: ChatMemory, text: str, author: str, author_id: str, source: int, ts: str, before: tuple[str, str]
) -> None:
    """What `text` states with the chat's previous message (`before`: text, author id): the answer
    to its question is its author's fact; a greeting ("welcome seun!") names the one greeted."""
    theirs = before[1] == author_id
    if may_answer(text, before[0]):
        for change in context_facts(text, before[0], theirs):
            memory.learn_fact(author, author_id, change.key, change.value, source)
    if before[1] and (name := addressed(text, theirs)):
        learn_alias(memory, before[1], name, source, ts)


def apply_facts(
    memory: ChatMemory,
    text: str,
    author: str,
    author_id: str,
    source: int,
    ts: str,
    said_before: str | bool | None = True,
    chat_before: tuple[str, str] | None = None,
) -> None:
    """Record what the rules extract from one user message about its author.

    `said_before`: their last message (None: none) as an import holding rows knows it; True: look it up.
    `chat_before`: the chat's previous user message (text, author id), None when unknown.
    """
    if chat_before is not None:  # an answer to its question; a greeting of its author
        learn_in_context(memory, text, author, author_id, source, ts, chat_before)
    previous = None
    if looks_like_correction(text):  # "sorry, Osaka": what the author's last message stated
        if said_before is not True:
            previous = said_before or None
        else:
            rows = memory.sql.exec(
                "SELECT text FROM messages WHERE author_id = ? AND id < ? AND role = 'user' "
                "ORDER BY id DESC LIMIT 1",
                author_id,
                source,
            )
            previous = rows[0]["text"] if rows else None
    past, changes = facts_and_past(text, previous=previous)
    for change in (*past, *changes):  # the past first: "left Lyon for Montreal" keeps Lyon as history
        if change.remove_from:
            memory.change_fact(author, author_id, change.remove_from, source, ts, remove=change.value)
        if change.add:  # False for a removal only ("I don't like X anymore")
            memory.change_fact(author, author_id, change.key, source, ts, add=change.value)
