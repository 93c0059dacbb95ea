"""Retrieval: query terms, FTS5 safety, neighbouring context, the author boost, forgetting, cost bounds.

In process through ChatMemory over SqliteStorage, and over real HTTP against the local host.
"""

from __future__ import annotations

import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_engine import ChatMemory, retrieval
from memory_engine.text import MAX_QUERY_TERMS, fts_query, query_terms, tokens

from memory_worker.local import EmbeddedMemoryHost, SqliteStorage

FTS_SYNTAX = [
    '"',
    '""',
    "'",
    'say "hi',
    "AND",
    "OR",
    "NOT",
    "a OR b",
    "NEAR(cat dog, 2)",
    "body: cat",
    "author:ann",
    "{body author}: x",
    "cat*",
    "^start",
    "(",
    ")",
    "-x",
    "+x",
    "x:y:z",
    "*",
    "\\",
    "\x00",
    "NULL",
    "'; DROP TABLE messages; --",
    "¿qué pasó?",
    "日本語のテキスト",
    "🐱🐶",
    "e\u0301t\u00e9",
    "\u200b",
    " ",
    "",
]


def memory(tmp_path=None) -> ChatMemory:
    """A fresh chat memory over SqliteStorage (in memory unless a directory is given)."""
    return ChatMemory(SqliteStorage(":memory:" if tmp_path is None else tmp_path / "chat.sqlite3"))


def ids_of(m: ChatMemory, query: str, k: int = 10) -> list[str]:
    """The message_ids `search` returns for `query`, best first."""
    return [r["message_id"] for r in m.search(query, k)["results"]]


def add(m: ChatMemory, *rows: tuple[str, str]) -> None:
    """Import (author, text) rows with message ids m1, m2, ..."""
    start = len(m.sql.exec("SELECT id FROM messages"))
    m.import_messages(
        [
            {
                "role": "user",
                "author": a,
                "author_id": a.lower(),
                "text": t,
                "message_id": f"m{start + n + 1}",
            }
            for n, (a, t) in enumerate(rows)
        ]
    )


# -- text --------------------------------------------------------------------------------


def test_query_terms_drop_stopwords_and_repeats_and_keep_order():
    assert query_terms("When did Caroline go to the LGBTQ support group? The group!") == [
        "caroline",
        "lgbtq",
        "support",
        "group",
    ]


def test_query_terms_are_capped():
    text = " ".join(f"word{n}" for n in range(100))
    assert len(query_terms(text)) == MAX_QUERY_TERMS


def test_tokens_never_hold_fts_syntax():
    for text in FTS_SYNTAX:
        for tok in tokens(text):
            assert tok.isalnum() or all(ch.isalnum() or ch in "\u0301" for ch in tok)
            assert '"' not in tok and "*" not in tok and ":" not in tok


def test_fts_query_quotes_every_term():
    assert fts_query(["cat", "dog"]) == '"cat" OR "dog"'
    assert fts_query([]) is None


# -- FTS syntax is plain text --------------------------------------------------------------


@pytest.mark.parametrize("query", FTS_SYNTAX)
def test_fts_syntax_in_a_query_never_errors(query):
    m = memory()
    add(m, ("Ann", 'she said "hi" AND left (NEAR the door) body: cat* ^start'), ("Bob", "OR NOT"))
    results = m.search(query, 5)["results"]
    assert all(r["score"] > 0 for r in results)


def test_fts_syntax_is_matched_as_words():
    m = memory()
    add(m, ("Ann", "the NEAR operator is a word here"), ("Bob", "nothing to see"))
    assert ids_of(m, "NEAR(operator)") == ["m1", "m2"]  # m2 by its context


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_any_text_is_a_safe_query(text):
    m = memory()
    add(m, ("Ann", "kayak trip by the lake"), ("Bob", text or "x"))
    for r in m.search(text, 3)["results"]:
        assert r["score"] > 0


# -- neighbouring context ------------------------------------------------------------------


def test_an_answer_is_found_by_the_words_of_the_question_before_it():
    m = memory()
    add(
        m,
        ("Ann", "did you go camping at the lake?"),
        ("Bob", "yes, last week, it was lovely"),
        ("Ann", "unrelated chatter about tea"),
        ("Bob", "more unrelated chatter about biscuits"),
    )
    assert ids_of(m, "camping") == ["m1", "m2"]  # own words above a neighbour's


