"""Retrieval: query terms, FTS5 safety, neighbouring context, dates, word forms, the author boost,
forgetting, migration 4, cost bounds.

In process through ChatMemory over SqliteStorage, and over real HTTP against the local host.
"""

from __future__ import annotations

import random
import re
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_engine import ChatMemory
from memory_engine.index import retrieval
from memory_engine.index.text import MAX_QUERY_TERMS, fts_query, query_terms, tokens
from memory_engine.prompt import render_prompt
from memory_worker.local import EmbeddedMemoryHost
from tests.support import FILLER, add, fts_row, ids_of, memory

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


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_tokens_are_the_patterns_tokens(text):
    # tokens() cuts ASCII text without the regex: the same tokens, or retrieval would change.
    assert tokens(text) == [t.lower() for t in re.findall(r"[^\W_]+", text)]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab \n\r\x0b\x0c\x1c\x1e\x85\u2028\u00e9", min_size=1, max_size=20))
def test_the_prompt_quotes_every_line_of_the_summary(summary):
    # render_prompt quotes a plain summary without a string per line: still line for line.
    quoted = "\n".join("> " + line for line in summary.splitlines())
    prompt = render_prompt([], summary, [])
    assert prompt.endswith("Summary of earlier conversation (quoted):\n" + quoted)


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
    got = ids_of(m, "camping")
    assert got[0] == "m1" and set(got) == {"m1", "m2", "m3"}  # own words above a neighbour's


def test_a_reply_is_found_by_the_question_two_turns_before_it():
    m = memory()
    add(
        m,
        *FILLER,
        ("Ann", "did you run the Berlin marathon in the end?"),
        ("Ann", "I remember all that training in the summer"),
        ("Bob", "yes! four hours and ten minutes"),
        *FILLER,
    )
    # m7's own words share nothing with the question: only the turns before it do.
    assert "m7" in ids_of(m, "How long did Bob take to run the Berlin marathon?", 3)


def test_a_message_is_found_by_the_turn_after_it():
    m = memory()
    add(
        m,
        *FILLER,
        ("Bob", "finally crossed the line, legs like jelly"),
        ("Ann", "wow, was that your first marathon?"),
        ("Bob", "it was, never again"),
        *FILLER,
    )
    got = ids_of(m, "When did Bob run his first marathon?", 3)
    assert "m5" in got  # by the question that followed it
    assert fts_row(m, "m5")["context_after"] == "wow, was that your first marathon?"


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


def test_context_is_two_messages_before_and_one_after():
    m = memory()
    add(
        m,
        ("Ann", "first"),
        ("Bob", "before"),
        ("Ann", "zeppelin"),
        ("Bob", "next"),
        ("Ann", "second"),
        ("Bob", "x"),
    )
    got = ids_of(m, "zeppelin")
    assert got[0] == "m3" and set(got) == {"m2", "m3", "m4", "m5"}
    row = fts_row(m, "m3")
    assert (row["context_before"], row["context_after"]) == ("first before", "next")


def test_neighbours_are_bounded_in_characters():
    m = memory()
    add(m, ("Ann", "a" * 5000), ("Bob", "b" * 5000), ("Ann", "short"), ("Bob", "c" * 5000))
    row = fts_row(m, "m3")
    n = retrieval.NEIGHBOUR_CHARS
    assert row["context_before"] == "a" * n + " " + "b" * n and row["context_after"] == "c" * n
    assert row["body"] == "short"


def test_live_turns_get_the_previous_message_as_context():
    m = memory()
    m.turn("who wants to try the new ramen place?", author="Ann", author_id="ann", message_id="q")
    m.turn("me! tomorrow at noon", author="Bob", author_id="bob", message_id="a")
    assert ids_of(m, "ramen") == ["q", "a"]
    # The question gained the answer as its after-context when the answer arrived.
    assert ids_of(m, "noon") == ["a", "q"]
    assert fts_row(m, "q")["context_after"] == "me! tomorrow at noon"


