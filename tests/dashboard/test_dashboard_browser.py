"""The dashboard in a real Chromium (Debian's, driven by Playwright): the owner's flows end to end.

Against the local host and against the Worker's own code on Pyodide. The local run saves
the screenshots the README shows (docs/images/dashboard-*.png, rewritten with
UPDATE_SCREENSHOTS=1): they are looked at, not only parsed.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_engine.dashboard.auth import make_link
from memory_worker.local.embedded import EmbeddedMemoryHost
from memory_worker.pyodide_runtime import PyodideUnavailable, check_installed
from tests.dashboard.support import AUTH, CHAT, EVIL_NAME, TOKEN, facts, seed
from tests.support import ServedMemory

CHROMIUM = Path("/usr/bin/chromium")
# The README's pictures: `UPDATE_SCREENSHOTS=1` writes them into docs/images; an ordinary run
# takes them all the same (into the test's own folder) and leaves the work tree as it was.
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
try:
    from playwright.async_api import Browser, Page, async_playwright
except ImportError:  # pragma: no cover - the [dev] extra installs it
    async_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: apt-get install -y chromium"),
    pytest.mark.skipif(async_playwright is None, reason="playwright is not installed (the [dev] extra)"),
]


class Clock:
    """The host's clock, moved by the test: usage lands on the days it says."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


async def _usage_over_a_month(c: httpx.AsyncClient, clock: Clock) -> None:
    """Model calls of three tiers on most of the last 30 days, in two chats (the charts' data)."""
    today = clock.now
    rnd = random.Random(7)
    tiers = [("light", "small-model", 0.0004), ("fast", "mid-model", 0.003), ("smart", "big-model", 0.03)]
    for back in range(29, -1, -1):
        clock.now = today - timedelta(days=back)
        for chat, scale in ((CHAT, 3), ("discord:555", 1)):
            for tier, model, price in tiers:
                for _ in range(rnd.randint(0, scale * (4 if tier == "light" else 2))):
                    body = {
                        "text": "ok",
                        "tier": tier,
                        "model": model,
                        "ok": True,
                        "cost_usd": price * rnd.uniform(1, 3),
                        "usage": {
                            "prompt_tokens": rnd.randint(200, 900),
                            "completion_tokens": rnd.randint(20, 200),
                        },
                    }
                    assert (
                        await c.post(f"/v1/chats/{chat}/reply", headers=AUTH, json=body)
                    ).status_code == 200
    clock.now = today


async def _more_chats(c: httpx.AsyncClient) -> None:
    for key, title, who in (
        ("discord:555", "Makers #general", "Lin"),
        ("telegram:-1002", "Family", "Mum"),
        ("console:owner", "", "owner"),
    ):
        body = {
            "text": f"my name is {who} and I love gardening",
            "author": who,
            "author_id": who.lower(),
            "title": title or None,
        }
        assert (await c.post(f"/v1/chats/{key}/turn", headers=AUTH, json=body)).status_code == 200


@pytest.fixture(params=["local", "pyodide"])
async def served(request, tmp_path) -> AsyncIterator[tuple[str, str]]:
    if request.param == "local":
        clock = Clock()
        async with EmbeddedMemoryHost(tmp_path / "memory", token=TOKEN, clock=clock) as host:
            async with httpx.AsyncClient(base_url=host.url, trust_env=False, timeout=60) as c:
                await seed(c)
                await _more_chats(c)
                await _usage_over_a_month(c, clock)
            yield host.url, "local"
        return
    try:
        check_installed()
    except PyodideUnavailable as err:
        pytest.skip(str(err))
    mem = ServedMemory(tmp_path / "data", TOKEN, runtime="pyodide")
    try:
        await mem.start(timeout=180)
        async with httpx.AsyncClient(base_url=mem.url, trust_env=False, timeout=60) as c:
            await seed(c)
        yield mem.url, "pyodide"
    finally:
        mem.stop_quietly()


@pytest.fixture
async def browser(tmp_path) -> AsyncIterator[Browser]:
    assert async_playwright is not None
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def _page(browser: Browser, dialogs: list[str]) -> Page:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    page = await context.new_page()
    page.on("dialog", lambda d: dialogs.append(d.message))
    return page


