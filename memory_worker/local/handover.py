"""The local host's hand-over of due reminders from a chat to the dispatch object.

The same steps as the Durable Object's alarm (`entry.py`): read the due occurrences under
the chat's lock, queue them in the dispatch object under its lock (idempotent by key), then
mark them handed in the chat. A crash between two steps repeats the first on the next alarm;
the queue ignores a key it holds, so nothing is queued twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_engine.reminders.store import DISPATCH_KEY, due_items, mark_handed, offer

if TYPE_CHECKING:
    from memory_engine.engine import ChatMemory
    from memory_worker.local.chats import ChatStore


async def hand_over(store: ChatStore, chat_key: str, memory: ChatMemory, now_ms: Callable[[], int]) -> int:
    """Queue the chat's due reminders in the dispatch object; how many (`next_wake` sets the next alarm)."""
    async with store.lock(chat_key):
        items = due_items(memory.sql, chat_key, now_ms())
    if items:
        async with store.lock(DISPATCH_KEY):
            offer(store.open(DISPATCH_KEY).sql, items, now_ms())
        async with store.lock(chat_key):
            memory.sql.transaction(lambda: mark_handed(memory.sql, items))
    return len(items)
