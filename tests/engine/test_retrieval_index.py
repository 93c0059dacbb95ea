"""Retrieval's index: dates, word forms, bulk and live indexing alike, migration 4 (issue 16).

In process through ChatMemory over SqliteStorage (tests/engine/test_retrieval.py has the rest).
"""

from __future__ import annotations

from memory_engine import ChatMemory
from memory_engine.index import retrieval
from memory_engine.index.text import fts_query, query_groups, query_terms
from memory_worker.local import SqliteStorage
from tests.support import FILLER, add, bulk_indexed, fts_row, ids_of, memory

# -- dates -------------------------------------------------------------------------------------


def test_a_month_question_finds_a_message_of_that_month_that_says_yesterday():
    m = memory()
    add(
        m,
        ("Priya", "yesterday I went to a pottery workshop", "2022-02-20T10:00:00.000Z"),
        ("Priya", "yesterday I adopted a puppy named Miso", "2022-03-14T10:00:00.000Z"),
        ("Priya", "yesterday I painted the whole fence", "2022-05-02T10:00:00.000Z"),
        ("Priya", "yesterday I baked bread for the neighbours", "2023-03-09T10:00:00.000Z"),
    )
    assert ids_of(m, "What did Priya do in March 2022?", 1) == ["m2"]
    assert ids_of(m, "What did Priya do in May?", 1) == ["m3"]
    assert fts_row(m, "m2")["date"] == "march 2022"


def test_may_is_a_month_only_where_it_names_one():
    assert "may" in query_terms("what happened in May?")
    assert "may" in query_terms("plans for May 2023")
    assert "may" in query_terms("between April and May")
    assert "may" not in query_terms("May I ask where you went?")
    assert "may" not in query_terms("you may like this one")
    assert "january" in query_terms("the trip in Jan 2021")
    assert query_terms("who won the race") == ["won", "race"]
    assert "won" not in query_terms("I won't go")


def test_live_messages_are_indexed_with_their_month():
    m = memory()
    m.turn("hello there", author="Ann", author_id="ann", message_id="h")
    assert m.sql.exec("SELECT rowid FROM messages_fts") == []  # the newest message waits (the tail)
    m.search("hello")  # a search indexes it
    month = m.sql.exec("SELECT ts FROM messages")[0]["ts"][5:7]
    year = m.sql.exec("SELECT ts FROM messages")[0]["ts"][:4]
    from memory_engine.index.text import MONTHS

    assert fts_row(m, "h")["date"] == f"{MONTHS[int(month) - 1]} {year}"


# -- word forms ------------------------------------------------------------------------------


def test_who_did_i_meet_finds_i_met():
    m = memory()
    for n, (author, text) in enumerate([*FILLER, ("Sam", "I met Ana at the climbing gym"), *FILLER]):
        m.turn(text, author=author, author_id=author.lower(), message_id=f"t{n}")
    assert ids_of(m, "who did I meet?", 3)[0] == "t4"


def test_british_and_american_spellings_find_each_other():
    m = memory()
    add(m, *FILLER, ("Sam", "my favorite color is teal"), *FILLER)
    assert ids_of(m, "what is Sam's favourite colour?", 1) == ["m5"]
    assert ids_of(m, "what is the favorite color", 1) == ["m5"]


def test_every_listed_form_stems_differently():
    import sqlite3

    from memory_engine.index.word_forms import build_table

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")

    def stem(word: str) -> str:
        db.execute("DELETE FROM t")
        db.execute("INSERT INTO t VALUES (?)", (word,))
        return db.execute("SELECT term FROM v").fetchone()[0]

    for word, group in build_table(light_verbs=True).items():
        assert len(group) > 1, word
        stems = [stem(f) for f in group]
        assert len(set(stems)) == len(stems), (word, group, stems)


def test_word_forms_count_as_one_term():
    groups = query_groups("who did she meet, and what did she buy?")
    assert ("meet", "met") in groups and ("buy", "bought") in groups
    assert len(query_groups("met meet")) == 1
    assert fts_query([("met", "meet"), "ana"]) == '"met" OR "meet" OR "ana"'
    terms, _ = retrieval._select(memory().sql, groups)
    assert ("meet", "met") in terms