async def _api(url: str, method: str, path: str) -> Any:
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=60) as c:
        r = await c.request(method, path, headers=AUTH)
        assert r.status_code == 200, r.text
        return r.json()


async def test_the_owners_flows_in_a_real_browser(served, browser, tmp_path):
    url, where = served
    images = DOCS_IMAGES if os.environ.get("UPDATE_SCREENSHOTS") else tmp_path
    shots = where == "local"
    dialogs: list[str] = []
    page = await _page(browser, dialogs)

    # Log in with the token.
    await page.goto(url + "/dashboard")
    assert await page.locator("input[name=token]").is_visible()
    await page.fill("input[name=token]", TOKEN)
    await page.click("button:has-text('Log in')")
    await page.wait_for_url(url + "/dashboard")
    await page.locator("table").get_by_text("Chess club").wait_for()
    assert await page.locator("svg.chart rect").count() > 0
    if shots:
        await page.screenshot(path=str(images / "dashboard-overview.png"), full_page=True)

    # An imported chat: its title, people and facts (a hostile name shown as text).
    await page.click("text=Chess club")
    await page.get_by_role("heading", name="Chess club").wait_for()
    people = page.locator(".person h3")
    assert await people.count() == 2
    assert EVIL_NAME in await page.locator(".person h3 a").all_inner_texts()
    assert await page.title() != "pwned" and not dialogs  # no script of theirs ran
    assert await page.locator("td", has_text="Lisbon").count() == 1
    if shots:
        await page.screenshot(path=str(images / "dashboard-chat.png"), full_page=True)

    # Follow a fact to the message it came from.
    row = page.locator("tr", has=page.locator("td", has_text="Lisbon"))
    await row.get_by_role("link", name="from this message").click()
    await page.locator(".msg.target").wait_for()
    assert "I live in Lisbon" in await page.locator(".msg.target").inner_text()
    await page.go_back()

    # Forget the fact: gone from the chat's /facts (the route the bot's /facts reads).
    await row.get_by_role("button", name="Forget").click()
    await page.locator(".flash").wait_for()
    assert await page.locator("td", has_text="Lisbon").count() == 0
    assert "location" not in {f["key"] for f in (await _api(url, "GET", f"/v1/chats/{CHAT}/facts"))["facts"]}

    # Cancel a reminder (confirmed).
    reminder = page.locator("tr", has=page.locator("td", has_text="water the plants"))
    await reminder.locator("input[name=confirm]").check()
    await reminder.get_by_role("button", name="Cancel").click()
    await page.locator(".flash").wait_for()
    assert await page.get_by_text("water the plants").count() == 0
    assert not (await _api(url, "GET", f"/v1/chats/{CHAT}/reminders"))["reminders"]

    # A person's page.
    await page.locator(".person h3 a", has_text="Ada").click()
    await page.get_by_role("heading", name="Ada L.").wait_for()
    assert await page.get_by_text("Export their data (JSON)").count() == 1
    if shots:
        await page.screenshot(path=str(images / "dashboard-person.png"), full_page=True)

    # Log out, and be refused.
    await page.get_by_role("button", name="Log out").click()
    await page.locator("input[name=token]").wait_for()
    response = await page.goto(url + f"/dashboard/chat/{CHAT}")
    assert response is not None and response.status == 401
    assert await page.get_by_text("Chess club").count() == 0

    # Log in with a one-time link, once.
    link = make_link(TOKEN, url, int(time.time() * 1000))
    other = await _page(browser, dialogs)
    await other.goto(link)
    await other.get_by_role("button", name="Open the dashboard").click()
    await other.wait_for_url(url + "/dashboard")
    await other.locator("table").get_by_text("Chess club").wait_for()
    third = await _page(browser, dialogs)
    await third.goto(link)
    await third.get_by_role("button", name="Open the dashboard").click()
    await third.get_by_text("This link is not valid").wait_for()
    assert not dialogs
    assert await facts_count(url) > 0


async def facts_count(url: str) -> int:
    """How many current facts the imported chat still holds."""
    async with httpx.AsyncClient(base_url=url, trust_env=False) as c:
        return len(await facts(c))


_ = Callable  # typing only
