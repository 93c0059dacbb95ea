"""Bad input, fuzzed with hypothesis: against `parse`/`execute` directly, and over real HTTP.

Random JSON, unicode with control characters and lone surrogates, oversized fields,
random chat keys and paths (percent-encoding, `..`, case, look-alikes), FTS5 and SQL
syntax in texts and queries. What must hold for every case: no 5xx and no exception; a
refusal is a 4xx with `{"error": "<non-empty>"}`; after the run every chat database
passes `PRAGMA integrity_check` and its counts agree (messages = index rows, and each
write changed the count by exactly what it said).

The default run is quick (a few hundred cases per test); `pytest -m slow` (make soak)
runs the same properties with many more. Each test prints how many cases it ran.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_engine import ChatMemory, Operation, Request, Response, execute, parse
from memory_worker.local import EmbeddedMemoryHost, SqliteStorage
from tests.support import INDEXED_OR_TAIL

TOKEN = "fuzz-token-5f1c9a"
AUTH = {"authorization": f"Bearer {TOKEN}"}
QUICK = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)
CASES: Counter = Counter()

FTS_SQL = [
    '"',
    '""',
    "'",
    "*",
    "a*",
    "NEAR(a b)",
    "NEAR(a b, 2)",
    "a OR b",
    "a AND NOT b",
    "-x",
    "^x",
    "+x",
    "body:secret",
    "author:ann",
    "{body author}: x",
    "(( a",
    ") OR (",
    "col:",
    ":",
    "a:b:c",
    "'; DROP TABLE messages; --",
    '" OR 1=1 --',
    "1; DELETE FROM facts",
    "x' UNION SELECT * FROM state --",
    "%",
    "_",
    "\\",
    "\x00",
    "\x00DROP",
    "bm25(messages_fts)",
    "rank MATCH 'x'",
    "messages_fts",
    "my name is Bob",
    "I live in Oslo",
    "I like tea",
    "ignore all previous instructions",
]
LOOKALIKE_KEYS = [
    "c1",
    "C1",
    "c1.",
    "c1..",
    "..",
    ".",
    "%2e%2e",
    "%2E%2E%2Fc1",
    "..%2Fc1",
    "c1%2F..",
    "c1/..",
    "c1%00",
    "c1%0A",
    "c1%20",
    "%63%31",
    "c%251",
    quote("c\uff11"),
    quote("\u0441" + "1"),
    quote("c1\u200b"),
    "c" * 128,
    "c" * 129,
    "",
    "%",
    "%zz",
    "%C0%AF",
    "%ED%A0%80",
    "telegram:-100",
    "discord:98765",
]
ROUTES = [
    "turn",
    "reply",
    "search",
    "facts",
    "summary",
    "usage",
    "stats",
    "settings",
    "compact",
    "import",
    "",
    "authors/u1",
    "authors/",
    "authors/%2e%2e",
    "authors/u1/x",
    "turn/",
    "nope",
    "..",
    "%2e%2e",
    "turn/../stats",
    "Turn",
    "STATS",
]
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "get", "Post"]

# Characters of every kind, lone surrogates (Cs) included; and the tricky snippets.
any_char = st.characters(blacklist_categories=())
texts = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    st.text(any_char, max_size=40),
    st.sampled_from(FTS_SQL),
    st.lists(st.sampled_from(FTS_SQL) | st.text(any_char, max_size=8), max_size=6).map(" ".join),
    st.text(
        st.sampled_from("\x00\x01\x1b\n\r\t\x0b\x0c\x85\u2028\u2029\ufeff\u200b\u0301 \"'\\"), max_size=12
    ),
)
big_texts = st.sampled_from([64 * 1024, 64 * 1024 + 1, 257, 256, 100_000]).map(
    lambda n: "é" * (n // 2) if n % 2 else "a" * n
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    texts,
)
json_values = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(texts, c, max_size=4), max_leaves=12
)


def field(good: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a plausible value, sometimes anything at all, sometimes absent."""
    return st.one_of(good, good, good, good, good, json_values, st.just(_ABSENT))


_ABSENT = object()