def test_after_a_topic_start_the_previous_message_is_not_found_by_the_current_one():
    from memory_engine.chat_state import start_topic

    m = memory()
    for n, (author, text) in enumerate(FILLER):
        m.turn(text, author=author, author_id=author.lower(), message_id=f"f{n}")
    start_topic(m.sql, m.now())  # /new: no recent messages, so nothing excludes f3
    got = m.turn("tell me about the zeppelin museum", author="Ann", author_id="ann", message_id="q")
    # f3 would carry the question as its after-context, had it been linked before retrieval.
    assert got["recent"] == [] and got["retrieved"] == []
    assert fts_row(m, "f3")["context_after"] == "tell me about the zeppelin museum"
    assert ids_of(m, "zeppelin") == ["q", "f3"]  # linked once the turn was answered


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


def test_the_author_boost_ranks_as_if_every_candidate_were_boosted():
    # Only the candidates the boost could lift into the k best have their author read: the
    # answer must be the one of boosting all of them.
    rng = random.Random(11)
    words = [f"{w}{n}" for n in range(6) for w in ("kayak", "lake", "violin", "garden", "recipe")]
    m = memory()
    add(m, *[(rng.choice(["Ann", "Bob", "Cleo", "Dev"]), " ".join(rng.sample(words, 3))) for _ in range(200)])
    author = {int(r["id"]): r["author"].lower() for r in m.sql.exec("SELECT id, author FROM messages")}
    factor = 1.0 + retrieval.AUTHOR_BOOST
    lifted = 0
    for _ in range(150):
        name = rng.choice(["ann", "bob", "cleo", "dev"])
        query = " ".join([*rng.sample(words, 2), name])
        k = rng.choice([1, 3, 5])
        got = retrieval.rank(m.sql, query, k, set())
        no_boost = retrieval.RetrievalSettings(author_boost=0.0)
        plain = retrieval.rank(m.sql, query, retrieval.CANDIDATES, set(), no_boost)
        boosted = [(i, s * factor if author[i] == name else s) for i, s in plain]
        expected = sorted(boosted, key=lambda c: -c[1])[:k]
        assert [i for i, _ in got] == [i for i, _ in expected]
        assert [s for _, s in got] == pytest.approx([s for _, s in expected])
        lifted += [i for i, _ in expected] != [i for i, _ in plain[:k]]
    assert lifted >= 10  # the boost changed the winners often enough to test something


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


def test_ranked_messages_carry_each_winners_own_row_in_rank_order():
    # The winners' rows are read after the ranking (by id): each must be its own message's
    # row, in the order and with the scores that `rank` gives, whatever k and the exclusions.
    rng = random.Random(7)
    words = ["kayak", "lake", "pottery", "marathon", "paris", "violin", "garden", "recipe"]
    m = memory()
    add(m, *[(rng.choice(["Ann", "Bob", "Cleo"]), " ".join(rng.sample(words, 3))) for _ in range(120)])
    columns = ", ".join(retrieval.MESSAGE_COLUMNS)
    for _ in range(40):
        query = " ".join(rng.sample([*words, "ann", "bob"], 2))
        exclude = set(rng.sample(range(1, 121), rng.randint(0, 10)))
        k = rng.choice([1, 3, 10, 50])
        got = retrieval.ranked_messages(m.sql, query, k, exclude)
        ranked = retrieval.rank(m.sql, query, k, exclude)
        assert [(r["id"], r["score"]) for r in got] == [(i, round(s, 6)) for i, s in ranked]
        for row in got:
            stored = m.sql.exec(f"SELECT {columns} FROM messages WHERE id = ?", row["id"])[0]
            assert {c: row[c] for c in retrieval.MESSAGE_COLUMNS} == stored
            assert row["id"] not in exclude


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
    assert fts_hits(m, "zanzibar") == 5  # two bodies, and every neighbour of each
    m.forget_author("bob")
    assert fts_hits(m, "zanzibar") == 0
    assert ids_of(m, "zanzibar") == []
    # The survivors now carry their surviving neighbours' words.
    assert fts_row(m, "m3")["context_before"] == " opening words"
    assert fts_row(m, "m1")["context_after"] == "ok noted"
    assert ids_of(m, "noted")[0] == "m3" and set(ids_of(m, "noted")) == {"m1", "m3", "m5"}


