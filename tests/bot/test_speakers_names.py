"""`chatbot chat --as`: a unique first name, any case, accents folded (issue 40, first hour 6)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.speakers import Speaker, SpeakerNotFound, find_speaker

PEOPLE = [
    ("111", "Ana Lima"),
    ("222", "José Silva"),
    ("333", "Jose Santos"),
    ("444", "Zoë"),
    ("555", "ÉMILE Durand"),
]


async def _pages() -> AsyncIterator[dict]:
    yield {"messages": [{"role": "user", "author_id": i, "author": n, "text": "hi"} for i, n in PEOPLE]}


async def _find(name: str) -> Speaker:
    return await find_speaker(_pages(), "telegram:-1", name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "who"),
    [
        ("ana", "111"),
        ("ANA", "111"),
        ("Ana Lima", "111"),
        ("jose silva", "222"),
        ("José Silva", "222"),
        ("zoe", "444"),
        ("Zoë", "444"),
        ("emile", "555"),
        ("Émile durand", "555"),
        ("333", "333"),
    ],
)
async def test_a_unique_first_name_any_case_accents_folded(name, who):
    assert (await _find(name)).author_id == who


async def test_a_first_name_two_people_share_names_them_both():
    with pytest.raises(SpeakerNotFound) as caught:
        await _find("jose")
    said = str(caught.value)
    assert "2 people in telegram:-1 are called 'jose'" in said
    assert "José Silva (222)" in said and "Jose Santos (333)" in said
