"""The OpenAPI document of the memory API: valid, served by every host, every route answered
as it says, and docs/api.md rendered from it."""

from __future__ import annotations

import json

import pytest
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_spec_validator import validate

from memory_engine.api.openapi import document
from memory_worker.api_docs import DOC, render
from memory_worker.api_docs import main as api_docs
from tests.support import backend_for

HOSTS = ["local", "worker", "pyodide"]  # the local host, entry.py under the fake, entry.py on Pyodide
CHAT = "telegram:-1001234"


@pytest.fixture(params=HOSTS)
async def mem(request, tmp_path):
    async with backend_for(request, tmp_path / request.param) as backend:
        yield backend


def test_the_document_is_valid_openapi_3_1():
    doc = document()
    validate(doc)  # raises on any fault
    assert doc["openapi"].startswith("3.1")
    operations = {op["operationId"] for item in doc["paths"].values() for op in item.values()}
    assert {"turn", "reply", "search", "export", "forget_chat", "health", "openapi"} <= operations


def test_docs_api_md_is_the_rendered_document(capsys):
    # Fails when a route changed and `python -m memory_worker.api_docs` was not run.
    assert DOC.read_text(encoding="utf-8") == render(document()), "run: python -m memory_worker.api_docs"
    assert api_docs(["--check"]) == 0


def test_a_drifted_docs_file_is_caught(tmp_path, monkeypatch):
    stale = tmp_path / "api.md"
    stale.write_text(render(document()).replace("Forget the whole chat.", "Forget it."), encoding="utf-8")
    monkeypatch.setattr("memory_worker.api_docs.DOC", stale)
    assert api_docs(["--check"]) == 1


async def test_every_host_serves_the_document_and_only_with_the_token(mem):
    status, data = await mem.call("GET", "/openapi.json")
    assert status == 200 and data == json.loads(json.dumps(document()))
    status, data = await mem.call("GET", "/openapi.json", token=None)
    assert status == 401 and set(data) == {"error"}
    status, _ = await mem.call("POST", "/openapi.json")
    assert status == 405


def _examples(fact_id: int) -> dict[str, tuple[str, dict | None]]:
    """One good call per operation: (path with query, JSON body)."""
    c = f"/v1/chats/{CHAT}"
    return {
        "health": ("/health", None),
        "openapi": ("/openapi.json", None),
        "turn": (c + "/turn", {"text": "I live in Lisbon", "author": "Ada", "author_id": "u1"}),
        "reply": (
            c + "/reply",
            {"text": "Noted", "tier": "light", "model": "m", "usage": {"prompt_tokens": 3}},
        ),
        "search": (c + "/search?q=Lisbon&k=2", None),
        "facts": (c + "/facts?history=1", None),
        "summary": (c + "/summary", None),
        "usage": (c + "/usage?author_id=u1", None),
        "stats": (c + "/stats", None),
        "settings": (c + "/settings", None),
        "update_settings": (c + "/settings", {"mode": "full", "persona": "terse"}),
        "compact": (c + "/compact", None),
        "import": (c + "/import", {"messages": [{"text": "old words", "ts": "2024-01-01T00:00:00Z"}]}),
        "export": (c + "/export?author_id=u1", None),
        "notes": (c + "/notes", None),
        "add_note": (c + "/notes", {"text": "be brief", "author": "Ada", "author_id": "u1"}),
        "start_topic": (c + "/topic", None),
        "topic": (c + "/topic", None),
        "forget_fact": (c + f"/facts/{fact_id}", None),
        "forget_author": (c + "/authors/u9", None),
        "forget_chat": (c, None),
        "add_reminder": (c + "/reminders", {"text": "call", "due_at": 1_900_000_000_000, "author_id": "u"}),
        "reminders": (c + "/reminders?author_id=u", None),
        "reminder": (c + "/reminders/1", None),
        "cancel_reminder": (c + "/reminders/1?author_id=u", None),
        "reminder_delivered": (c + "/delivered", {"reminder_id": 1, "due_at": 5, "sent_at": 6}),
        "set_timezone": (c + "/timezone", {"timezone": "Europe/Lisbon", "author_id": "u1"}),
        "set_followups": (c + "/followups", {"on": True, "author_id": "u1"}),
        "catchup": (c + "/catchup?author_id=u1&limit=5", None),
        "dispatch_offer": (
            "/v1/dispatch/offer",
            {"items": [{"key": f"{CHAT}#1#5", "chat_key": CHAT, "reminder_id": 1, "due_at": 5}]},
        ),
        "dispatch_lease": ("/v1/dispatch/lease", {"owner": "bot:1", "prefixes": [CHAT[:3]]}),
        "dispatch_ack": ("/v1/dispatch/ack", {"keys": [f"{CHAT}#1#5"]}),
        "dispatch_release": ("/v1/dispatch/release", {"key": f"{CHAT}#1#5", "owner": "bot:1", "retry_at": 9}),
        "dispatch_state": ("/v1/dispatch/state", None),
        "people": (c + "/people?author_id=u1", None),
        "around": (c + "/messages/1/around?n=2", None),
        "directory_report": (
            "/v1/directory/report",
            {
                "chat_key": CHAT,
                "title": "Team",
                "messages": 3,
                "last_ts": "2026-01-01T00:00:00.000Z",
                "authors": ["u1"],
                "usage": [{"day": "2026-01-01", "tier": "fast", "calls": 1, "errors": 0, "cost_usd": 0.5}],
            },
        ),
        "directory_list": ("/v1/directory/list", {"since": "2025-12-01"}),
        "directory_auth": ("/v1/directory/auth", {"action": "attempt", "key": "c1", "until": 9, "now": 1}),
    }