def test_forgetting_a_person_leaves_no_word_of_theirs_in_any_column():
    m = memory()
    lines = [("Ann", "hello all"), ("Bob", "quetzal sighting today"), ("Cat", "nice one")]
    lines += [("Bob", f"quetzal number {n}") if n % 3 == 0 else ("Ann", f"chat line {n}") for n in range(30)]
    add(m, *lines[:20])
    for n, (a, t) in enumerate(lines[20:]):  # the live path too: after-contexts updated on arrival
        m.turn(t, author=a, author_id=a.lower(), message_id=f"live{n}")
    columns = ("body", "author", "context_before", "context_after", "date")
    before = m.sql.exec(f"SELECT {', '.join(columns)} FROM messages_fts")
    assert sum("quetzal" in r["context_after"] for r in before) >= 5
    m.forget_author("bob")
    for r in m.sql.exec(f"SELECT {', '.join(columns)} FROM messages_fts"):
        assert not any("quetzal" in r[c] for c in columns), r
    # Every survivor's row is what indexing the survivors afresh gives (the tail too, once a
    # search has indexed it).
    assert ids_of(m, "line 29")[:1] == ["live12"]
    fresh = memory()
    kept = m.sql.exec("SELECT author, text, ts FROM messages ORDER BY id")
    add(fresh, *[(r["author"], r["text"], r["ts"]) for r in kept])
    listing = f"SELECT {', '.join(columns)} FROM messages_fts ORDER BY rowid"
    assert m.sql.exec(listing) == fresh.sql.exec(listing)


def test_unindexing_the_oldest_clears_the_next_ones_context():
    m = memory()
    add(m, ("Ann", "aardvark"), ("Bob", "second"), ("Ann", "third"))
    retrieval.unindex_messages(m.sql, "id <= ?", 1)
    m.sql.exec("DELETE FROM messages WHERE id <= 1")
    assert fts_hits(m, "aardvark") == 0
    assert ids_of(m, "second") == ["m2", "m3"]
    assert fts_row(m, "m3")["context_before"] == " second"


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
            assert [m["message_id"] for m in r.json()["results"]] == ["a", "b", "c"]
            for q in FTS_SYNTAX[:20]:
                r = await http.get("/v1/chats/t:1/search", params={"q": q or "x", "k": 3})
                assert r.status_code == 200, (q, r.text)
            r = await http.get("/v1/chats/t:1/search", params={"q": "what did Bob say about NEAR(map)"})
            assert r.json()["results"][0]["message_id"] == "b"


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
        assert len(params) <= 100, query  # a Durable Object binds at most 100 parameters
        cursor = self.sql.exec(query, *params)
        return [
            {c: (None if v is self.runtime.jsnull else v) for c, v in zip(cursor._columns, row, strict=True)}
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
    # Word forms scored once each (a statement per query), and a live turn linked after retrieval.
    add(m, *[("Bob", f"I met Ana {n} and will meet her again") for n in range(60)])
    assert len(ids_of(m, "who did Bob meet, and what did he buy or find?", 3)) == 3
    for n in range(5):  # live turns: the tail waits, then goes into the index as one batch
        m.turn(f"I met Ana at the lake {n}", author="Bob", author_id="bob", message_id=f"live{n}")
    assert fts_row(m, "live0")["context_after"] == "I met Ana at the lake 1"
    m.reply("a lake walk sounds lovely", tier="light", model="x", message_id="r")
    assert ids_of(m, "walk") == ["r", "live4"]  # the newest messages, indexed for the search


def test_an_index_row_without_its_message_is_never_an_answer():
    m = memory()
    add(m, ("Ann", "we saw a heron by the pond"), ("Bob", "the heron flew off"), *FILLER[:3])
    found = set(ids_of(m, "heron"))
    assert {"m1", "m2"} <= found
    # None should exist (a message leaves the index before the archive); if one did, the
    # ranking leaves it out, as its JOIN of the messages did, instead of failing on it.
    m.sql.exec(
        "INSERT INTO messages_fts(rowid, body, author, context_before, context_after, date) "
        "VALUES (999, 'heron heron heron', 'Cy', '', '', '')"
    )
    assert set(ids_of(m, "heron")) == found