def test_a_message_scores_once_per_word_by_its_best_form():
    m = memory()
    add(m, *FILLER * 3, ("Sam", "we won! winning the cup felt great"), ("Ann", "I won a raffle"), *FILLER * 3)
    scores = {r["message_id"]: r["score"] for r in m.search("who won?", 10)["results"]}
    weights = ", ".join(str(w) for w in retrieval.BM25_WEIGHTS)

    def share(form: str, message_id: str) -> float:
        return -m.sql.exec(
            f"SELECT bm25(messages_fts, {weights}) AS s FROM messages_fts WHERE messages_fts MATCH ? "
            "AND rowid = (SELECT id FROM messages WHERE message_id = ?)",
            f'"{form}"',
            message_id,
        )[0]["s"]

    both = [share("won", "m13"), share("win", "m13")]  # "won" and "winning" (stem "win")
    assert min(both) > 0 and scores["m13"] == round(max(both), 6)
    assert scores["m14"] == round(share("won", "m14"), 6)  # one form: as bm25 scores it


def test_light_verbs_are_not_expanded():
    from memory_engine.index.word_forms import LIGHT_VERBS, WORD_FORMS, build_table

    assert query_groups("what has she made, taken and given?") == [("made",), ("taken",), ("given",)]
    assert not any(set(group) & LIGHT_VERBS for group in WORD_FORMS.values())
    assert build_table(light_verbs=True)["made"] == ("make", "made")
    assert query_groups("what did she feel?") == [("feel", "felt")]


def _store(m, rows: list[tuple[str, str]], ts: str = "2024-06-01T00:00:00.000Z") -> list[int]:
    """Store rows in `messages` only (ids m<k> continue the chat's count); their ids."""
    start = len(m.sql.exec("SELECT id FROM messages"))
    return [
        int(
            m.sql.exec(
                "INSERT INTO messages(role, author, author_id, text, ts, message_id) "
                "VALUES ('user', ?, ?, ?, ?, ?) RETURNING id",
                a,
                a.lower(),
                t,
                ts,
                f"m{start + n}",
            )[0]["id"]
        )
        for n, (a, t) in enumerate(rows)
    ]


ROWS = [
    ("Zed", "before the batch"),
    ("Ann", "did you see the comet?"),
    ("Bob", "yes, bright tail"),
    ("Ann", "lovely"),
    ("Bob", "comet again tonight"),
]
LISTING = "SELECT rowid, body, author, context_before, context_after, date FROM messages_fts ORDER BY rowid"


def test_bulk_indexing_matches_one_by_one_indexing():
    one_by_one = memory()
    for i in range(1, len(ROWS) + 1):
        _store(one_by_one, [ROWS[i - 1]])
        retrieval.index_messages(one_by_one.sql, i, i)
    bulk = memory()
    _store(bulk, ROWS[:1])
    retrieval.index_messages(bulk.sql, 1, 1)
    _store(bulk, ROWS[1:])
    retrieval.index_messages(bulk.sql, 2, 5)
    assert bulk.sql.exec(LISTING) == one_by_one.sql.exec(LISTING)
    assert bulk.sql.exec(LISTING)[0]["context_after"] == "did you see the comet?"
    assert ids_of(bulk, "comet") == ids_of(one_by_one, "comet")


def test_a_live_turn_indexes_the_row_the_bulk_index_would():
    live = memory()
    for n, (a, t) in enumerate(ROWS):
        live.turn(t, author=a, author_id=a.lower(), message_id=f"m{n}")
    assert len(live.sql.exec(LISTING)) == 4  # a batch of four, the fifth waits (the tail)
    assert ids_of(live, "comet")  # a search indexes it
    bulk = memory()
    _store(bulk, ROWS)
    retrieval.index_messages(bulk.sql, 1, len(ROWS))
    listing = "SELECT rowid, body, author, context_before, context_after FROM messages_fts ORDER BY rowid"
    assert live.sql.exec(listing) == bulk.sql.exec(listing)
    dates = {r["date"] for r in live.sql.exec(LISTING)}
    month = live.sql.exec("SELECT ts FROM messages LIMIT 1")[0]["ts"]
    assert dates == {retrieval.date_words(month)} and dates != {""}
    assert retrieval.date_words("2022-03-05T10:00:00.000Z") == "march 2022"
    assert retrieval.date_words("yesterday") == ""


# -- migration 4 -------------------------------------------------------------------------------


