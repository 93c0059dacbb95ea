"""The dashboard's security over real HTTP against the local host: sessions, links, CSRF, escaping, scope."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest

from memory_engine.dashboard.auth import ADMIN, make_link
from memory_worker.local.embedded import EmbeddedMemoryHost
from tests.dashboard.support import AUTH, CHAT, EVIL_NAME, OTHER, TOKEN, csrf_of, facts, login, seed


@pytest.fixture
async def client(tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN) as host,
        httpx.AsyncClient(base_url=host.url, trust_env=False, timeout=30) as c,
    ):
        await seed(c)
        yield c


def _link(base: str, token: str = TOKEN, **kw) -> str:
    url = make_link(token, base, int(time.time() * 1000), **kw)
    return urlsplit(url).query.removeprefix("link=")


async def _fact_id(c: httpx.AsyncClient, key: str) -> int:
    return next(f["id"] for f in await facts(c) if f["key"] == key)


async def test_no_page_and_no_action_without_a_session(client):
    fact = await _fact_id(client, "location")
    for path in (
        "/dashboard",
        f"/dashboard/chat/{CHAT}",
        f"/dashboard/chat/{CHAT}/person/u1",
        f"/dashboard/chat/{CHAT}/message/1",
        f"/dashboard/chat/{CHAT}/export",
        f"/dashboard/chat/{CHAT}/person/u1/export",
    ):
        r = await client.get(path)
        assert r.status_code == 401, path
        assert "Lisbon" not in r.text and "Chess club" not in r.text and 'name="token"' in r.text
    r = await client.post(f"/dashboard/chat/{CHAT}/do", data={"action": "forget_fact", "fact_id": str(fact)})
    assert r.status_code == 401
    assert await _fact_id(client, "location") == fact  # nothing changed
    # A cookie we did not sign is no session either.
    client.cookies.set("chatbot_dashboard", "eyJyb2xlIjoib3duZXIifQ.AAAA", path="/dashboard")
    assert (await client.get("/dashboard")).status_code == 401


async def test_a_wrong_token_is_refused_and_login_attempts_are_limited(client):
    r = await login(client, "not-the-token")
    assert r.status_code == 401 and "Wrong token" in r.text and "set-cookie" not in r.headers
    for _ in range(9):
        await login(client, "still-wrong")
    r = await login(client)  # the right token, after ten attempts in the window
    assert r.status_code == 429 and "set-cookie" not in r.headers
    assert (await client.get("/dashboard")).status_code == 401


async def test_forged_expired_and_used_links_are_refused(client, caplog):
    caplog.set_level(logging.INFO, logger="memory_worker.access")
    base = str(client.base_url)
    forged = _link(base, token="some-other-token")
    assert (await client.post("/dashboard/login", data={"link": forged})).status_code == 401
    expired = _link(base, minutes=-1)
    assert (await client.post("/dashboard/login", data={"link": expired})).status_code == 401
    good = _link(base)
    body, _, mac = good.partition(".")
    tampered = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
    assert (await client.post("/dashboard/login", data={"link": tampered})).status_code == 401
    # Opening the link only shows a button: a link preview does not use it up.
    page = await client.get(f"/dashboard/login?link={good}")
    assert page.status_code == 200 and "Open the dashboard" in page.text
    r = await client.post("/dashboard/login", data={"link": good})
    assert r.status_code == 303 and "HttpOnly" in r.headers["set-cookie"]
    assert "SameSite=Strict" in r.headers["set-cookie"]
    assert (await client.get("/dashboard")).status_code == 200
    client.cookies.clear()
    assert (await client.post("/dashboard/login", data={"link": good})).status_code == 401  # one time only
    logged = [
        (r.getMessage(), getattr(r, "fields", {})) for r in caplog.records if r.name == "memory_worker.access"
    ]
    assert any(f.get("route") == "/dashboard/login" for _, f in logged)
    assert good[:20] not in repr(logged)  # the access log never holds a link


async def test_a_post_without_the_pages_csrf_token_is_refused_and_changes_nothing(client, tmp_path):
    await login(client)
    page = (await client.get(f"/dashboard/chat/{CHAT}")).text
    csrf = csrf_of(page)
    fact = await _fact_id(client, "location")
    form = {"action": "forget_fact", "fact_id": str(fact)}
    assert (await client.post(f"/dashboard/chat/{CHAT}/do", data=form)).status_code == 403
    assert (
        await client.post(f"/dashboard/chat/{CHAT}/do", data={**form, "csrf": "x" + csrf[1:]})
    ).status_code == 403
    # Another session's token is no good either.
    async with httpx.AsyncClient(base_url=client.base_url, trust_env=False) as other:
        await login(other)
        other_csrf = csrf_of((await other.get("/dashboard")).text)
    assert other_csrf != csrf
    assert (
        await client.post(f"/dashboard/chat/{CHAT}/do", data={**form, "csrf": other_csrf})
    ).status_code == 403
    # A form posted from another site is refused before anything else.
    r = await client.post(
        f"/dashboard/chat/{CHAT}/do", data={**form, "csrf": csrf}, headers={"origin": "https://evil.example"}
    )
    assert r.status_code == 403
    assert await _fact_id(client, "location") == fact
    r = await client.post(f"/dashboard/chat/{CHAT}/do", data={**form, "csrf": csrf})
    assert r.status_code == 303
    assert "location" not in {f["key"] for f in await facts(client)}


async def test_html_and_script_in_names_and_messages_render_as_text(client):
    await login(client)
    for path in (
        f"/dashboard/chat/{CHAT}",
        f"/dashboard/chat/{CHAT}/person/u2",
        f"/dashboard/chat/{CHAT}?q=pastries",
    ):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert "<script>" not in r.text and "<img" not in r.text, path
        assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in r.text, path
    assert EVIL_NAME not in (await client.get("/dashboard/chat/" + CHAT + "/message/3")).text


async def test_a_chat_admins_link_shows_their_chats_and_no_other(client):
    link = _link(str(client.base_url), role=ADMIN, who="telegram:42", chats=(CHAT,))
    r = await client.post("/dashboard/login", data={"link": link})
    assert r.status_code == 303 and r.headers["location"].endswith("/dashboard/chat/telegram%3A-1001")
    overview = (await client.get("/dashboard")).text
    assert "Chess club" in overview and "Secret server" not in overview and OTHER not in overview
    assert (await client.get(f"/dashboard/chat/{CHAT}")).status_code == 200
    for path in (
        f"/dashboard/chat/{OTHER}",
        f"/dashboard/chat/{OTHER}/export",
        f"/dashboard/chat/{OTHER}/person/z9",
    ):
        r = await client.get(path)
        assert r.status_code == 404 and "Zed" not in r.text, path
    csrf = csrf_of(overview)
    r = await client.post(f"/dashboard/chat/{OTHER}/do", data={"csrf": csrf, "action": "compact"})
    assert r.status_code == 404
    r = await client.post(
        f"/dashboard/chat/{OTHER}/do",
        data={"csrf": csrf, "action": "forget_chat", "confirm_title": "Secret server"},
    )
    assert r.status_code == 404
    assert await facts(client, OTHER)  # the other chat is untouched
    # An admin link that names no chat is refused.
    assert (
        await client.post("/dashboard/login", data={"link": _link(str(client.base_url), role=ADMIN)})
    ).status_code == 401


async def test_pages_set_csp_refuse_framing_and_logout_ends_even_a_copied_cookie(client):
    await login(client)
    r = await client.get("/dashboard")
    assert r.status_code == 200
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none': no script at all
    assert r.headers["x-frame-options"] == "DENY"
    copied = client.cookies.get("chatbot_dashboard", path="/dashboard")
    assert copied
    r = await client.post("/dashboard/logout", data={"csrf": csrf_of(r.text)})
    assert r.status_code == 303 and "Max-Age=0" in r.headers["set-cookie"]
    assert (await client.get("/dashboard")).status_code == 401
    client.cookies.set("chatbot_dashboard", copied, path="/dashboard")
    assert (await client.get("/dashboard")).status_code == 401


async def test_actions_go_through_the_memory_api_and_are_logged_with_who(client, caplog):
    caplog.set_level(logging.INFO, logger="memory_engine.dashboard")
    await login(client)
    csrf = csrf_of((await client.get(f"/dashboard/chat/{CHAT}")).text)
    do = f"/dashboard/chat/{CHAT}/do"
    reminders = (await client.get(f"/v1/chats/{CHAT}/reminders", headers=AUTH)).json()["reminders"]
    rid = str(reminders[0]["id"])
    r = await client.post(do, data={"csrf": csrf, "action": "cancel_reminder", "reminder_id": rid})
    assert r.status_code == 400  # not confirmed
    assert (await client.get(f"/v1/chats/{CHAT}/reminders", headers=AUTH)).json()["reminders"]
    r = await client.post(
        do, data={"csrf": csrf, "action": "cancel_reminder", "reminder_id": rid, "confirm": "yes"}
    )
    assert r.status_code == 303
    assert not (await client.get(f"/v1/chats/{CHAT}/reminders", headers=AUTH)).json()["reminders"]
    r = await client.post(do, data={"csrf": csrf, "action": "persona", "persona": "Answer like a pirate."})
    assert r.status_code == 303
    assert (await client.get(f"/v1/chats/{CHAT}/settings", headers=AUTH)).json()[
        "persona"
    ] == "Answer like a pirate."
    r = await client.post(
        do, data={"csrf": csrf, "action": "forget_person", "author_id": "u2", "confirm": "yes"}
    )
    assert r.status_code == 303
    assert all(f["author_id"] != "u2" for f in await facts(client))
    listed = (await client.post("/v1/directory/list", headers=AUTH, json={"chats": [CHAT]})).json()
    assert listed["chats"][0]["people"] == 1  # the directory heard of the forgetting
    r = await client.post(do, data={"csrf": csrf, "action": "forget_chat", "confirm_title": "Chess"})
    assert r.status_code == 400 and await facts(client)
    r = await client.post(do, data={"csrf": csrf, "action": "forget_chat", "confirm_title": "Chess club"})
    assert r.status_code == 303 and not await facts(client)
    overview = (await client.get("/dashboard")).text
    assert "Chess club" not in overview and "Secret server" in overview
    logged = [r.getMessage() for r in caplog.records if "dashboard action=" in r.getMessage()]
    assert any("action=cancel_reminder" in m and "by=owner" in m for m in logged)
    assert any("action=forget_chat" in m and CHAT in m for m in logged)


async def test_the_pages_show_the_chat_its_people_facts_sources_and_search_hits(client):
    await login(client)
    overview = (await client.get("/dashboard")).text
    assert overview.index("Secret server") < overview.index("Chess club")  # newest activity first
    assert "Secret server" not in (await client.get("/dashboard?q=chess")).text
    chat = (await client.get(f"/dashboard/chat/{CHAT}")).text
    assert "Chess club" in chat and "Lisbon" in chat and "also known as Ada" in chat  # an alias
    assert "water the plants" in chat and "<svg" in chat
    message = (await client.get(f"/dashboard/chat/{CHAT}/message/1")).text
    assert "My name is Ada and I live in Lisbon" in message and 'class="msg target"' in message
    hits = (await client.get(f"/dashboard/chat/{CHAT}?q=chess")).text
    assert "Search: “chess”" in hits and "I like chess" in hits
    person = await client.get(f"/dashboard/chat/{CHAT}/person/u1")
    assert person.status_code == 200 and "Lisbon" in person.text and "water the plants" in person.text
    export = await client.get(f"/dashboard/chat/{CHAT}/person/u1/export")
    assert export.headers["content-disposition"].startswith("attachment")
    assert "Lisbon" in export.text and "pastries" not in export.text  # only theirs
