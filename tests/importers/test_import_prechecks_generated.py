"""The import's two shortcuts against what they skip, on generated input (a review's checks).

`validation.imported_message` (one pass) against the field-by-field checks: any message it
accepts, they accept, and the engine stores the same row from either. `facts.states_nothing`
against the correction test: a message it passes over never looks like a correction, so no
previous message is read, and the rules find nothing in it whatever came before.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_engine.api.route_args import _imported_message
from memory_engine.api.validation import ApiError, imported_message
from memory_engine.facts.corrections import OPENING_WORDS
from memory_engine.facts.extract import extract_facts, looks_like_correction, states_nothing
from memory_engine.imports.bulk import _row

FIELDS = ("role", "text", "author", "author_id", "message_id", "ts")
FIELDS += ("reply_to_message_id", "reply_to_author_id", "extra")
_ODD_TIMES = ["2016-12-31T23:59:60Z", "Z", "2020-01-01T00:00:00+25:00", "2020-01-01T00:00Z"]
_ODD_TIMES += ["2020-01-01T00:00:00z", "2020-01-01T00:00:00.1234567Z", "2020-W01-1"]
_ODD_TIMES += ["2020-01-01T00:00:00 Z", "2020-01-01\x00"]
_TIMES = st.one_of(
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())).map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.datetimes().map(lambda d: d.isoformat(sep=" ")),
    st.sampled_from(_ODD_TIMES),
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec="ascii"), max_size=300),
    st.text(alphabet="\x00\r\n\t \u3000\u2028\x1c\x85", max_size=5),
    st.sampled_from(["user", "assistant", "system", "", " ", "\ud800", "a\udfffb", "x" * 256, "x" * 257])
    | st.sampled_from(["é" * 128, "é" * 129]),
    _TIMES,
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)


def _slow(m: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return _imported_message(m, 0)
    except ApiError:
        return None


@settings(max_examples=500, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(FIELDS), _VALUES))
def test_what_the_one_pass_check_takes_is_stored_as_the_field_checks_store_it(m):
    fast = imported_message(dict(m))
    if fast is None:
        return  # the field checks decide (test_import_validation: the same refusals)
    slow = _slow(dict(m))
    assert slow is not None, m
    assert _row(fast, "now") == _row(slow, "now")
    assert fast.get("reply_to_message_id") == slow["reply_to_message_id"]
    assert (fast.get("reply_to_author_id") or None) == slow["reply_to_author_id"]


_WORDS = [w.decode() for w in OPENING_WORDS] + ["Sorry", "SORRY", "No", "I", "Wait", "NVM", "sorry_"]
_WORDS += ["Actually", "ACTUALLY"]
_WORDS += ["no wait", "i mean", "lol no", "ok not", "hello", "there", "Osaka", "Bergen", "thanks"]
_SEPARATORS = [" ", ", ", "... ", "! ", " - ", "\t", "\r", "\x00", "(", "~", "  ", ".", "-", "*", "?", ""]
_SEPARATORS += ["\x0b", "\x0c", "\x1c", "_", ";", "'", '"', "#", "@"]
_CHAT = st.lists(st.tuples(st.sampled_from(_SEPARATORS), st.sampled_from(_WORDS)), max_size=6).map(
    lambda parts: "".join(a + b for a, b in parts)
)
PREVIOUS = ["I live in Oslo", "I'm 34", "my name is Ann", "I work at Google", "my favorite color is blue"]


@settings(max_examples=500, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        _CHAT,
        st.text(alphabet=st.characters(codec="ascii"), max_size=170),
        _CHAT.map(lambda t: t.ljust(160)),  # 160 characters: still read as a correction
        _CHAT.map(lambda t: (t + " x" * 100)[:161]),
    )
)
def test_a_message_passed_over_reads_no_previous_message_and_states_nothing(text):
    if not states_nothing(text):
        return
    assert not looks_like_correction(text), text
    for previous in [None, *PREVIOUS]:
        assert extract_facts(text, previous) == [], (text, previous)
