"""A turn reads its state and the messages before it in one statement (`turns.state_and_newest`):
as many messages as the chat's mode wants, for every stored mode and every mode a request names."""

from __future__ import annotations

import itertools

import pytest

from memory_engine import turns
from memory_engine.engine import RECENT_BY_MODE, RING_SIZE
from memory_engine.index.retrieval import TURNS_BEFORE
from tests.support.engine import memory

MODES = (None, "", "auto", "full", "odd")


def _wanted(request: str | None, stored: str | None) -> int:
    """What the turn read in two statements before: the state, then this many newest messages."""
    chosen = request or stored or "auto"
    return max(min(RECENT_BY_MODE.get(chosen, 4), RING_SIZE), TURNS_BEFORE)


@pytest.mark.parametrize(("request_mode", "stored"), list(itertools.product(MODES, MODES)))
def test_the_messages_read_are_those_the_mode_wants(tmp_path, request_mode, stored):
    m = memory(tmp_path)
    for n in range(20):
        m.turn(f"message {n}", author="Ada", author_id="u1", message_id=f"m{n}")
    if stored is not None:
        m.set_state("mode", stored)
    m.set_state("summary", "so far")
    counts = {mode: _wanted(mode, None) for mode in RECENT_BY_MODE} | {None: _wanted("odd", None)}

    state, before = turns.state_and_newest(m.sql, counts, request_mode)

    assert state.get("mode") == stored
    assert state["summary"] == "so far"
    newest = m.sql.exec(f"SELECT {turns.MSG_COLUMNS} FROM messages ORDER BY id DESC LIMIT 20")
    assert before == newest[: _wanted(request_mode, stored)][::-1]


def test_a_turn_answers_with_the_recent_messages_of_its_mode(tmp_path):
    m = memory(tmp_path)
    for n in range(15):
        m.turn(f"message {n}", author="Ada", author_id="u1", message_id=f"m{n}")
    texts = [f"message {n}" for n in range(15)]
    assert [r["text"] for r in m.turn("now", mode="full")["recent"]] == texts[-12:]
    m.set_state("mode", "full")
    assert [r["text"] for r in m.turn("again")["recent"]] == [*texts[-11:], "now"]
    assert [r["text"] for r in m.turn("auto", mode="auto")["recent"]] == [*texts[-2:], "now", "again"]