def test_own_words_rank_above_a_neighbours():
    m = memory()
    add(
        m,
        ("Ann", "quokka"),
        ("Bob", "neighbour of the word"),
        ("Ann", "filler"),
        ("Bob", "another quokka mention"),
    )
    got = ids_of(m, "quokka")
    assert set(got[:2]) == {"m1", "m4"} and "m2" in got


def test_context_is_only_the_previous_message():
    m = memory()
    add(m, ("Ann", "zeppelin"), ("Bob", "next"), ("Ann", "after next"))
    assert ids_of(m, "zeppelin") == ["m1", "m2"]


def test_live_turns_get_the_previous_message_as_context():
    m = memory()
    m.turn("who wants to try the new ramen place?", author="Ann", author_id="ann", message_id="q")
    m.turn("me! tomorrow at noon", author="Bob", author_id="bob", message_id="a")
    assert ids_of(m, "ramen") == ["q", "a"]


# -- the author column ---------------------------------------------------------------------


def test_a_named_author_ranks_first_among_equal_matches():
    m = memory()
    add(
        m,
        ("Bob", "I love my kayak"),
        ("Zed", "filler one"),
        ("Ann", "I love my kayak"),
        ("Zed", "filler two"),
    )
    assert ids_of(m, "what did Ann say about her kayak?")[0] == "m3"
    assert ids_of(m, "what did Bob say about his kayak?")[0] == "m1"


def test_an_author_name_alone_does_not_match_everything_they_wrote():
    m = memory()
    add(m, ("Ann", "hello there"), ("Bob", "pottery class"), ("Ann", "pottery is fun"))
    assert ids_of(m, "Ann pottery")[0] == "m3"


# -- rank's contract -------------------------------------------------------------------------


def test_rank_excludes_ids_and_returns_positive_scores_best_first():
    m = memory()
    add(m, *[("Ann", f"marmalade number {n}") for n in range(8)])
    ranked = retrieval.rank(m.sql, "marmalade", 3, exclude={1, 2, 3})
    assert len(ranked) == 3
    assert all(i not in {1, 2, 3} for i, _ in ranked)
    assert all(s > 0 for _, s in ranked)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert retrieval.rank(m.sql, "marmalade", 0, set()) == []
    assert retrieval.rank(m.sql, "the and of", 3, set()) == []  # only stopwords


# -- forgetting ------------------------------------------------------------------------------


def fts_hits(m: ChatMemory, word: str) -> int:
    """How many index rows hold `word` in any column (body, author or context)."""
    return int(
        m.sql.exec("SELECT COUNT(*) AS n FROM messages_fts WHERE messages_fts MATCH ?", f'"{word}"')[0]["n"]
    )


def test_forgetting_an_author_removes_their_words_from_neighbours_context():
    m = memory()
    add(
        m,
        ("Ann", "opening words"),
        ("Bob", "my secret is zanzibar"),
        ("Ann", "ok noted"),
        ("Bob", "zanzibar again"),
        ("Ann", "fine"),
    )
    assert fts_hits(m, "zanzibar") == 4  # two bodies, two contexts
    m.forget_author("bob")
    assert fts_hits(m, "zanzibar") == 0
    assert ids_of(m, "zanzibar") == []
    # The survivors now carry their surviving neighbours' words.
    assert ids_of(m, "opening") == ["m1", "m3"]
    assert ids_of(m, "noted") == ["m3", "m5"]


def test_unindexing_the_oldest_clears_the_next_ones_context():
    m = memory()
    add(m, ("Ann", "aardvark"), ("Bob", "second"), ("Ann", "third"))
    retrieval.unindex_messages(m.sql, "id <= ?", 1)
    m.sql.exec("DELETE FROM messages WHERE id <= 1")
    assert fts_hits(m, "aardvark") == 0
    assert ids_of(m, "second") == ["m2", "m3"]


# -- cost stays bounded in a long chat --------------------------------------------------------


def test_a_long_chat_keeps_rare_terms_and_bounds_common_ones():
    m = memory()
    common = [("Ann", f"great day today friend number {n}") for n in range(6000)]
    common[2500] = ("Bob", "great day, the narwhal finally showed up")
    add(m, *common)
    assert ids_of(m, "great day narwhal", 3)[0] == "m2501"
    terms, floor = retrieval._select(m.sql, query_terms("great day narwhal"))
    assert "narwhal" in terms and floor == 0
    # Only common words: still answers, from the newest part of the archive.
    terms, floor = retrieval._select(m.sql, query_terms("great day friend"))
    assert floor > 0
    started = time.perf_counter()
    got = m.search("great day friend", 3)["results"]
    assert len(got) == 3 and (time.perf_counter() - started) < 0.5


