"""The HTTP API v1 contract, run alike against every way the memory worker is hosted.

Each case runs against the local host over real HTTP ("local"), and against
`memory_worker/src/entry.py` under the fake `workers` module, once with the SDK 1.9
storage wrapper ("worker"), once with bare JS proxies ("worker-raw"), and, when the real
workers-runtime-sdk is at hand, with its genuine code over the fake JS layer
("worker-sdk"). Then come the
cases only one host can show: a `kill -9` of `chatbot memory serve`, the Worker's own
forwarding, and compaction driven by the Durable Object's alarm.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from memory_engine.compaction.compact import SECTIONS
from tests.fakes.workers.real_sdk import sdk_dir
from tests.support import TOKEN, Backend, ServedMemory, WorkerBackend, backend_for, start_backend

HEADER = "Relevant chat memory. Use these exact prior words only when helpful."
KIB64 = 64 * 1024
NO_SDK = pytest.mark.skipif(
    sdk_dir() is None,
    reason="workers-runtime-sdk not available "
    "(pip download --no-deps workers-runtime-sdk; set WORKERS_SDK_DIR)",
)
BACKENDS = ["local", "worker", "worker-raw", pytest.param("worker-sdk", marks=NO_SDK), "pyodide"]


@pytest.fixture(params=BACKENDS)
async def mem(request, tmp_path):
    async with backend_for(request, tmp_path / request.param) as backend:
        yield backend


def ids(msgs):
    return [m["id"] for m in msgs]


def texts(msgs):
    return [m["text"] for m in msgs]


async def fill(mem: Backend, chat: str, n: int, prefix: str = "filler") -> None:
    """Import n plain messages with distinct words."""
    msgs = [
        {"role": "user", "text": f"{prefix} number w{i}x", "author": "ann", "author_id": "a1"}
        for i in range(n)
    ]
    assert (await mem.ok("POST", f"/v1/chats/{chat}/import", {"messages": msgs}))["imported"] == n


# -- auth and status codes ---------------------------------------------------------------

ROUTES = [
    ("POST", "/v1/chats/c1/turn"),
    ("POST", "/v1/chats/c1/reply"),
    ("GET", "/v1/chats/c1/search?q=x"),
    ("GET", "/v1/chats/c1/facts"),
    ("GET", "/v1/chats/c1/summary"),
    ("GET", "/v1/chats/c1/usage"),
    ("GET", "/v1/chats/c1/stats"),
    ("PUT", "/v1/chats/c1/settings"),
    ("POST", "/v1/chats/c1/compact"),
    ("POST", "/v1/chats/c1/import"),
    ("DELETE", "/v1/chats/c1/authors/u1"),
    ("DELETE", "/v1/chats/c1"),
    # unknown routes, wrong methods and bad keys must look the same without the token
    ("GET", "/v1/chats/c1/nope"),
    ("GET", "/v2/anything"),
    ("GET", "/"),
    ("PATCH", "/v1/chats/c1/turn"),
    ("POST", "/v1/chats/bad%20key!/turn"),
    ("POST", "/health/x"),
]


async def test_health_is_open(mem):
    status, data = await mem.call("GET", "/health", token=None)
    assert status == 200 and data["ok"] is True


@pytest.mark.parametrize(
    "auth", [None, "Bearer wrong-token", "Basic " + TOKEN, "Bearer", TOKEN, "Bearer " + TOKEN + "x"]
)
async def test_every_route_needs_the_token_before_routing(mem, auth):
    for method, path in ROUTES:
        headers = {} if auth is None else {"authorization": auth}
        status, data = await mem.call(
            method, path, json={"text": "hi"} if method != "GET" else None, headers=headers, token=None
        )
        assert status == 401, (method, path, status, data)
        assert set(data) == {"error"}
    # Nothing was recorded by any of them.
    assert (await mem.stats("c1"))["total_messages"] == 0


async def test_status_codes(mem):
    turn = "/v1/chats/c1/turn"
    cases = [
        (400, "POST", turn, None, b"{not json"),
        (400, "POST", turn, None, b"[1, 2]"),
        (400, "POST", turn, None, b"\xff\xfe{}"),
        (400, "POST", turn, None, b""),
        (400, "POST", turn, {"author": "x"}, None),
        (400, "POST", turn, {"text": "   "}, None),
        (400, "POST", turn, {"text": 5.5}, None),
        (400, "POST", turn, {"text": "hi", "mode": "fast"}, None),
        (400, "POST", turn, None, b'{"text": "lone \\ud800 surrogate"}'),
        (400, "POST", turn, None, b'{"text": "ok", "author": "\\udfff"}'),
        (400, "GET", "/v1/chats/c1/search?q=%ED%A0%80", None, None),  # a surrogate in UTF-8
        (400, "GET", "/v1/chats/c1/search?q=%FF", None, None),
        (400, "POST", "/v1/chats/bad%20key!/turn", {"text": "hi"}, None),
        (400, "POST", "/v1/chats/" + "k" * 129 + "/turn", {"text": "hi"}, None),
        (400, "PUT", "/v1/chats/c1/settings", {"mode": "x"}, None),
        (400, "GET", "/v1/chats/c1/search?q=a&k=0", None, None),
        (400, "POST", "/v1/chats/c1/reply", {"text": "hi"}, None),
        (
            400,
            "POST",
            "/v1/chats/c1/reply",
            {"text": "hi", "tier": "t", "model": "m", "reply_to_message_id": [1]},
            None,
        ),
        (
            400,
            "POST",
            "/v1/chats/c1/reply",
            {"text": "hi", "tier": "t", "model": "m", "reply_to_author_id": "a" * 300},
            None,
        ),
        (400, "POST", "/v1/chats/c1/import", {"messages": [{"text": "x", "reply_to_message_id": {}}]}, None),
        (400, "POST", "/v1/chats/c1/import", {"messages": "no"}, None),
        (400, "POST", "/v1/chats/c1/import", {"messages": [{"role": "robot", "text": "x"}]}, None),
        (404, "GET", "/v1/chats/c1/nope", None, None),
        (404, "GET", "/v1/chats/c1/turn/extra", None, None),
        (404, "GET", "/v2/chats/c1/turn", None, None),
        (404, "GET", "/", None, None),
        (405, "GET", turn, None, None),
        (405, "POST", "/v1/chats/c1/facts", {"text": "x"}, None),
        (405, "PATCH", turn, {"text": "x"}, None),
        (405, "POST", "/health", None, None),
        (413, "POST", turn, {"text": "a" * (KIB64 + 1)}, None),
        (413, "POST", turn, {"text": "é" * (KIB64 // 2 + 1)}, None),  # 64 KiB counted in bytes
    ]
    for expected, method, path, payload, body in cases:
        status, data = await mem.call(method, path, json=payload, body=body)
        assert status == expected, (method, path, payload, body and body[:40], status, data)
        assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"]
    # Exactly 64 KiB is allowed and comes back whole.
    big = "b" * KIB64
    turn_data = await mem.turn("c1", big)
    later = await mem.turn("c1", "after the big one")
    assert later["recent"][-1]["text"] == big and turn_data["message_id"]
    assert (await mem.stats("c1"))["total_messages"] == 2  # none of the refusals recorded


# -- modes, retrieval, the prompt -------------------------------------------------------------


async def test_modes_auto_and_full(mem):
    await fill(mem, "m1", 14)
    auto = await mem.turn("m1", "hello there", mode="auto")
    assert texts(auto["recent"]) == [f"filler number w{i}x" for i in range(10, 14)]
    assert auto["mode"] == "auto"
    full = await mem.turn("m1", "hello again", mode="full")
    assert len(full["recent"]) == 12 and full["recent"][-1]["text"] == "hello there"
    assert ids(full["recent"]) == sorted(ids(full["recent"]))
    # The chat's setting is the default mode of later turns.
    assert (await mem.ok("PUT", "/v1/chats/m1/settings", {"mode": "full"}))["mode"] == "full"
    default = await mem.turn("m1", "third")
    assert default["mode"] == "full" and len(default["recent"]) == 12
    assert (await mem.stats("m1"))["mode"] == "full"


async def test_retrieval_excludes_recent_and_current(mem):
    await mem.turn("r1", "the zeppelin landed near the old harbour")
    await fill(mem, "r1", 8)
    await mem.turn("r1", "a zeppelin again, this one is recent")
    got = await mem.turn("r1", "zeppelin?", message_id="cur-1")
    recent_ids = set(ids(got["recent"]))
    assert "a zeppelin again, this one is recent" in texts(got["recent"])
    # The older match comes first (a neighbour may follow: the index gives turns context).
    assert texts(got["retrieved"])[0] == "the zeppelin landed near the old harbour"
    assert len(got["retrieved"]) <= 3
    assert not recent_ids & set(ids(got["retrieved"]))
    assert got["message_id"] == "cur-1"
    assert all(m["message_id"] != "cur-1" for m in got["recent"] + got["retrieved"])
    assert all(m["score"] > 0 for m in got["retrieved"])
    # search ranks the same way but excludes nothing, the recent one included
    found = await mem.search("r1", "zeppelin", k=10)
    assert {
        "the zeppelin landed near the old harbour",
        "a zeppelin again, this one is recent",
        "zeppelin?",
    } <= set(texts(found))
    assert all(r["score"] > 0 for r in found)
    assert [r["score"] for r in found] == sorted((r["score"] for r in found), reverse=True)


async def test_three_retrieved_or_more_when_they_score_well_and_fit(mem):
    for i in range(6):
        await mem.turn("r3", f"quokka sighting number {i}")
    await fill(mem, "r3", 5)
    got = await mem.turn("r3", "tell me about the quokka")
    # The seed's three are the floor: the six older quokka lines all score alike and fit
    # (a line after them may come too: a neighbour's word is indexed with it).
    assert 6 <= len(got["retrieved"]) <= 10
    assert all("quokka" in t for t in texts(got["retrieved"])[:6])
    hits = texts(await mem.search("r3", "quokka", k=20))
    assert len([t for t in hits if "quokka" in t]) == 7  # the current one is searchable too
    assert all("quokka" in t for t in hits[:7])  # own words rank above a neighbour's


async def test_prompt_header_and_sections(mem):
    first = await mem.turn("p1", "xylophone practice today")
    assert first["prompt"] == HEADER  # nothing to show yet: no section at all
    assert first["recent"] == [] and first["retrieved"] == []
    second = await mem.turn("p1", "unrelated words entirely")
    # The recent messages go to the model as chat turns: the prompt does not repeat them.
    assert texts(second["recent"]) == ["xylophone practice today"]
    assert second["prompt"] == HEADER
    await fill(mem, "p1", 6)
    third = await mem.turn("p1", "how was xylophone practice")
    assert third["prompt"].startswith(HEADER + "\n")
    assert "Recent messages" not in third["prompt"]
    retrieved_at = third["prompt"].index("Retrieved older messages")
    assert "xylophone practice today" in third["prompt"][retrieved_at:]
    assert not any(t in third["prompt"] for t in texts(third["recent"]))


# -- facts, usage, idempotency -----------------------------------------------------------------


async def test_facts_and_supersede(mem):
    await mem.turn("f1", "Hi, my name is Alice and I live in Paris.", author="alice", author_id="u1")
    await mem.turn("f1", "I moved to Berlin.", author="alice", author_id="u1")
    await mem.turn("f1", "I live in Oslo.", author="bob", author_id="u2")
    current = (await mem.ok("GET", "/v1/chats/f1/facts"))["facts"]
    by = {(f["author_id"], f["key"]): f["value"] for f in current}
    assert by[("u1", "name")] == "Alice"
    assert by[("u1", "location")] == "Berlin"
    assert by[("u2", "location")] == "Oslo"
    assert all("superseded_at" not in f for f in current)
    history = (await mem.ok("GET", "/v1/chats/f1/facts?history=1"))["facts"]
    old = [f for f in history if f["author_id"] == "u1" and f["key"] == "location"]
    assert [(f["value"], f["superseded_at"] is not None) for f in old] == [("Paris", True), ("Berlin", False)]
    turn = await mem.turn("f1", "what do you know?", author="carol", author_id="u3")
    assert "Known facts" in turn["prompt"] and '"Berlin"' in turn["prompt"]


async def test_a_turn_returns_the_fact_history_when_asked_about_the_past(mem):
    await mem.turn("h1", "I live in Porto. I like tea.", author="ada", author_id="u1")
    await mem.turn("h1", "I moved to Lisbon. I like chess too.", author="ada", author_id="u1")
    await mem.turn("h1", "I moved to Berlin. I like jazz as well.", author="ada", author_id="u1")
    asked = await mem.turn("h1", "Where did I live before Berlin?", author="ada", author_id="u1")
    # Single-valued keys only: a list's superseded copies ("likes") are not history.
    assert [(f["key"], f["value"]) for f in asked["fact_history"]] == [
        ("location", "Porto"),
        ("location", "Lisbon"),
    ]
    assert all(f["superseded_at"] for f in asked["fact_history"])
    assert [f["value"] for f in asked["facts"] if f["key"] == "location"] == ["Berlin"]
    # Not asked about the past: no other answer reads the history, so the turn skips it.
    plain = await mem.turn("h1", "Where do I live now?", author="ada", author_id="u1")
    assert plain["fact_history"] == [] and plain["facts"] == asked["facts"]


async def test_usage_totals_per_tier(mem):
    chat = "/v1/chats/u1/reply"
    rows = [
        ("fast", "m-a", 10, 5, 0.001, True),
        ("fast", "m-a", 20, 7, 0.002, True),
        ("fast", "m-a", 3, 0, 0.0, False),
        ("smart", "m-b", 100, 50, 0.05, True),
    ]
    for tier, model, p, c, cost, ok in rows:
        body = {
            "text": "an answer" if ok else "",
            "tier": tier,
            "model": model,
            "ok": ok,
            "usage": {"prompt_tokens": p, "completion_tokens": c},
            "cost_usd": cost,
            "latency_ms": 12.5,
        }
        if not ok:
            body["error"] = "HTTP 500"
        assert (await mem.call("POST", chat, body))[0] == 200
    usage = await mem.ok("GET", "/v1/chats/u1/usage")
    fast, smart = usage["tiers"]["fast"], usage["tiers"]["smart"]
    assert (fast["calls"], fast["errors"], fast["prompt_tokens"], fast["completion_tokens"]) == (3, 1, 33, 12)
    assert fast["cost_usd"] == pytest.approx(0.003)
    assert (smart["calls"], smart["errors"], smart["prompt_tokens"], smart["completion_tokens"]) == (
        1,
        0,
        100,
        50,
    )
    assert len(usage["recent"]) == 4
    today = (await mem.turn("u1", "hello"))["usage_today"]
    assert today["fast"]["calls"] == 3 and today["smart"]["prompt_tokens"] == 100
    assert (await mem.stats("u1"))["total_messages"] == 4  # 3 answers with text + the turn


async def test_message_id_is_idempotent(mem):
    a = await mem.turn("i1", "first words", message_id="tg-1")
    b = await mem.turn("i1", "first words", message_id="tg-1")
    assert a["message_id"] == b["message_id"] == "tg-1"
    reply = {
        "text": "an answer",
        "tier": "fast",
        "model": "m",
        "message_id": "r-1",
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    assert (await mem.ok("POST", "/v1/chats/i1/reply", reply))["message_id"] == "r-1"
    assert (await mem.ok("POST", "/v1/chats/i1/reply", reply))["message_id"] == "r-1"
    msgs = [{"role": "user", "text": f"imported {i}", "message_id": f"imp-{i}"} for i in range(5)]
    assert (await mem.ok("POST", "/v1/chats/i1/import", {"messages": msgs})) == {"imported": 5, "skipped": 0}
    again = [*msgs[2:], {"role": "user", "text": "imported new", "message_id": "imp-9"}]
    assert (await mem.ok("POST", "/v1/chats/i1/import", {"messages": again})) == {"imported": 1, "skipped": 3}
    stats = await mem.stats("i1")
    assert stats["total_messages"] == 1 + 1 + 5 + 1
    assert (await mem.ok("GET", "/v1/chats/i1/usage"))["tiers"]["fast"]["calls"] == 1


async def test_import_keeps_ts_and_order(mem):
    msgs = [
        {
            "role": "user" if i % 2 else "assistant",
            "text": f"line {i} of the log",
            "author": "zed",
            "author_id": "z",
            "message_id": f"d{i}",
            "ts": f"2023-05-0{1 + i}T10:00:00Z",
        }
        for i in range(5)
    ]
    assert (await mem.ok("POST", "/v1/chats/t1/import", {"messages": msgs}))["imported"] == 5
    got = await mem.turn("t1", "what happened", mode="full")
    assert texts(got["recent"]) == [m["text"] for m in msgs]
    assert [m["ts"] for m in got["recent"]] == [m["ts"] for m in msgs]
    assert [m["message_id"] for m in got["recent"]] == [m["message_id"] for m in msgs]


async def test_an_import_with_more_to_come_is_searchable_at_once_and_indexed_once(mem):
    # `more`: more batches follow, the index is built with the last; a read never waits for it.
    first = [{"text": f"the heron nests by pier {i}", "message_id": f"p{i}"} for i in range(3)]
    path = "/v1/chats/t2/import"
    assert (await mem.ok("POST", path, {"messages": first, "more": True}))["imported"] == 3
    assert sorted(r["message_id"] for r in await mem.search("t2", "heron", k=9)) == ["p0", "p1", "p2"]
    status, data = await mem.call("POST", path, {"messages": first, "more": "yes"})
    assert status == 400 and "more" in data["error"]
    more = [{"text": f"a heron over the dam {i}", "message_id": f"q{i}"} for i in range(2)]
    assert (await mem.ok("POST", path, {"messages": more, "more": True}))["imported"] == 2
    assert (await mem.ok("POST", path, {"messages": first + more, "more": False}))["skipped"] == 5
    found = await mem.search("t2", "heron", k=9)
    assert sorted(r["message_id"] for r in found) == ["p0", "p1", "p2", "q0", "q1"]
    # An empty last batch is a valid end (an import whose size is a multiple of its batches).
    last = [{"text": "the heron is back", "message_id": "r0"}]
    assert (await mem.ok("POST", path, {"messages": last, "more": True}))["imported"] == 1
    assert await mem.ok("POST", path, {"messages": [], "more": False}) == {"imported": 0, "skipped": 0}
    assert len(await mem.search("t2", "heron", k=9)) == 6


async def test_an_import_that_says_how_many_follow_keeps_every_message_it_was_sent(mem):
    # `remaining` is a hint: one far too big (the rest never comes) loses nothing; a bad one is refused.
    path = "/v1/chats/t3/import"
    first = [{"text": f"the crane nests by pier {i}", "message_id": f"c{i}"} for i in range(3)]
    hinted = {"messages": first, "more": True, "remaining": 100_000}
    assert (await mem.ok("POST", path, hinted))["imported"] == 3
    for bad in ("many", -1, True, 10**10):
        status, data = await mem.call("POST", path, {"messages": first, "more": True, "remaining": bad})
        assert status == 400 and "remaining" in data["error"], bad
    assert sorted(r["message_id"] for r in await mem.search("t3", "crane", k=9)) == ["c0", "c1", "c2"]
    assert (await mem.stats("t3"))["total_messages"] == 3
    more = [{"text": f"a crane over the dam {i}", "message_id": f"c{3 + i}"} for i in range(2)]
    answer = await mem.ok("POST", path, {"messages": first + more, "more": True, "remaining": 1})
    assert answer == {"imported": 2, "skipped": 3}
    last = [{"text": "the crane is back", "message_id": "c9"}]
    assert (await mem.ok("POST", path, {"messages": last, "remaining": 0}))["imported"] == 1
    assert len(await mem.search("t3", "crane", k=9)) == 6


# -- text is data --------------------------------------------------------------------------

FTS_SYNTAX = [
    '"unbalanced quote',
    "cats AND dogs",
    "NEAR(alpha beta, 2)",
    "prefix* star*",
    "^caret start",
    "column:value",
    "-minus sign",
    "OR NOT AND",
    ")(",
    '"',
    "*",
    "^",
    ":",
    "-",
    'a"b"c',
    "body: 'x' OR author:*",
    "NEAR",
    "{body author}: word",
]
ODD = [
    "emoji 🦄👩🏽‍💻🇳🇴",
    "RTL مرحبا بالعالم עברית",
    "CJK 日本語のテキスト 中文",
    "combining e\u0301 a\u0308 n\u0303",
    "zero\u200bwidth\u200djoiner\ufeff",
    "NUL in \x00 the middle",
    "tab\tand\r\nnewlines",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and ﷽",
    "quotes “curly” ‘single’ «guillemets»",
    "backslash \\ and \\u0041",
]


async def test_fts_syntax_is_plain_text(mem):
    for i, text in enumerate(FTS_SYNTAX):
        got = await mem.turn("s1", f"{text} marker{i}q")
        assert got["message_id"]
    for i, text in enumerate(FTS_SYNTAX):
        assert (await mem.call("GET", "/v1/chats/s1/search?" + str(httpx.QueryParams({"q": text}))))[0] == 200
        hits = await mem.search("s1", f"marker{i}q {text}", k=50)
        assert f"{text} marker{i}q" in texts(hits), text
    everything = await mem.turn("s1", "last", mode="full")
    assert texts(everything["recent"])[-12:] == [f"{t} marker{i}q" for i, t in enumerate(FTS_SYNTAX)][-12:]


async def test_odd_unicode_comes_back_byte_exact(mem):
    for i, text in enumerate(ODD):
        await mem.turn("u8", f"{text} tag{i}z", author="名前 🙂", author_id="ü-1")
    got = await mem.turn("u8", "done", mode="full")
    assert texts(got["recent"])[-len(ODD) :] == [f"{t} tag{i}z" for i, t in enumerate(ODD)]
    assert all(m["author"] == "名前 🙂" for m in got["recent"])
    for i, text in enumerate(ODD):
        hits = await mem.search("u8", f"tag{i}z")
        assert texts(hits)[0] == f"{text} tag{i}z"
        assert (await mem.search("u8", text, k=50)) is not None  # any odd query is accepted
    assert got["prompt"].startswith(HEADER)


# -- isolation, concurrency, forgetting ------------------------------------------------------


async def test_chats_are_isolated(mem):
    await mem.turn(
        "telegram:-100a", "the password is xyzzy-plugh, my name is Mallory", author="mallory", author_id="m"
    )
    await mem.turn("telegram:-100a", "I live in Atlantis", author="mallory", author_id="m")
    assert await mem.search("discord:98765", "xyzzy") == []
    b = await mem.turn("discord:98765", "do you know xyzzy or Mallory or Atlantis?")
    assert "xyzzy" not in json.dumps(b).replace("do you know xyzzy", "")
    assert "Mallory" not in b["prompt"] and "Atlantis" not in b["prompt"].replace("or Atlantis?", "")
    assert b["recent"] == [] and b["retrieved"] == [] and b["facts"] == []
    assert (await mem.ok("GET", "/v1/chats/discord:98765/facts"))["facts"] == []
    assert (await mem.stats("discord:98765"))["total_messages"] == 1
    assert (await mem.stats("telegram:-100a"))["total_messages"] == 2
    # Keys differing only by case are different chats.
    assert (await mem.stats("TELEGRAM:-100A"))["total_messages"] == 0


async def test_forty_concurrent_turns_are_stored_in_order(mem):
    n = 40
    results = await asyncio.gather(
        *(mem.turn("busy", f"concurrent message {i} token{i}k", message_id=f"c{i}") for i in range(n))
    )
    own = sorted(r["id"] for r in results)
    assert len(set(own)) == n and own == list(range(own[0], own[0] + n))
    for r in results:
        # Each turn saw exactly the messages stored before it: one at a time, no interleaving.
        assert ids(r["recent"]) == list(range(max(own[0], r["id"] - 4), r["id"]))
    stats = await mem.stats("busy")
    assert stats["total_messages"] == n
    full = await mem.turn("busy", "and now", mode="full")
    assert ids(full["recent"]) == own[-12:]
    for i in range(n):
        assert texts(await mem.search("busy", f"token{i}k"))[0] == f"concurrent message {i} token{i}k"


async def test_delete_chat(mem):
    await mem.turn("d1", "my name is Dora and I like maps", author="dora", author_id="d")
    await mem.ok("POST", "/v1/chats/d1/reply", {"text": "hi Dora", "tier": "fast", "model": "m"})
    await mem.turn("d2", "a neighbour chat stays")
    assert (await mem.ok("DELETE", "/v1/chats/d1"))["deleted"] is True
    stats = await mem.stats("d1")
    assert stats["total_messages"] == 0 and stats["facts"] == 0
    assert await mem.search("d1", "Dora maps") == []
    assert (await mem.ok("GET", "/v1/chats/d1/facts"))["facts"] == []
    assert (await mem.ok("GET", "/v1/chats/d1/usage"))["tiers"] == {}
    # Nothing left to forget: every backend says so (the host has no file, the object no rows).
    assert (await mem.ok("DELETE", "/v1/chats/d1"))["deleted"] is False
    assert (await mem.ok("DELETE", "/v1/chats/never-seen"))["deleted"] is False
    again = await mem.turn("d1", "starting over")
    assert again["recent"] == [] and again["facts"] == []
    assert (await mem.stats("d2"))["total_messages"] == 1


async def test_forget_author(mem):
    await mem.turn("fa", "my name is Eve and the secret word is ostrich", author="eve", author_id="e1")
    await mem.turn("fa", "I live in Quito and I like rain", author="fred", author_id="f1")
    await mem.turn("fa", "ostrich feathers are soft", author="eve", author_id="e1")
    status, _ = await mem.call("DELETE", "/v1/chats/fa/authors/e1")
    assert status == 200
    assert [t for t in texts(await mem.search("fa", "ostrich secret feathers", k=10))] == []
    facts = (await mem.ok("GET", "/v1/chats/fa/facts?history=1"))["facts"]
    assert {f["author_id"] for f in facts} == {"f1"}
    got = await mem.turn("fa", "who was here?", mode="full")
    assert texts(got["recent"]) == ["I live in Quito and I like rain"]
    assert "ostrich" not in got["prompt"] and "Eve" not in got["prompt"]


async def test_forgetting_a_person_removes_the_replies_to_them_only(mem):
    reply = "/v1/chats/fr/reply"
    await mem.turn("fr", "my dog is called Pimento", author="marta", author_id="m1", message_id="t1")
    # answers named by the answered message, by the author, and by nothing (the newest user message)
    await mem.ok(
        "POST", reply, {"text": "Pimento, lovely", "tier": "t", "model": "m", "reply_to_message_id": "t1"}
    )
    await mem.ok(
        "POST", reply, {"text": "Pimento again", "tier": "t", "model": "m", "reply_to_author_id": "m1"}
    )
    await mem.ok("POST", reply, {"text": "Pimento thrice", "tier": "t", "model": "m"})
    await mem.turn("fr", "my cat is called Saffron", author="bob", author_id="b1", message_id="t2")
    got = await mem.ok(
        "POST",
        reply,
        {
            "text": "Saffron, lovely",
            "tier": "t",
            "model": "m",
            "reply_to_message_id": "t2",
            "reply_to_author_id": "b1",
        },
    )
    assert got["message_id"]
    await mem.ok(
        "POST",
        "/v1/chats/fr/import",
        {"messages": [{"role": "assistant", "text": "Pimento imported", "reply_to_author_id": "m1"}]},
    )
    gone = await mem.ok("DELETE", "/v1/chats/fr/authors/m1")
    assert (gone["messages"], gone["replies"], gone["facts"]) == (1, 4, 1)  # the pet fact "Pimento (dog)"
    assert await mem.search("fr", "Pimento", k=10) == []
    assert texts(await mem.search("fr", "Saffron lovely", k=10)) == [
        "Saffron, lovely",
        "my cat is called Saffron",
    ]
    assert (await mem.stats("fr"))["total_messages"] == 2


def _normalised(value):
    """An answer with its clock readings blanked, to compare hosts."""
    if isinstance(value, dict):
        return {
            k: ("<t>" if k in ("ts", "updated_at", "superseded_at") and v else _normalised(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_normalised(v) for v in value]
    if isinstance(value, str):
        import re

        return re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d\]", "[t]", value)
    return value


async def test_every_host_answers_exactly_alike(tmp_path, pyodide_host):
    script = [
        ("GET", "/health", None, None),
        ("GET", "/v1/chats/x/stats", None, ""),
        ("POST", "/v1/chats/x/turn", {"text": "my name is Ada and I like chess"}, ""),
        (
            "POST",
            "/v1/chats/x/turn",
            {"text": "chess openings: the Sicilian", "author": "ada", "author_id": "a", "message_id": "m2"},
            "",
        ),
        (
            "POST",
            "/v1/chats/x/reply",
            {
                "text": "Nice!",
                "tier": "fast",
                "model": "m",
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                "cost_usd": 0.0,
            },
            "",
        ),
        (
            "POST",
            "/v1/chats/x/import",
            {
                "messages": [
                    {
                        "role": "user",
                        "text": f"old chess game {i}",
                        "message_id": f"o{i}",
                        "ts": "2020-01-01T00:00:00Z",
                    }
                    for i in range(8)
                ]
            },
            "",
        ),
        ("POST", "/v1/chats/x/turn", {"text": "which chess game was first?", "mode": "full"}, ""),
        ("GET", "/v1/chats/x/search?q=chess+Sicilian&k=5", None, ""),
        ("GET", "/v1/chats/x/facts?history=1", None, ""),
        ("GET", "/v1/chats/x/stats", None, ""),
        ("PUT", "/v1/chats/x/settings", {"mode": "full"}, ""),
        ("GET", "/v1/chats/x/settings", None, ""),
        ("GET", "/v1/chats/x/summary", None, ""),
        ("POST", "/v1/chats/x/turn", {"text": "x" * (KIB64 + 1)}, ""),
        ("POST", "/v1/chats/x/turn", None, None),
        ("GET", "/v1/chats/x/nope", None, ""),
        ("PATCH", "/v1/chats/x/turn", None, ""),
        ("POST", "/v1/chats/bad!/turn", {"text": "a"}, ""),
        ("POST", "/v1/chats/telegram%3A-1/turn", {"text": "percent-encoded key"}, ""),
        ("GET", "/v1/chats/telegram:-1/stats", None, ""),
        ("DELETE", "/v1/chats/x", None, ""),
        ("GET", "/v1/chats/x/stats", None, ""),
        ("POST", "/v1/chats/x/turn", {"text": "again"}, ""),
    ]
    answers = {}
    kinds = ["local", "worker", "worker-raw"] + (["worker-sdk"] if sdk_dir() else []) + ["pyodide"]
    for kind in kinds:
        backend = await start_backend(
            kind, tmp_path / kind, **({"host": pyodide_host} if kind == "pyodide" else {})
        )
        try:
            answers[kind] = [(await backend.call(m, p, json=j, token=t)) for m, p, j, t in script]
        finally:
            await backend.close()
    local = _normalised(answers["local"])
    assert [s for s, _ in local][:3] == [200, 200, 200]
    for kind in kinds[1:]:
        for i, (a, b) in enumerate(zip(local, _normalised(answers[kind]), strict=False)):
            assert a == b, (kind, script[i][:2], a, b)


# -- the local host only: kill -9 ------------------------------------------------------------


async def test_kill_9_loses_no_acknowledged_write(tmp_path):
    served = ServedMemory(tmp_path / "data", TOKEN)
    headers = {"authorization": f"Bearer {TOKEN}"}
    acked: list[str] = []
    try:
        await served.start()
        async with httpx.AsyncClient(
            base_url=served.url, headers=headers, trust_env=False, timeout=10
        ) as client:

            async def writer(chat: str, count: int) -> None:
                for i in range(count):
                    r = await client.post(
                        f"/v1/chats/{chat}/turn",
                        json={"text": f"durable {chat} {i}", "message_id": f"{chat}-{i}"},
                    )
                    assert r.status_code == 200
                    acked.append(chat)

            await asyncio.gather(*(writer(f"k{c}", 30) for c in range(4)))
            r = await client.post(
                "/v1/chats/k9/import",
                json={
                    "messages": [
                        {"role": "user", "text": f"bulk {i}", "message_id": f"b{i}"} for i in range(500)
                    ]
                },
            )
            assert r.json() == {"imported": 500, "skipped": 0}
            served.kill9()
        await served.start()
        async with httpx.AsyncClient(
            base_url=served.url, headers=headers, trust_env=False, timeout=10
        ) as client:
            for c in range(4):
                stats = (await client.get(f"/v1/chats/k{c}/stats")).json()
                assert stats["total_messages"] == acked.count(f"k{c}") == 30
            assert (await client.get("/v1/chats/k9/stats")).json()["total_messages"] == 500
            # and it keeps working on the same data
            assert (await client.post("/v1/chats/k0/turn", json={"text": "after restart"})).status_code == 200
    finally:
        served.stop_quietly()


# -- the Worker only: forwarding ------------------------------------------------------------


# `worker`: the Worker under the fake workerd (tests/conftest.py).


async def test_worker_refusals_never_reach_an_object(worker):
    for method, path in ROUTES:
        await worker.call(method, path, token=None)
    await worker.call("POST", "/v1/chats/c1/turn", body=b"{bad")
    await worker.call("GET", "/v1/chats/c1/nope")
    await worker.call("GET", "/health", token=None)
    assert worker.runtime.instances == {}  # answered by the Worker itself


async def test_worker_one_object_per_chat_key(worker):
    for chat in ("telegram:-1001234", "discord:98765", "telegram:-1001234"):
        await worker.turn(chat, "hello")
    names = sorted(i.ctx.id.name for i in worker.runtime.instances.values())
    # One object per chat, and the directory of chats that each of them reports to.
    assert names == ["@directory", "discord:98765", "telegram:-1001234"]


async def test_worker_sdk_request_objects_too(tmp_path):
    # Some runtimes hand handlers the SDK Request rather than the bare JS one.
    backend = await WorkerBackend(tmp_path / "w", wrap_requests=True).start()
    try:
        got = await backend.turn("c", "hello", message_id="m1")
        assert got["message_id"] == "m1"
        assert (await backend.call("GET", "/v1/chats/c/turn"))[0] == 405
    finally:
        await backend.close()


async def test_worker_without_token_secret_refuses_everything(tmp_path):
    backend = await WorkerBackend(tmp_path / "w", vars={"MEMORY_API_TOKEN": ""}).start()
    try:
        assert (await backend.call("POST", "/v1/chats/c/turn", {"text": "x"}))[0] == 401
        assert (await backend.call("POST", "/v1/chats/c/turn", {"text": "x"}, token=""))[0] == 401
        assert (await backend.call("GET", "/health", token=None))[0] == 200
    finally:
        await backend.close()


async def test_worker_state_survives_object_restart(worker):
    await worker.turn("c", "remember the walrus", message_id="w1")
    worker.runtime.restart()  # evicted: a fresh instance reopens the same storage
    got = await worker.turn("c", "walrus?")
    assert texts(got["recent"]) == ["remember the walrus"]
    assert (await worker.stats("c"))["total_messages"] == 2


# -- the Worker only: compaction from the Durable Object's alarm -----------------------------

from tests.fakes.gated_summarizer import GatedSummarizer  # noqa: E402
from tests.fakes.openai_server import Answer, FakeOpenAI, Garbage, Hang, RateLimit, ServerError  # noqa: E402
from tests.fakes.workers.runtime import now_ms  # noqa: E402

SUMMARY = "\n\n".join(f"{h}\n- point {i} from the light model" for i, h in enumerate(SECTIONS))


def _summary_ok(text: str) -> bool:
    at = [text.find(h) for h in SECTIONS]
    return text.startswith(SECTIONS[0]) and -1 not in at and at == sorted(at)


def _story(i: int) -> dict[str, str]:
    return {
        "text": f"story part {i} about the lighthouse",
        "message_id": f"p{i}",
        "author": "ann",
        "author_id": "a1",
    }


async def _say(backend, chat: str, n: int, start: int = 0) -> None:
    """n live turns (an import would archive them: see test_an_import_is_archived_but_its_tail)."""
    for i in range(start, start + n):
        story = _story(i)
        await backend.turn(chat, story.pop("text"), **story)


async def _import(backend, chat: str, n: int, start: int = 0) -> None:
    msgs = [dict(_story(i), role="user") for i in range(start, start + n)]
    assert (await backend.ok("POST", f"/v1/chats/{chat}/import", {"messages": msgs}))["imported"] == n


@pytest.fixture
async def compacting(tmp_path):
    """A factory of Worker backends with the given vars; all closed at the end."""
    made = []

    async def make(wrap_storage: bool = True, real_sdk: bool = False, **vars: str) -> WorkerBackend:
        backend = await WorkerBackend(
            tmp_path / f"w{len(made)}", wrap_storage=wrap_storage, real_sdk=real_sdk, vars=vars
        ).start()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


@pytest.mark.parametrize("flavour", ["worker", "worker-raw", pytest.param("worker-sdk", marks=NO_SDK)])
async def test_alarm_compacts_with_the_offline_summarizer(compacting, flavour):
    w = await compacting(flavour != "worker-raw", real_sdk=flavour == "worker-sdk")
    rt = w.runtime
    await _say(w, "cmp", 20)
    assert rt.alarm_of("cmp") is None  # 20 un-summarized: below the threshold
    await _say(w, "cmp", 10, start=20)
    due = rt.alarm_of("cmp")
    assert due is not None and due <= now_ms()  # set to run now, in the background
    turn = await w.turn("cmp", "and the lighthouse keeper?")  # the turn did not wait for it
    assert "Summary of earlier conversation" not in turn["prompt"]
    assert rt.alarm_of("cmp") == due  # one alarm: not moved, not duplicated
    assert await rt.run_alarms() == 1
    summary = await w.ok("GET", "/v1/chats/cmp/summary")
    assert summary["compactions"] == 1 and _summary_ok(summary["summary"])
    stats = await w.stats("cmp")
    assert (stats["total_messages"], stats["active_messages"], stats["archived_messages"]) == (31, 5, 26)
    assert summary["summarized_upto"] == 26
    assert rt.alarm_of("cmp") is None  # nothing more to do
    assert rt.alarm_runs == [("cmp", "ok")]
    later = await w.turn("cmp", "tell me about part 3 of the lighthouse story")
    assert "Summary of earlier conversation" in later["prompt"]
    assert "story part 3 about the lighthouse" in texts(await w.search("cmp", "part 3", k=5))


@pytest.mark.parametrize("real_sdk", [False, pytest.param(True, marks=NO_SDK)], ids=["worker", "worker-sdk"])
async def test_alarm_fetches_a_summarizer_over_http_and_merges_cycles(compacting, real_sdk):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        w = await compacting(
            real_sdk=real_sdk,
            SUMMARY_BASE_URL=fake.url,
            SUMMARY_MODEL="light-1",
            SUMMARY_API_KEY="sk-test-key",
        )
        await _say(w, "oa", 30)
        await w.runtime.run_alarms()
        assert len(fake.requests) == 1
        req = fake.requests[0]
        assert req.model == "light-1"
        assert req.headers.get("Authorization") == "Bearer sk-test-key"
        sent = json.dumps(req.messages)
        assert "story part 0 about" in sent and "story part 24 about" in sent
        assert "story part 25 about" not in sent  # the 5 newest stay un-summarized
        assert (await w.ok("GET", "/v1/chats/oa/summary"))["summary"] == SUMMARY
        # Second cycle: the history grows past the threshold again; the old summary is merged.
        await _say(w, "oa", 26, start=30)
        assert w.runtime.alarm_of("oa") is not None
        await w.runtime.run_alarms()
        assert len(fake.requests) == 2
        second = json.dumps(fake.requests[1].messages)
        assert "point 0 from the light model" in second  # the previous summary went along
        assert "story part 25 about" in second and "story part 0 about" not in second
        summary = await w.ok("GET", "/v1/chats/oa/summary")
        assert summary["compactions"] == 2 and summary["summarized_upto"] == 51
        assert (await w.stats("oa"))["total_messages"] == 56


@pytest.mark.parametrize("real_sdk", [False, pytest.param(True, marks=NO_SDK)], ids=["worker", "worker-sdk"])
async def test_summarizer_failures_retry_with_backoff_and_lose_nothing(compacting, real_sdk):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(
            ServerError(500),
            ServerError(503),
            RateLimit(retry_after=30),
            Garbage(),
            Answer(text="## Objective\nonly one section"),
        )
        w = await compacting(real_sdk=real_sdk, SUMMARY_BASE_URL=fake.url)
        rt = w.runtime
        await _say(w, "bk", 30)
        delays = []
        for round_ in range(5):
            before = now_ms()
            await rt.run_alarms()
            due = rt.alarm_of("bk")
            assert due is not None, f"round {round_}: no retry scheduled"
            delays.append(due - before)
            assert (await w.ok("GET", "/v1/chats/bk/summary"))["compactions"] == 0
            await w.turn("bk", f"still talking during outage {round_}")  # never fails a turn
        assert 2000 <= delays[0] < delays[1] < delays[3]  # exponential backoff
        assert delays[2] >= 30_000  # Retry-After is respected
        assert len(fake.requests) == 5
        assert all(r == ("bk", "ok") for r in rt.alarm_runs)  # the engine handled every failure
        await rt.run_alarms()  # the summarizer is back
        summary = await w.ok("GET", "/v1/chats/bk/summary")
        assert summary["compactions"] == 1 and summary["summary"] == SUMMARY
        stats = await w.stats("bk")
        assert stats["total_messages"] == 35 and stats["active_messages"] == 5


async def test_a_hanging_summarizer_times_out(compacting):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(Hang())
        w = await compacting(SUMMARY_BASE_URL=fake.url)
        w.entry.SUMMARY_TIMEOUT_S = 1.0  # read when the object builds its summarizer
        await _say(w, "hg", 30)
        started = time.monotonic()
        await w.runtime.run_alarms()
        assert time.monotonic() - started < 5
        assert w.runtime.alarm_of("hg") is not None
        assert (await w.ok("GET", "/v1/chats/hg/summary"))["compactions"] == 0
        await w.runtime.run_alarms()
        assert (await w.ok("GET", "/v1/chats/hg/summary"))["compactions"] == 1


async def test_compact_now_answers_502_when_the_summarizer_fails(compacting):
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(ServerError(500))
        w = await compacting(SUMMARY_BASE_URL=fake.url)
        await _say(w, "cn", 12)
        status, data = await w.call("POST", "/v1/chats/cn/compact")
        assert status == 502 and "error" in data
        assert (await w.ok("GET", "/v1/chats/cn/summary"))["compactions"] == 0
        assert (await w.stats("cn"))["active_messages"] == 12
        done = await w.ok("POST", "/v1/chats/cn/compact")
        assert done["compactions"] == 1 and done["summary"] == SUMMARY
        assert (await w.stats("cn"))["active_messages"] == 5


async def test_compact_now_offline(compacting):
    w = await compacting()
    await _say(w, "off", 12)
    done = await w.ok("POST", "/v1/chats/off/compact")
    assert done["compactions"] == 1 and _summary_ok(done["summary"])
    assert (await w.stats("off"))["total_messages"] == 12


async def test_pending_alarm_survives_a_restart(compacting):
    w = await compacting()
    await _say(w, "rs", 30)
    assert w.runtime.alarm_of("rs") is not None
    w.runtime.restart()  # evicted before the alarm ran
    assert w.runtime.instances == {}
    assert await w.runtime.run_alarms() == 1
    assert (await w.ok("GET", "/v1/chats/rs/summary"))["compactions"] == 1


async def test_messages_arriving_during_compaction_are_kept(compacting):
    async with GatedSummarizer(SUMMARY) as gated:
        w = await compacting(SUMMARY_BASE_URL=gated.url)
        await _say(w, "dc", 30)
        alarm = asyncio.create_task(w.runtime.run_alarms())
        await asyncio.wait_for(gated.arrived.wait(), 10)
        # The object is waiting on its summarizer: turns still go through, at once.
        for i in range(3):
            got = await w.turn("dc", f"arrived meanwhile {i}")
            assert got["recent"][-1]["text"] == (
                f"arrived meanwhile {i - 1}" if i else "story part 29 about the lighthouse"
            )
        assert not alarm.done()
        gated.gate.set()
        await asyncio.wait_for(alarm, 10)
        summary = await w.ok("GET", "/v1/chats/dc/summary")
        assert summary["compactions"] == 1 and summary["summarized_upto"] == 25
        stats = await w.stats("dc")
        assert (stats["total_messages"], stats["active_messages"]) == (33, 8)
        assert texts(await w.search("dc", "meanwhile", k=5))[:3] != []


async def test_a_backlog_grown_during_a_compaction_gets_the_next_one_by_itself(compacting):
    # The local host's rule on the Durable Object: the turns that arrive while the alarm
    # runs leave the alarm alone; when the alarm ends, it finds the backlog still past the
    # threshold and sets the next one itself.
    async with GatedSummarizer(SUMMARY) as gated:
        w = await compacting(SUMMARY_BASE_URL=gated.url)
        rt = w.runtime
        await _say(w, "bg", 30)
        alarm = asyncio.create_task(rt.run_alarms())
        await asyncio.wait_for(gated.arrived.wait(), 10)
        await _say(w, "bg", 26, start=30)  # 56 kept, 25 being summarized: 31 > 25 after it
        assert rt.alarm_of("bg") is None  # no turn read or set the alarm meanwhile
        gated.gate.set()
        await asyncio.wait_for(alarm, 10)
        assert rt.alarm_of("bg") is not None  # set by the alarm that ended
        assert await rt.run_alarms() == 1
        summary = await w.ok("GET", "/v1/chats/bg/summary")
        assert summary["compactions"] == 2 and summary["summarized_upto"] == 51
        assert rt.alarm_of("bg") is None  # caught up
        assert rt.alarm_runs == [("bg", "ok"), ("bg", "ok")]


async def test_a_backlog_pulls_a_later_reminder_alarm_forward(compacting):
    # One alarm serves reminders and compaction: a reminder's alarm a day away must not
    # hold back a compaction that is due now (the local host keeps the earlier time too).
    w = await compacting()
    rt = w.runtime
    day = now_ms() + 86_400_000
    await w.ok("POST", "/v1/chats/rm/reminders", {"text": "tomorrow", "due_at": day})
    assert rt.alarm_of("rm") == day
    await _say(w, "rm", 30)
    due = rt.alarm_of("rm")
    assert due is not None and due <= now_ms()
    assert await rt.run_alarms() == 1
    assert (await w.ok("GET", "/v1/chats/rm/summary"))["compactions"] == 1
    assert rt.alarm_of("rm") == day  # the reminder's alarm again


async def test_a_backlog_pulls_a_reminder_alarm_forward_after_a_failure_with_nothing_left(compacting):
    # A failed compaction puts the chat in backoff; when its alarm finds nothing left to
    # compact (the author was forgotten), the backoff is over: a new backlog must again pull
    # a reminder's alarm a day away forward, not be held back as if a backoff were pending.
    async with FakeOpenAI(default=Answer(text=SUMMARY)) as fake:
        fake.script(ServerError(500))
        w = await compacting(SUMMARY_BASE_URL=fake.url)
        rt = w.runtime
        await _say(w, "bo", 30)
        await rt.run_alarms()  # the summarizer fails: a backoff alarm
        assert rt.alarm_of("bo") is not None and len(fake.requests) == 1
        await w.ok("DELETE", "/v1/chats/bo/authors/a1")  # the backlog is gone
        day = now_ms() + 86_400_000
        await w.ok("POST", "/v1/chats/bo/reminders", {"text": "tomorrow", "due_at": day})
        assert await rt.run_alarms(now=rt.alarm_of("bo")) == 1  # the backoff's: nothing to compact
        assert rt.alarm_of("bo") == day and len(fake.requests) == 1
        await _say(w, "bo", 30, start=100)
        due = rt.alarm_of("bo")
        assert due is not None and due <= rt.now_ms()  # was `day`: the stale backoff held it back
        assert await rt.run_alarms(now=rt.now_ms()) == 1
        assert (await w.ok("GET", "/v1/chats/bo/summary"))["compactions"] == 1
        assert rt.alarm_of("bo") == day


async def test_unexpected_alarm_error_reschedules(compacting, monkeypatch):
    w = await compacting()
    await _say(w, "ue", 30)

    async def broken(memory, summarize):
        raise RuntimeError("a bug, not a summarizer failure")

    monkeypatch.setattr(w.entry, "on_alarm", broken)
    before = now_ms()
    await w.runtime.run_alarms()
    due = w.runtime.alarm_of("ue")
    assert due is not None and due - before >= w.entry.UNEXPECTED_FAILURE_RETRY_MS
    assert w.runtime.alarm_runs == [("ue", "ok")]


async def test_forget_chat_drops_the_pending_alarm(compacting):
    w = await compacting()
    await _say(w, "fg", 30)
    assert w.runtime.alarm_of("fg") is not None
    await w.ok("DELETE", "/v1/chats/fg")
    assert w.runtime.alarm_of("fg") is None
    # The object's storage is freed entirely, as the local host deletes the chat's file.
    rt = w.runtime
    (storage,) = [s for key, s in rt.storages.items() if rt.names.get(key) == "fg"]  # (not the directory's)
    assert storage.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master").one().n == 0
    assert (await w.turn("fg", "a fresh start"))["recent"] == []
    assert (await w.stats("fg"))["total_messages"] == 1


async def test_an_import_is_archived_but_its_tail(compacting):
    w = await compacting()
    rt = w.runtime
    await _import(w, "ar", 300)
    stats = await w.stats("ar")
    # Searchable, not summarized: the tail alone (the threshold's worth) is left to summarize,
    # so the import itself makes no compaction due...
    assert (stats["total_messages"], stats["active_messages"], stats["archived_messages"]) == (300, 25, 275)
    assert rt.alarm_of("ar") is None
    assert texts(await w.search("ar", "part 77", k=1)) == ["story part 77 about the lighthouse"]
    await w.turn("ar", "and now?")  # ...the next message does, and one call covers the tail
    assert await rt.run_alarms() == 1
    summary = await w.ok("GET", "/v1/chats/ar/summary")
    assert summary["compactions"] == 1 and summary["summarized_upto"] == 296
    assert "Completed: 21 messages summarized" in summary["summary"]
    assert rt.alarm_of("ar") is None
