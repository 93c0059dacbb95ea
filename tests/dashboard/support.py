"""Helpers of the dashboard's tests: a chat to look at, a logged-in client, the CSRF token of a page."""

from __future__ import annotations

import re
from typing import Any

import httpx

TOKEN = "dash-test-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}
CHAT = "telegram:-1001"
OTHER = "discord:777"
EVIL_NAME = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'


async def seed(client: httpx.AsyncClient) -> dict[str, Any]:
    """Two chats: an imported one with people, facts, a hostile name, a reminder, usage; another."""
    messages = [
        {
            "role": "user",
            "text": "My name is Ada and I live in Lisbon",
            "author": "Ada",
            "author_id": "u1",
            "message_id": "m1",
            "ts": "2026-11-30T10:00:00Z",
        },
        {
            "role": "user",
            "text": "I like chess",
            "author": "Ada L.",
            "author_id": "u1",
            "message_id": "m2",
            "ts": "2026-11-30T10:01:00Z",
        },
        {
            "role": "user",
            "text": f"I like {EVIL_NAME} pastries",
            "author": EVIL_NAME,
            "author_id": "u2",
            "message_id": "m3",
            "ts": "2026-11-30T10:02:00Z",
        },
        {"role": "assistant", "text": "Noted, Ada.", "message_id": "m4", "ts": "2026-11-30T10:03:00Z"},
    ]
    r = await client.post(
        f"/v1/chats/{CHAT}/import", headers=AUTH, json={"title": "Chess club", "messages": messages}
    )
    assert r.status_code == 200, r.text
    reply = {
        "text": "hi",
        "tier": "fast",
        "model": "m",
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
        "cost_usd": 0.02,
    }
    assert (await client.post(f"/v1/chats/{CHAT}/reply", headers=AUTH, json=reply)).status_code == 200
    reminder = {"text": "water the plants", "due_at": 4_000_000_000_000, "author": "Ada", "author_id": "u1"}
    r = await client.post(f"/v1/chats/{CHAT}/reminders", headers=AUTH, json=reminder)
    assert r.status_code == 200, r.text
    r = await client.post(
        f"/v1/chats/{OTHER}/turn",
        headers=AUTH,
        json={"text": "my name is Zed", "author": "Zed", "author_id": "z9", "title": "Secret server"},
    )
    assert r.status_code == 200, r.text
    return {"reminder": r.json()}


async def login(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    """Log in with the token (the cookie stays in the client)."""
    return await client.post("/dashboard/login", data={"token": token})


def csrf_of(page: str) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


async def facts(client: httpx.AsyncClient, chat: str = CHAT) -> list[dict[str, Any]]:
    """The chat's current facts, as the bot reads them (the memory API's facts route)."""
    r = await client.get(f"/v1/chats/{chat}/facts", headers=AUTH)
    assert r.status_code == 200
    return list(r.json()["facts"])