# -- over real HTTP ----------------------------------------------------------------------------


async def test_search_over_http_treats_fts_syntax_as_text_and_uses_context(tmp_path):
    async with EmbeddedMemoryHost(tmp_path) as host:
        headers = {"authorization": f"Bearer {host.token}"}
        async with httpx.AsyncClient(base_url=host.url, headers=headers) as http:
            r = await http.post(
                "/v1/chats/t:1/import",
                json={
                    "messages": [
                        {"text": "shall we go sailing on Sunday?", "author": "Ann", "message_id": "a"},
                        {"text": "yes! bring the NEAR(map) please", "author": "Bob", "message_id": "b"},
                        {"text": "something else", "author": "Ann", "message_id": "c"},
                    ]
                },
            )
            assert r.status_code == 200
            r = await http.get("/v1/chats/t:1/search", params={"q": "sailing", "k": 5})
            assert [m["message_id"] for m in r.json()["results"]] == ["a", "b"]
            for q in FTS_SYNTAX[:20]:
                r = await http.get("/v1/chats/t:1/search", params={"q": q or "x", "k": 3})
                assert r.status_code == 200, (q, r.text)
            r = await http.get("/v1/chats/t:1/search", params={"q": "what did Bob say about NEAR(map)"})
            assert r.json()["results"][0]["message_id"] == "b"


def test_bulk_indexing_matches_one_by_one_indexing():
    one_by_one = memory()
    rows = [
        ("Ann", "did you see the comet?"),
        ("Bob", "yes, bright tail"),
        ("Ann", "lovely"),
        ("Bob", "comet again tonight"),
    ]
    add(one_by_one, *rows)
    bulk = memory()
    bulk.sql.exec(
        "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
        "VALUES ('user', 'Zed', 'zed', 'before the batch', 't', 'm0')"
    )
    retrieval.index_message(bulk.sql, 1, "before the batch", "Zed")
    for n, (a, t) in enumerate(rows, 1):
        bulk.sql.exec(
            "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
            "VALUES ('user', ?, ?, ?, 't', ?)",
            a,
            a.lower(),
            t,
            f"m{n}",
        )
    retrieval.index_messages(bulk.sql, 2, 5)
    columns = "SELECT rowid, body, author, context FROM messages_fts WHERE rowid > ? ORDER BY rowid"
    assert [dict(r, rowid=r["rowid"] - 1) for r in bulk.sql.exec(columns, 2)] == one_by_one.sql.exec(
        columns, 1
    )
    assert bulk.sql.exec(columns, 1)[0]["context"] == "before the batch"
    assert ids_of(bulk, "comet") == ids_of(one_by_one, "comet")


# -- the Durable Object's SQL allow-list ------------------------------------------------------


class AllowListedStorage:
    """`SqlStorage` over the fake workers runtime's `ctx.storage.sql`, whose authorizer refuses
    what a Durable Object refuses (functions off the allow-list, BEGIN, most PRAGMAs)."""

    def __init__(self, path):
        from tests.fakes.workers import runtime

        self.runtime = runtime
        self.sql = runtime.SqlStorage(path)

    def exec(self, query, *params):
        """Run one statement through the allow-list; rows as dicts."""
        cursor = self.sql.exec(query, *params)
        return [
            {c: (None if v is self.runtime.jsnull else v) for c, v in zip(cursor._columns, row)}
            for row in cursor._rows
        ]

    def transaction(self, fn):
        """Run `fn` (atomicity is not what these tests check)."""
        return fn()


def test_every_retrieval_statement_passes_the_durable_object_allow_list(tmp_path):
    m = ChatMemory(AllowListedStorage(tmp_path / "do.sqlite3"))
    add(m, ("Ann", "did you go camping?"), ("Bob", "yes, by the lake"), ("Ann", "lovely"))
    m.sql.exec(
        "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
        "VALUES ('user', 'Bob', 'bob', 'camping again soon', 't', 'm4')"
    )
    retrieval.index_messages(m.sql, 4, 4)
    assert ids_of(m, "what did Ann say about camping?")[0] == "m1"
    m.forget_author("bob")
    assert ids_of(m, "lake") == []
    # A long chat takes the budgeted path, the floor for common-only queries included.
    add(m, *[("Ann", f"wow wow number {n}") for n in range(1200)])
    assert len(ids_of(m, "wow", 3)) == 3
    assert retrieval._select(m.sql, ["wow"])[1] > 0
