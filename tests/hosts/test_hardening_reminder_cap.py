"""Issue 40, probe item 8 (the cap): one member cannot take every reminder slot of a chat.

The chat keeps MAX_PENDING (200) pending reminders; one person keeps at most
MAX_PENDING_PER_PERSON of them, so the others still can set theirs.
"""

from __future__ import annotations

from memory_engine.reminders.store import MAX_PENDING, MAX_PENDING_PER_PERSON
from tests.support import local_memory
from tests.support.backends import LocalBackend

CHAT = "/v1/chats/telegram:-100/reminders"


async def _add(mem: LocalBackend, author_id: str, i: int) -> tuple[int, object]:
    body = {
        "text": f"thing {i}",
        "due_at": 1_900_000_000_000 + i,
        "author_id": author_id,
        "author": author_id,
    }
    return await mem.call("POST", CHAT, json=body)


async def test_one_person_keeps_at_most_their_share(tmp_path):
    assert MAX_PENDING_PER_PERSON < MAX_PENDING
    async for mem in local_memory(tmp_path):
        for i in range(MAX_PENDING_PER_PERSON):
            status, _ = await _add(mem, "mallory", i)
            assert status == 200
        status, body = await _add(mem, "mallory", 999)
        assert status == 400 and "you have" in str(body) and str(MAX_PENDING_PER_PERSON) in str(body)
        status, _ = await _add(mem, "alice", 1)  # another member still can
        assert status == 200
        status, listed = await mem.call("GET", CHAT)
        assert status == 200
        mine = [r for r in listed["reminders"] if r["author_id"] == "mallory"]  # type: ignore[index]
        assert len(mine) == MAX_PENDING_PER_PERSON