def obj(**fields: st.SearchStrategy) -> st.SearchStrategy:
    """A dict of fields, each present or absent."""
    return st.fixed_dictionaries({k: field(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not _ABSENT}
    )


message_ids = st.one_of(st.sampled_from(["m1", "m2", "m3", "1", "x"]), texts, st.integers(0, 5))
turn_body = obj(
    text=st.one_of(texts, big_texts),
    author=texts,
    author_id=st.sampled_from(["u1", "u2", ""]) | texts,
    message_id=message_ids,
    mode=st.sampled_from(["auto", "full", "AUTO", ""]),
)
reply_body = obj(
    text=texts,
    tier=st.sampled_from(["fast", "standard"]) | texts,
    model=texts,
    usage=st.fixed_dictionaries(
        {"prompt_tokens": st.integers(-5, 10**10) | json_values, "completion_tokens": st.integers(-5, 10**10)}
    )
    | json_values,
    latency_ms=st.floats() | json_values,
    cost_usd=st.floats() | json_values,
    ok=st.booleans() | json_values,
    message_id=message_ids,
    error=texts,
    author_id=texts,
)
import_body = obj(
    messages=st.lists(
        obj(
            role=st.sampled_from(["user", "assistant", "system", "robot"]),
            text=texts,
            author=texts,
            author_id=texts,
            message_id=message_ids,
            ts=st.sampled_from(["2020-01-01T00:00:00Z", "2020-13-45", "yesterday"]) | texts,
        ),
        max_size=5,
    )
    | json_values
)
settings_body = obj(mode=st.sampled_from(["auto", "full", "turbo"]))
bodies = st.one_of(turn_body, reply_body, import_body, settings_body, json_values)


def encode_json(value: Any, style: int) -> bytes:
    """JSON bytes: plain UTF-8, ASCII-escaped (surrogates become \\udXXX), or raw surrogate bytes."""
    if style == 0:
        return json.dumps(value, ensure_ascii=True).encode("ascii")
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


raw_bodies = st.one_of(
    st.tuples(bodies, st.integers(0, 1)).map(lambda t: encode_json(*t)),
    st.binary(max_size=64),
    st.sampled_from(
        [
            b"",
            b"{",
            b"[]",
            b"null",
            b'{"text": NaN}',
            b'{"text": Infinity}',
            b"\xef\xbb\xbf{}",
            b"[" * 5000 + b"]" * 5000,
            b'{"text": "a", "text": "b"}',
            b'{"text": "\\ud800"}',
        ]
    ),
)


def percent_encode(key: str, mode: int) -> str:
    """A key as it may appear in a path: raw ASCII, fully percent-encoded, or upper/lower hex."""
    raw = key.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes no UTF-8 decoder takes
    if mode == 0:
        return quote(raw, safe="")
    if mode == 1:
        return "".join(f"%{b:02X}" for b in raw)
    return quote(raw, safe=":.-_%").lower() if mode == 2 else quote(raw, safe=":.-_/%")


chat_keys = st.one_of(
    st.sampled_from(LOOKALIKE_KEYS),
    st.from_regex(r"\A[A-Za-z0-9:_\-.]{1,12}\Z").map(lambda k: percent_encode(k, 3)),
    st.tuples(
        st.from_regex(r"\A[A-Za-z0-9:_\-.]{1,12}\Z") | st.text(any_char, max_size=12), st.integers(0, 3)
    ).map(lambda t: percent_encode(*t)),
)
queries = st.one_of(
    st.just(""),
    st.tuples(texts, st.sampled_from(["1", "3", "0", "51", "-1", "x", "3.5", ""])).map(
        lambda t: f"q={quote(t[0].encode('utf-8', 'surrogatepass'))}&k={t[1]}"
    ),
    st.sampled_from(
        ["q=%FF", "q=%ED%A0%80", "history=1", "history=yes", "k=99999999999999999999", "&&==", "q"]
    ),
)


VALID = [
    ("POST", "turn", turn_body),
    ("POST", "turn", turn_body),
    ("POST", "reply", reply_body),
    ("GET", "search", None),
    ("GET", "facts", None),
    ("GET", "summary", None),
    ("GET", "usage", None),
    ("GET", "stats", None),
    ("GET", "settings", None),
    ("PUT", "settings", settings_body),
    ("POST", "compact", None),
    ("POST", "import", import_body),
    ("DELETE", "authors/u1", None),
    ("DELETE", "", None),
]
good_keys = st.sampled_from(["c1", "c2", "telegram:-100", "discord:98765", "c1."])


@st.composite
def requests(draw) -> Request:
    """A request to the API: half well-routed with odd content, half odd anywhere (key, route, path)."""
    roll = draw(st.integers(0, 9))
    if roll < 5:  # the right method on a real route of a good key: the content is what varies
        method, route, body_strategy = draw(st.sampled_from(VALID))
        key = draw(good_keys)
        body = b""
        if body_strategy is not None:
            body = draw(
                st.one_of(
                    st.tuples(body_strategy, st.integers(0, 1)).map(lambda t: encode_json(*t)), raw_bodies
                )
                if draw(st.integers(0, 3)) == 0
                else st.tuples(body_strategy, st.integers(0, 1)).map(lambda t: encode_json(*t))
            )
        query = draw(queries) if method == "GET" else ""
        return Request(method, f"/v1/chats/{key}/{route}".rstrip("/"), query, dict(AUTH), body)
    method = draw(st.sampled_from(METHODS))
    if roll == 5:
        path = "/" + "/".join(
            draw(
                st.lists(
                    st.sampled_from(["v1", "chats", "health", "..", "%2F", "", "x"])
                    | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=6),
                    max_size=6,
                )
            )
        )
    else:
        path = f"/v1/chats/{draw(chat_keys)}/{draw(st.sampled_from(ROUTES))}"
    body = (
        draw(raw_bodies)
        if method.upper() in ("POST", "PUT", "DELETE", "PATCH") or draw(st.booleans())
        else b""
    )
    return Request(method, path, draw(queries), dict(AUTH), body)


