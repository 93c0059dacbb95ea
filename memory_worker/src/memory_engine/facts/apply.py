"""Recording what one user message states: the rules' facts, with the message before it in the chat.

The values a message says were so before ("left Lyon for Montreal": Lyon) go in first, so that
the new ones supersede them and they are the history; an answer to the chat's previous message
(a question) and a greeting of its author are read with it (facts/aliases.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_engine.facts.aliases import learn_in_context
from memory_engine.facts.extract import facts_and_past, looks_like_correction

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory


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
