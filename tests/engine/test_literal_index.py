"""`LiteralIndex.scan` finds exactly the literals an `in` finds, for words it meets for the
first time and for words it remembers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_engine.facts.patterns import LiteralIndex, word_runs

LITERALS = frozenset(
    [
        *("i", "am", "my", "do", "go", "love", "loved", "lov", "ove", "work", "working", "it's", "'m"),
        *("b-day", "dairy free", "known as", "fav", "allerg", "é", "café", "x_y", "12", "here", "er"),
    ]
)
PIECES = st.sampled_from([*sorted(LITERALS), " ", "-", "_", "'", ".", "é", "z", "e", "9", "\n", "ß"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=12).map("".join), min_size=1, max_size=4))
def test_scan_finds_what_in_finds(texts):
    index = LiteralIndex(LITERALS)
    for text in texts * 2:  # the second time round, each word is remembered
        low = text.lower()
        assert index.scan(low, word_runs(low))[0] == {w for w in LITERALS if w in low}