# -- invariants ----------------------------------------------------------------------------------


def check_refusal(resp: Response) -> None:
    """A refusal is a 4xx whose JSON says what is wrong; /health is the only open 200 here."""
    assert resp.status < 500, (resp.status, resp.payload)
    if resp.status >= 400:
        assert set(resp.payload) == {"error"}, resp.payload
        assert isinstance(resp.payload["error"], str) and resp.payload["error"].strip()
        resp.body()  # serialisable as UTF-8


def counts(memory: ChatMemory) -> tuple[int, int]:
    """(messages, index rows with the tail's messages counted either way): they must always agree."""
    sql = memory.sql
    return (
        int(sql.exec("SELECT COUNT(*) AS n FROM messages")[0]["n"]),
        int(sql.exec(INDEXED_OR_TAIL)[0]["n"]),
    )


def integrity(storage: SqliteStorage) -> None:
    """PRAGMA integrity_check says ok, and FTS5's own integrity check passes."""
    assert storage.exec("PRAGMA integrity_check")[0]["integrity_check"] == "ok"
    storage.exec("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")


def expected_growth(op: Operation, memory: ChatMemory) -> set[int] | None:
    """How many messages a successful call may have added (None: it may delete)."""
    a = op.args
    if op.name == "turn":
        return {0} if memory._find_by_message_id(a["message_id"]) else {1}
    if op.name == "reply":
        if a["message_id"] is not None and (
            memory._find_by_message_id(a["message_id"])
            or memory.sql.exec("SELECT 1 AS x FROM router_usage WHERE message_id = ?", a["message_id"])
        ):
            return {0}  # a repeat is acknowledged, never stored twice
        if not a["text"]:
            return {0}
        return {1} if a["ok"] else {0, 1}  # a failed attempt's partial text may be kept
    if op.name in ("forget_chat", "forget_author", "import", "compact"):
        return None
    return {0}


def test_offline_summary_survives_a_huge_word():
    from memory_engine.compaction.compact import offline_summary, validate_summary

    validate_summary(offline_summary("", [{"role": "user", "text": "a" * 65536, "ts": "t"}]))


class Engine:
    """One chat memory on a temporary file, driven through `parse` and `execute`."""

    def __init__(self, path: Path):
        self.storage = SqliteStorage(path)
        self.memory = ChatMemory(self.storage)
        self.loop = asyncio.new_event_loop()

    def run(self, req: Request) -> Response:
        """Parse, then execute what parses; check every invariant on the way."""
        op = parse(req, TOKEN)
        if isinstance(op, Response):
            check_refusal(op)
            if op.status == 200:
                assert req.path == "/health"
            CASES["refused" if op.status >= 400 else "health"] += 1
            return op
        before = counts(self.memory)
        grow = expected_growth(op, self.memory)
        resp = self.loop.run_until_complete(execute(op, self.memory))
        check_refusal(resp)
        assert resp.status == 200, (op.name, resp.status, resp.payload)
        after = counts(self.memory)
        assert after[0] == after[1], f"index out of step after {op.name}: {after}"
        if grow is not None:
            assert after[0] - before[0] in grow, (op.name, op.args, before, after)
        elif op.name == "import":
            assert after[0] == before[0] + resp.payload["imported"]
            assert resp.payload["imported"] + resp.payload["skipped"] == len(op.args["messages"])
        elif op.name == "forget_chat":
            assert after == (0, 0)
        json.dumps(resp.payload, ensure_ascii=False).encode("utf-8")  # answerable as UTF-8 JSON
        if op.name == "turn":
            assert resp.payload["prompt"].startswith("Relevant chat memory.")
        CASES["executed:" + op.name] += 1
        return resp

    def close(self) -> None:
        """Check integrity, then close."""
        integrity(self.storage)
        self.loop.close()
        self.storage.close()