def test_migration_4_reindexes_an_old_database_like_the_bulk_index(tmp_path):
    from memory_engine import storage

    old = SqliteStorage(tmp_path / "old.sqlite3")
    saved = storage.MIGRATIONS
    storage.MIGRATIONS = [mig for mig in saved if mig[0] <= 2]
    try:
        ChatMemory(old)
    finally:
        storage.MIGRATIONS = saved
    ids = _store(_Raw(old), ROWS)
    old.exec(
        "INSERT INTO messages_fts(rowid, body, author, context) SELECT id, text, author, '' FROM messages"
    )
    migrated = ChatMemory(old)  # applies migration 4 (and whatever else is new)
    assert 4 in {r["version"] for r in old.exec("SELECT version FROM schema_migrations")}
    fresh = memory()
    _store(fresh, ROWS)
    retrieval.index_messages(fresh.sql, ids[0], ids[-1])
    assert migrated.sql.exec(LISTING) == fresh.sql.exec(LISTING)
    assert set(ids_of(migrated, "comet")[:2]) == {"m1", "m4"}


class _Raw:
    """Just `.sql`, for `_store` on a database without a ChatMemory."""

    def __init__(self, sql):
        self.sql = sql


def test_migrations_missing_below_the_newest_still_run():
    from memory_engine import storage

    sql = SqliteStorage(":memory:")
    storage.migrate(sql, "t")
    sql.exec("CREATE TABLE probe (x)")
    saved = storage.MIGRATIONS
    storage.MIGRATIONS = [*saved, (90, "late-landing lower number", ["INSERT INTO probe VALUES (90)"])]
    storage.MIGRATIONS.append((91, "newest", ["INSERT INTO probe VALUES (91)"]))
    try:
        sql.exec("INSERT INTO schema_migrations VALUES (91, 'newest', 't')")  # 91 ran first
        assert storage.migrate(sql, "t") == 91
    finally:
        storage.MIGRATIONS = saved
    assert [r["x"] for r in sql.exec("SELECT x FROM probe")] == [90]


# -- the tail: the newest messages wait, then go into the index as one batch -------------------


def _index_rows(m, message_id: str) -> int:
    """How many index rows one message has (the FTS5 content table and the per-row sizes agree)."""
    rows = m.sql.exec(
        "SELECT (SELECT COUNT(*) FROM messages_fts_content WHERE id = m.id) AS content, "
        "(SELECT COUNT(*) FROM messages_fts_docsize WHERE id = m.id) AS sizes "
        "FROM messages AS m WHERE message_id = ?",
        message_id,
    )[0]
    assert rows["content"] == rows["sizes"]
    return int(rows["content"])


