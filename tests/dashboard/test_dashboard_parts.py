"""The dashboard's parts alone: escaping, signing, the directory's rules, the chart, the platform link."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memory_engine.api.route_args import Call
from memory_engine.api.routes import Ctx
from memory_engine.api.validation import ApiError
from memory_engine.dashboard import auth, directory
from memory_engine.dashboard.charts import usage_chart
from memory_engine.dashboard.markup import Html, html, join
from memory_engine.dashboard.pages import platform_link
from memory_engine.engine import ChatMemory
from memory_worker.local.storage import SqliteStorage

NOW = 1_800_000_000_000


def _memory(day: str = "2026-12-06") -> ChatMemory:
    clock = datetime.fromisoformat(day + "T12:00:00+00:00").astimezone(UTC)
    return ChatMemory(SqliteStorage(":memory:"), clock=lambda: clock)


def test_values_are_escaped_unless_they_are_html_already():
    evil = '<script>alert("x")</script>'
    out = html("<p title='{t}'>{v}</p>", t="'quote'", v=evil)
    assert out == "<p title='&#x27;quote&#x27;'>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</p>"
    assert html("<div>{inner}</div>", inner=out).count("&lt;script") == 1  # not escaped twice
    assert join([html("<b>{x}</b>", x="a"), Html("<i>b</i>")]) == "<b>a</b><i>b</i>"
    assert join(["<b>"]) == "&lt;b&gt;"  # a plain string is text


def test_signed_values_are_bound_to_their_key_purpose_and_time():
    key = auth.derive_key("token")
    session, cookie = auth.new_session(key, auth.OWNER, "owner", None, NOW)
    assert auth.read_session(key, cookie, NOW + 1) == session
    assert auth.read_session(key, cookie, session.expires_ms) is None  # expired
    assert auth.read_session(auth.derive_key("other"), cookie, NOW) is None
    assert auth.unsign(key, "link", cookie) is None  # a session is no link
    body, _, mac = cookie.partition(".")
    assert auth.read_session(key, body + "x." + mac, NOW) is None
    assert auth.read_session(key, "garbage", NOW) is None and auth.read_session(key, ".", NOW) is None
    link = auth.make_link(
        "token", "http://h/", NOW, role=auth.ADMIN, who="telegram:1", chats=("telegram:-1",)
    )
    signed = link.split("link=", 1)[1].replace("%3D", "=")
    found = auth.read_link(key, signed, NOW)
    assert found is not None and found.chats == ("telegram:-1",) and found.role == auth.ADMIN
    assert auth.read_session(key, signed, NOW) is None  # a link is no session
    no_chats = auth.make_link("token", "http://h", NOW, role=auth.ADMIN).split("link=", 1)[1]
    assert auth.read_link(key, no_chats, NOW) is None  # an admin's link names its chats
    other, _ = auth.new_session(key, auth.OWNER, "owner", None, NOW)
    assert auth.csrf_token(key, session) != auth.csrf_token(key, other)
    assert auth.csrf_ok(key, session, auth.csrf_token(key, session))
    assert not auth.csrf_ok(key, session, auth.csrf_token(key, other)) and not auth.csrf_ok(
        key, session, None
    )


def test_the_cookie_is_http_only_strict_and_secure_over_https():
    assert auth.cookie_of("a=1; chatbot_dashboard=v.s; b=2") == "v.s"
    plain = auth.set_cookie("v", secure=False, max_age_s=60)
    assert "HttpOnly" in plain and "SameSite=Strict" in plain and "Secure" not in plain
    assert auth.set_cookie("v", secure=True, max_age_s=60).endswith("; Secure")


def _report(chat: str, **kw: Any) -> dict[str, Any]:
    body = {
        "chat_key": chat,
        "title": "",
        "messages": 1,
        "last_ts": "2026-12-01T00:00:00.000Z",
        "authors": [],
        "usage": [],
    }
    body.update(kw)
    return directory.report_args(Call({}, {}, json.dumps(body).encode()))


def test_the_directory_takes_absolute_reports_and_lists_chats_newest_first():
    d = _memory()
    ctx = Ctx(d, directory.DIRECTORY_KEY)
    day = {"day": "2026-12-02", "tier": "fast", "calls": 3, "errors": 0, "cost_usd": 0.5}
    for _ in range(2):  # a repeat changes nothing
        directory.report(
            ctx, _report("telegram:-1", title="Team", messages=5, authors=["a", "b"], usage=[day])
        )
    directory.report(ctx, _report("discord:2", last_ts="2026-12-03T00:00:00.000Z", authors=["z"]))
    directory.report(ctx, _report("telegram:-1", messages=6, authors=["a"], usage=[{**day, "calls": 4}]))
    listed = directory.listing(ctx, directory.list_args(Call({}, {}, b"")))
    assert [c["chat_key"] for c in listed["chats"]] == ["discord:2", "telegram:-1"]
    team = listed["chats"][1]
    assert (team["title"], team["messages"], team["people"], team["calls_month"]) == ("Team", 6, 2, 4)
    assert listed["days"] == [{"day": "2026-12-02", "tier": "fast", "calls": 4, "errors": 0, "cost_usd": 0.5}]
    only = directory.listing(ctx, directory.list_args(Call({}, {}, b'{"chats": ["discord:2"]}')))
    assert [c["chat_key"] for c in only["chats"]] == ["discord:2"] and only["days"] == []
    directory.report(ctx, _report("telegram:-1", authors=["b"], people=None))  # someone forgotten: a recount
    assert directory.listing(ctx, directory.list_args(Call({}, {}, b"")))["chats"][1]["people"] == 1
    directory.report(ctx, _report("telegram:-1", erased=True))
    assert [
        c["chat_key"] for c in directory.listing(ctx, directory.list_args(Call({}, {}, b"")))["chats"]
    ] == ["discord:2"]
    with pytest.raises(ApiError):
        _report("not a key")
    with pytest.raises(ApiError):
        directory.list_args(Call({}, {}, b'{"chats": ["@directory"]}'))


def test_login_state_links_once_sessions_until_ended_attempts_limited():
    ctx = Ctx(_memory(), directory.DIRECTORY_KEY)

    def step(action: str, key: str, until: int = NOW + 1000, now: int = NOW, limit: int = 3) -> bool:
        body = {"action": action, "key": key, "until": until, "now": now, "limit": limit}
        return directory.auth_step(ctx, directory.auth_args(Call({}, {}, json.dumps(body).encode())))["ok"]

    assert step("redeem", "n1") and not step("redeem", "n1") and step("redeem", "n2")
    assert not step("check", "s1") and step("start", "s1") and step("check", "s1")
    assert not step("check", "s1", now=NOW + 2000)  # expired
    assert step("start", "s2") and step("end", "s2") and not step("check", "s2")
    assert [step("attempt", "ip") for _ in range(4)] == [True, True, True, False]
    assert step("attempt", "ip", now=NOW + 1001, until=NOW + 5000)  # a new window


def test_a_chat_reports_its_counts_title_and_the_people_of_the_write():
    m = _memory()
    directory.set_title(m, "  Family \n group ")
    m.turn("hello", author="Ada", author_id="u1")
    report = directory.chat_report(m, "telegram:-1", "turn", {"author_id": "u1"})
    assert report["title"] == "Family group" and report["messages"] == 1 and report["authors"] == ["u1"]
    assert report["usage"] == []  # a turn calls no model
    messages = [{"role": "user", "author_id": "u2"}, {"role": "assistant"}, {"author_id": "u3"}]
    assert directory.chat_report(m, "telegram:-1", "import", {"messages": messages})["authors"] == [
        "u2",
        "u3",
    ]
    assert directory.reports("turn") and directory.reports("forget_chat") and not directory.reports("facts")
    assert not directory.reports("compact") and not directory.reports("directory_report")


def test_the_chart_draws_each_tiers_calls_and_escapes_their_names():
    rows = [
        {"day": "2026-12-05", "tier": "<b>fast</b>", "calls": 3, "errors": 0, "cost_usd": 0.25},
        {"day": "2026-12-06", "tier": "light", "calls": 1, "errors": 0, "cost_usd": 0.01},
        {"day": "2025-01-01", "tier": "light", "calls": 99, "errors": 0, "cost_usd": 9},  # outside the window
    ]
    svg = usage_chart(rows, "2026-12-06")
    assert svg.count("<rect") == 2 + 2  # two bars, two legend keys
    assert "&lt;b&gt;fast&lt;/b&gt;" in svg and "<b>" not in svg
    assert 'aria-label="Model calls per day: 4 calls, $0.26 over 30 days"' in svg


def test_the_platforms_own_link_where_the_key_allows_one():
    assert platform_link("telegram:-1001234", "77") == "https://t.me/c/1234/77"
    assert platform_link("telegram:-1001234:55", "77") == "https://t.me/c/1234/77"  # a person's memory in it
    assert platform_link("telegram:42", "77") is None  # a private chat has no public link
    assert platform_link("discord:9", "77") is None and platform_link("telegram:-1001234", "m1") is None