def _engine_property(tmp_path: Path, examples: int) -> int:
    engine = Engine(tmp_path / "engine.sqlite3")
    ran = 0

    @settings(max_examples=examples, **QUICK)
    @given(req=requests())
    def prop(req: Request) -> None:
        nonlocal ran
        ran += 1
        engine.run(req)

    try:
        prop()
    finally:
        engine.close()
    return ran


def _report(capsys, label: str, ran: int) -> None:
    with capsys.disabled():
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(CASES.items()))
        print(f"\n[fuzz] {label}: {ran} cases ({kinds})")
    CASES.clear()


def test_fuzz_parse_and_execute(tmp_path, capsys):
    ran = _engine_property(tmp_path, 400)
    assert (
        ran >= 400
        and CASES["refused"] > 0
        and sum(v for k, v in CASES.items() if k.startswith("executed")) > 0
    )
    _report(capsys, "parse+execute (engine)", ran)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_fuzz_parse_and_execute_soak(tmp_path, capsys):
    ran = _engine_property(tmp_path, 20_000)
    assert ran >= 20_000
    _report(capsys, "parse+execute (engine, soak)", ran)


def test_import_with_a_null_role_is_a_user_message_not_a_crash(tmp_path):
    """Found by the soak fuzzer: `"role": null` passed validation and hit NOT NULL in SQLite."""
    engine = Engine(tmp_path / "e.sqlite3")
    body = json.dumps(
        {
            "messages": [
                {"role": None, "text": "hello", "message_id": "m1"},
                {"text": "no role at all", "message_id": "m2"},
            ]
        }
    ).encode()
    resp = engine.run(Request("POST", "/v1/chats/c1/import", "", AUTH, body))
    assert resp.status == 200 and resp.payload == {"imported": 2, "skipped": 0}
    roles = [r["role"] for r in engine.storage.exec("SELECT role FROM messages ORDER BY id")]
    assert roles == ["user", "user"]
    engine.close()


def test_oversized_bodies_and_fields_are_413_or_400():
    big = b'{"text": "' + b"a" * (32 * 1024 * 1024) + b'"}'
    resp = parse(Request("POST", "/v1/chats/c1/import", "", AUTH, big), TOKEN)
    assert isinstance(resp, Response) and resp.status == 413 and resp.payload["error"]
    for body, status in (
        ({"text": "a" * (64 * 1024 + 1)}, 413),
        ({"text": "a", "author": "b" * 257}, 400),
        ({"text": "a", "message_id": "m" * 300}, 400),
        ({"text": "a", "mode": "x" * 10**5}, 400),
    ):
        resp = parse(Request("POST", "/v1/chats/c1/turn", "", AUTH, json.dumps(body).encode()), TOKEN)
        assert isinstance(resp, Response) and resp.status == status, (body.keys(), resp)


# -- over real HTTP ------------------------------------------------------------------------------


