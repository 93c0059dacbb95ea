"""The dashboard answered by the Worker's own code on Pyodide: login, overview, chat page, an action."""

from __future__ import annotations

import httpx
import pytest

from memory_worker.pyodide_runtime import PyodideUnavailable, check_installed
from tests.dashboard.support import CHAT, OTHER, TOKEN, csrf_of, facts, login, seed
from tests.support import ServedMemory

try:
    check_installed()
    MISSING = ""
except PyodideUnavailable as err:
    MISSING = str(err)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=MISSING)


async def test_the_worker_serves_the_dashboard_with_its_directory_object(tmp_path):
    served = ServedMemory(tmp_path / "data", TOKEN, runtime="pyodide")
    try:
        await served.start(timeout=180)
        async with httpx.AsyncClient(base_url=served.url, trust_env=False, timeout=60) as c:
            await seed(c)
            refused = await c.get("/dashboard")
            assert refused.status_code == 401 and "Chess club" not in refused.text
            assert refused.headers["x-frame-options"] == "DENY"
            assert (await login(c, "wrong")).status_code == 401
            r = await login(c)
            assert r.status_code == 303 and "HttpOnly" in r.headers["set-cookie"]
            overview = await c.get("/dashboard")
            # The chats' objects reported to the directory object: titles, people, usage.
            assert overview.status_code == 200
            assert "Chess club" in overview.text and "Secret server" in overview.text
            assert "<svg" in overview.text
            chat = await c.get(f"/dashboard/chat/{CHAT}")
            assert chat.status_code == 200 and "Lisbon" in chat.text and "<script>" not in chat.text
            fact = next(f["id"] for f in await facts(c) if f["key"] == "location")
            form = {"action": "forget_fact", "fact_id": str(fact)}
            assert (await c.post(f"/dashboard/chat/{CHAT}/do", data=form)).status_code == 403
            r = await c.post(f"/dashboard/chat/{CHAT}/do", data={**form, "csrf": csrf_of(chat.text)})
            assert r.status_code == 303
            assert "location" not in {f["key"] for f in await facts(c)}
            assert (await c.get(f"/dashboard/chat/{OTHER}/message/1")).status_code == 200
            r = await c.post("/dashboard/logout", data={"csrf": csrf_of(chat.text)})
            assert r.status_code == 303
            assert (await c.get("/dashboard")).status_code == 401
    finally:
        served.stop_quietly()