def _averages(m) -> bytes:
    """FTS5's totals record (rows and tokens per column: bm25's average lengths), after its check."""
    m.sql.exec("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    return m.sql.exec("SELECT block FROM messages_fts_data WHERE id = 1")[0]["block"]


def _turns(m, *texts: str, start: int = 0) -> None:
    for n, text in enumerate(texts, start):
        who = ("Ann", "Bob")[n % 2]
        m.turn(text, author=who, author_id=who.lower(), message_id=f"t{n}")


def test_the_tail_goes_into_the_index_as_one_batch_of_complete_rows():
    from memory_engine import engine
    from memory_engine.index import pending as pending_index

    # What waits is always among a turn's recent messages, which its retrieval excludes.
    assert min(engine.RECENT_BY_MODE.values()) >= pending_index.TAIL_MAX
    m = memory()
    counts = []
    for n in range(9):
        _turns(m, f"line {n} about kayaks", start=n)
        counts.append(m.sql.exec("SELECT COUNT(*) AS n FROM messages_fts")[0]["n"])
    assert counts == [0, 0, 0, 0, 4, 4, 4, 4, 8]  # one write to the index every fourth message
    assert fts_row(m, "t7")["context_after"] == "line 8 about kayaks" and _index_rows(m, "t8") == 0
    bulk = bulk_indexed(m)
    assert m.sql.exec(LISTING) == bulk.sql.exec(LISTING)[:-1]  # each row complete; the newest waits
    assert ids_of(m, "line 8")[0] == "t8"  # a search indexes the tail first
    assert m.sql.exec(LISTING) == bulk.sql.exec(LISTING) and _averages(m) == _averages(bulk)


def test_right_after_a_topic_start_the_waiting_messages_are_found():
    from memory_engine.chat_state import start_topic

    m = memory()
    _turns(m, *(t for _, t in FILLER), "the zeppelin museum opens on friday")  # t4 waits
    start_topic(m.sql, m.now())  # /new: the messages before it are no longer the recent ones
    got = m.turn("when does the zeppelin museum open?", author="Bob", author_id="bob", message_id="q")
    assert got["recent"] == [] and [r["message_id"] for r in got["retrieved"]][:1] == ["t4"]
    # Found by its own words (no after-context then), then indexed again, complete.
    assert fts_row(m, "t4")["context_after"] == "when does the zeppelin museum open?"
    assert _index_rows(m, "t4") == 1 and _index_rows(m, "q") == 0


def test_a_search_finds_the_newest_and_the_next_message_completes_its_row():
    m = memory()
    _turns(m, *(t for _, t in FILLER), "the zeppelin lands at noon", "is it on time?")
    assert _index_rows(m, "t4") == 0 and _index_rows(m, "t5") == 0
    assert ids_of(m, "zeppelin")[0] == "t4"
    assert fts_row(m, "t5")["context_after"] == ""
    _turns(m, "noon is early", start=6)
    assert _index_rows(m, "t5") == 1 and fts_row(m, "t5")["context_after"] == "noon is early"
    # The row written twice left no trace: the rows and totals of an index built at once.
    assert ids_of(m, "early")[0] == "t6"
    bulk = bulk_indexed(m)
    assert m.sql.exec(LISTING) == bulk.sql.exec(LISTING) and _averages(m) == _averages(bulk)


def test_fts5_insert_or_replace_deletes_the_old_row_first():
    m = memory()
    _store(m, ROWS[:1])
    retrieval.index_messages(m.sql, 1, 1)
    _store(m, ROWS[1:2])
    before = _averages(m)
    retrieval.index_messages(m.sql, 1, 1, link=False)  # message 1 again, message 2 as its after-context

    def matches(word: str) -> list[int]:
        found = m.sql.exec("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", word)
        return [r["rowid"] for r in found]

    assert _index_rows(m, "m0") == 1 and fts_row(m, "m0")["context_after"] == ROWS[1][1]
    assert matches("comet") == [1]
    after = _averages(m)
    assert after != before and after[0] == before[0] == 1  # one row longer, not one row more
    retrieval.index_messages(m.sql, 1, 1, link=False)  # again: one row, the same totals
    assert _index_rows(m, "m0") == 1 and _averages(m) == after


def test_a_reply_waits_with_the_tail_and_goes_in_complete():
    m = memory()
    _turns(m, "hello", "who wants to try the new ramen place?")
    m.reply("the ramen place on Elm street is great", tier="light", model="x", message_id="r")
    assert _index_rows(m, "r") == 0 and _index_rows(m, "t1") == 0
    _turns(m, "sounds good", "see you there", start=2)  # the fifth message: the four before go in
    assert fts_row(m, "r")["context_after"] == "sounds good" and _index_rows(m, "r") == 1
    assert fts_row(m, "t1")["context_after"] == "the ramen place on Elm street is great"
    assert _index_rows(m, "t3") == 0


def test_a_repeated_older_message_finds_the_waiting_ones():
    m = memory()
    _turns(m, "where did the otter go?", *(t for _, t in FILLER), "the otter swam under the bridge")
    got = m.turn("where did the otter go?", author="Ann", author_id="ann", message_id="t0")  # a retry
    assert got["id"] == 1 and "t5" in [r["message_id"] for r in got["retrieved"]]


def _fts_words(m) -> str:
    """Everything the index's rows hold (FTS5's own copy of their columns)."""
    return " ".join(str(v) for r in m.sql.exec("SELECT * FROM messages_fts_content") for v in r.values())


def test_forgetting_a_waiting_message_or_its_neighbour_leaves_none_of_its_words():
    for gone, words in (("bob", ("kumquat", "walrus")), ("ann", ("quokka",))):
        m = memory()
        for n in range(4):
            m.turn(f"filler line {n}", author="Cy", author_id="cy", message_id=f"c{n}")
        m.turn("my quokka is named Pip", author="Ann", author_id="ann", message_id="a0")  # 4 go in
        m.turn("I keep a kumquat tree", author="Bob", author_id="bob", message_id="b0")
        m.turn("and a walrus plush", author="Bob", author_id="bob", message_id="b1")
        assert _index_rows(m, "a0") == 0 and "quokka" in fts_row(m, "c3")["context_after"]
        m.forget_author(gone)
        for when in ("forgotten", "searched", "next turns"):
            text = _fts_words(m).lower()
            assert not any(w in text for w in words), (gone, when)
            if when == "forgotten":
                ids_of(m, "filler")
            elif when == "searched":
                for n in range(5):
                    m.turn(f"bye now {n}", author="Cy", author_id="cy", message_id=f"z{n}")
        assert ids_of(m, words[0]) == []
        assert m.sql.exec(LISTING) == bulk_indexed(m).sql.exec(LISTING)