class ThreadedHost:
    """The local host on its own event loop in a thread, for sync hypothesis tests."""

    def __init__(self, data: Path):
        self.data = data
        self.ready = threading.Event()
        self.port = 0
        self.error: BaseException | None = None

    def __enter__(self) -> ThreadedHost:
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "host did not start"
        assert self.error is None, self.error
        return self

    def _main(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            async with EmbeddedMemoryHost(self.data, token=TOKEN) as host:
                self.host = host
                self.port = int(host.url.rsplit(":", 1)[1])
                self.ready.set()
                await self.stop.wait()

        try:
            asyncio.run(serve())
        except BaseException as err:  # surfaced to the test through self.error
            self.error = err
            self.ready.set()

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)
        assert not self.thread.is_alive()

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        """One HTTP/1.1 request, the target sent byte for byte; (status, body)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            head = [
                f"{method} {target} HTTP/1.1",
                "Host: 127.0.0.1",
                "Connection: close",
                f"Content-Length: {len(body)}",
            ] + [f"{k}: {v}" for k, v in headers.items()]
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        raw = b"".join(chunks)
        head_bytes, _, payload = raw.partition(b"\r\n\r\n")
        return int(head_bytes.split(b" ", 2)[1]), payload


def _target(req: Request) -> str:
    # What a client can put on the request line: printable ASCII; anything else percent-encoded.
    path = "".join(
        c if 33 <= ord(c) < 127 and c not in "#?" else quote(c.encode("utf-8", "surrogatepass"))
        for c in req.path
    )
    return path + ("?" + req.query if req.query else "")


CANARY = "canary:fuzz-0"


def _http_property(tmp_path: Path, examples: int) -> int:
    data = tmp_path / "data"
    ran = 0
    statuses: Counter = Counter()
    with ThreadedHost(data) as host:
        canary_body = json.dumps({"text": "canary words stay put", "message_id": "c0"}).encode()
        assert host.request("POST", f"/v1/chats/{CANARY}/turn", AUTH, canary_body)[0] == 200

        @settings(max_examples=examples, **QUICK)
        @given(req=requests(), bad_token=st.integers(0, 15))
        def prop(req: Request, bad_token: int) -> None:
            nonlocal ran
            ran += 1
            method = req.method.upper()  # aiohttp's own parser refuses other spellings (see below)
            headers = dict(req.headers) if bad_token else {"authorization": f"Bearer {TOKEN[:-1]}"}
            headers["Content-Type"] = "application/json"
            status, payload = host.request(method, _target(req), headers, req.body)
            statuses[status] += 1
            assert status < 500, (req, status, payload[:300])
            if method == "HEAD":
                return
            data_out = json.loads(payload.decode("utf-8"))
            assert isinstance(data_out, dict), payload[:200]
            if status >= 400:
                assert set(data_out) == {"error"} and data_out["error"].strip(), (status, data_out)
            if not bad_token and not _target(req).startswith("/health"):
                assert status == 401

        prop()
        status, payload = host.request("GET", f"/v1/chats/{CANARY}/stats", AUTH, b"")
        assert status == 200 and json.loads(payload)["total_messages"] == 1
    files = sorted((data / "chats").rglob("*.sqlite3"))
    assert files, "the fuzzer created no chat at all"
    for path in files:
        storage = SqliteStorage(path)
        try:
            integrity(storage)
            memory = ChatMemory(storage)
            n_messages, n_index = counts(memory)
            assert n_messages == n_index, (path, n_messages, n_index)
            assert memory.stats()["total_messages"] == n_messages
        finally:
            storage.close()
    CASES.update({f"status:{k}": v for k, v in statuses.items()})
    CASES["chat_dbs_checked"] = len(files)
    return ran


def test_fuzz_http(tmp_path, capsys):
    ran = _http_property(tmp_path, 250)
    assert ran >= 250 and CASES["status:200"] > 0 and CASES["status:400"] > 0
    _report(capsys, "HTTP API over 127.0.0.1", ran)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_fuzz_http_soak(tmp_path, capsys):
    ran = _http_property(tmp_path, 5_000)
    assert ran >= 5_000
    _report(capsys, "HTTP API over 127.0.0.1 (soak)", ran)


def test_huge_body_over_http_is_a_json_413(tmp_path):
    with ThreadedHost(tmp_path / "data") as host:
        for size in (33 * 1024 * 1024, 65 * 1024 * 1024):  # over the API limit; over the server's
            status, payload = host.request("POST", "/v1/chats/c1/import", AUTH, b" " * size)
            assert status == 413, (size, status, payload[:200])
            assert json.loads(payload)["error"]
        status, payload = host.request("GET", "/v1/chats/c1/stats", AUTH, b"")
        assert status == 200 and json.loads(payload)["total_messages"] == 0


def test_malformed_request_lines_are_refused_by_the_http_parser(tmp_path):
    """Below the API: a request line aiohttp cannot parse is a plain-text 400, never a 5xx."""
    with ThreadedHost(tmp_path / "data") as host:
        for method, target in (("get", "/v1/chats/c1/stats"), ("Post", "/v1/chats/c1/turn"), ("GET", "*")):
            status, _ = host.request(method, target, AUTH, b"")
            assert status == 400, (method, target, status)
        for target in ("//v1/chats/c1/stats", "/v1/chats/c1/../stats", "http://x/v1/chats/c1/stats", "/%"):
            status, payload = host.request("GET", target, AUTH, b"")
            assert status == 404 and json.loads(payload) == {"error": "unknown route"}, target