async def test_every_route_of_the_document_is_answered_as_it_says(mem):
    # openapi-core checks each answer against the document it was served (path, status, body).
    api = OpenAPI.from_dict(document())
    first = {"text": "My name is Ada", "author": "Ada", "author_id": "u1"}
    await mem.ok("POST", f"/v1/chats/{CHAT}/turn", first)
    note = await mem.ok("POST", f"/v1/chats/{CHAT}/notes", {"text": "keep it short", "author_id": "u1"})
    examples = _examples(note["note"]["id"])
    doc = document()
    operations = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    assert {op["operationId"] for _, _, op in operations} == set(examples), "add an example for the new route"
    # forget_chat last: it empties the chat the others read.
    for _, method, op in sorted(operations, key=lambda o: o[2]["operationId"] == "forget_chat"):
        target, body = examples[op["operationId"]]
        status, data = await mem.call(method.upper(), target, body)
        assert status == 200, (op["operationId"], status, data)
        path, _, query = target.partition("?")
        args = dict(pair.split("=", 1) for pair in query.split("&") if pair)
        request = MockRequest("http://memory", method, path, args=args)
        api.validate_response(request, MockResponse(json.dumps(data).encode(), status_code=status))


async def test_a_wrong_answer_is_caught_by_the_check():
    from tests.support.openapi import check_answer

    check_answer("GET", f"/v1/chats/{CHAT}/settings", 200, {"mode": "auto", "persona": ""})
    with pytest.raises(AssertionError, match="not one of"):
        check_answer("GET", f"/v1/chats/{CHAT}/settings", 200, {"mode": "loud", "persona": ""})
    with pytest.raises(AssertionError, match="Additional properties"):
        check_answer("GET", f"/v1/chats/{CHAT}/settings", 200, {"mode": "auto", "persona": "", "x": 1})
    with pytest.raises(AssertionError, match="does not declare"):
        check_answer("GET", f"/v1/chats/{CHAT}/settings", 201, {})


async def test_the_topic_route_says_where_the_current_topic_starts(mem):
    # The route added to show what a new route takes: one entry and one handler in routes.py.
    path = f"/v1/chats/{CHAT}/topic"
    assert await mem.ok("GET", path) == {"topic_started_at": None, "after_id": 0}
    await mem.ok("POST", f"/v1/chats/{CHAT}/turn", {"text": "first topic"})
    started = await mem.ok("POST", path)
    assert await mem.ok("GET", path) == started and started["after_id"] == 1
    status, data = await mem.call("PUT", path)
    assert status == 405 and data == {"error": "method not allowed: use GET, POST"}
