"""Issue 40, probe item 6 (the API's side): only a time zone that exists is kept.

"Europe" (a folder of the zone database), a 300-character name or one that merely looks
like Area/City were stored, and that person's `/remind` then failed. The same check holds
on the local host and on real Pyodide (where the zone database may be missing: the name's
shape is checked there, and its existence wherever the database is present).
"""

from __future__ import annotations

import pytest

from tests.support.backends import backend_for

CHAT = "/v1/chats/telegram:-100/timezone"


@pytest.fixture(params=["local", "pyodide"])
async def backend(request, tmp_path):
    async with backend_for(request, tmp_path / "memory") as backend:
        yield backend


@pytest.mark.parametrize(
    "zone", ["Europe", "America", "Etc", "Mars/Olympus_Mons", "A" * 300, "Europe/Lisbon/x"]
)
async def test_a_zone_that_does_not_exist_is_refused(backend, zone):
    status, body = await backend.call("PUT", CHAT, json={"timezone": zone, "author_id": "u1"})
    assert status == 400, (zone, body)
    assert "timezone" in str(body)


@pytest.mark.parametrize("zone", ["Europe/Lisbon", "America/Argentina/Buenos_Aires", "UTC", "Etc/GMT+3"])
async def test_a_real_zone_is_kept(backend, zone):
    status, body = await backend.call("PUT", CHAT, json={"timezone": zone, "author_id": "u1"})
    assert status == 200, (zone, body)
    assert body["timezone"] == zone
