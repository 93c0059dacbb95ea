"""Issue 40, probe item 8 (the flood): one member's burst of messages must not hold the
others' behind it. Updates of one chat are handled one at a time, each person's in their
order, and the people with updates waiting take turns (round robin), so an admin's mention
after 30 quick /reminders from one member is handled next, not 31st. No time is measured:
the order of handling is.
"""

from __future__ import annotations

import asyncio

from telegram import Update

from bot.adapters.telegram.chat import ChatOrder

GROUP = {"id": -100, "type": "supergroup", "title": "g"}


def update(n: int, user_id: int, text: str, chat: dict | None = None) -> Update:
    data = {
        "update_id": n,
        "message": {
            "message_id": n,
            "date": 0,
            "chat": chat or GROUP,
            "from": {"id": user_id, "is_bot": False, "first_name": f"u{user_id}"},
            "text": text,
        },
    }
    return Update.de_json(data, None)


async def _run(order: ChatOrder, updates: list[Update], first_gate: asyncio.Event) -> list[int]:
    handled: list[int] = []

    async def handle(u: Update) -> None:
        if not handled and u.update_id == updates[0].update_id:
            await first_gate.wait()  # the first one is slow: the rest queue behind it
        handled.append(u.update_id)

    tasks = []
    for u in updates:
        tasks.append(asyncio.create_task(order.do_process_update(u, handle(u))))
        await asyncio.sleep(0)  # each update arrives (is queued) before the next
    first_gate.set()
    await asyncio.gather(*tasks)
    return handled


async def test_a_flood_from_one_member_does_not_hold_an_admin_behind_it():
    flood = [update(i, 7, "/reminders") for i in range(1, 31)]
    admin = update(100, 1, "@bot what's up?")
    handled = await _run(ChatOrder(), [*flood, admin], asyncio.Event())
    assert sorted(handled) == sorted(u.update_id for u in [*flood, admin])  # every one, once
    assert handled.index(100) <= 1, handled  # right after the one in hand
    assert [h for h in handled if h != 100] == [u.update_id for u in flood]  # the member's order kept


async def test_people_with_updates_waiting_take_turns_and_keep_their_own_order():
    said = [
        update(1, 7, "a1"),
        update(2, 7, "a2"),
        update(3, 7, "a3"),
        update(4, 8, "b1"),
        update(5, 8, "b2"),
    ]
    said.append(update(6, 9, "c1"))
    handled = await _run(ChatOrder(), said, asyncio.Event())
    assert handled == [1, 4, 6, 2, 5, 3]


async def test_other_chats_are_not_held_and_a_cancelled_wait_frees_its_turn():
    order, gate = ChatOrder(), asyncio.Event()
    handled: list[int] = []

    async def slow(u: Update) -> None:
        await gate.wait()
        handled.append(u.update_id)

    async def quick(u: Update) -> None:
        handled.append(u.update_id)

    first = asyncio.create_task(order.do_process_update(update(1, 7, "x"), slow(update(1, 7, "x"))))
    await asyncio.sleep(0)
    waiting = asyncio.create_task(order.do_process_update(update(2, 8, "y"), quick(update(2, 8, "y"))))
    other_chat = update(3, 9, "z", {"id": -200, "type": "supergroup", "title": "h"})
    await asyncio.wait_for(order.do_process_update(other_chat, quick(other_chat)), 5)
    assert handled == [3]  # another chat is not held by this one
    waiting.cancel()
    later = update(4, 8, "w")
    after = asyncio.create_task(order.do_process_update(later, quick(later)))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, after)
    assert handled == [3, 1, 4]  # the cancelled one gave up its turn; nothing hangs
