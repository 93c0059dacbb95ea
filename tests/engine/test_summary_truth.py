"""Summaries keep only what is true: current facts per person, moves as changes, right counts,
clean topics and files, open questions only; the model's compaction prompt asks the same."""

from __future__ import annotations

from memory_engine.compaction.compact import SECTIONS
from memory_engine.compaction.offline import offline_summary
from tests.engine.test_compaction import _compactions, host_with, say, summary_echo
from tests.fakes.openai_server import FakeOpenAI
from tests.support import wait_until


def _said(*lines: tuple[str, str]) -> list[dict]:
    return [
        {
            "role": "user",
            "author": who,
            "author_id": who.lower(),
            "text": text,
            "ts": f"2026-01-01T00:{i:02d}",
        }
        for i, (who, text) in enumerate(lines)
    ]


def _section(summary: str, n: int) -> str:
    return summary.split(SECTIONS[n])[1].split("\n## ")[0]


CHAT = _said(
    ("Ana Lima", "hi all, I live in Lisbon and I'm a nurse lol"),
    ("Ben", "I'm 34, sorry 35 😅"),
    ("Ana Lima", "big news: moved to Porto last week, just started as a teacher there"),
    ("Ben", "check the route https://maps.example.org/trails/porto-walk?x=1 before saturday"),
    ("Chiara", "who's bringing the tent?"),
    ("Ben", "I'm bringing the tent, it fits four"),
    ("Chiara", "does anyone know a good bakery near the station?"),
)


def test_the_offline_summary_states_current_facts_and_changes_only():
    previous = offline_summary("", _said(("Ana Lima", "hello everyone")) * 1)
    previous = previous.replace("Completed: 1 messages", "Completed: 246 messages")
    summary = offline_summary(previous, CHAT)
    details = _section(summary, 1)
    assert "- Ana Lima: location = Porto" in details and "location = Lisbon" not in details
    assert "- Ana Lima: moved from Lisbon to Porto" in details
    assert "job = teacher" in details and "job = nurse" not in details
    assert "- Ben: age = 35" in details and "age = 34" not in details
    assert "I live in Lisbon" not in details  # no key sentence states a replaced value
    assert "Completed: 253 messages summarized" in _section(summary, 2)  # 246 before, 7 now
    objective = _section(summary, 0)
    assert "Ana Lima" in objective and "Ben" in objective and "Chiara" in objective
    assert not {"lol", "just", "https", "maps", "example"} & set(objective.replace(",", " ").split())
    files = _section(summary, 4)
    assert files.strip() == "- https://maps.example.org/trails/porto-walk?x=1"
    next_move = _section(summary, 3)
    assert "bakery" in next_move and "tent" not in next_move  # the answered question is dropped


def test_an_empty_section_says_none():
    summary = offline_summary("", _said(("Ana", "good morning")))
    assert _section(summary, 3).strip() == "- none" and _section(summary, 4).strip() == "- none"


async def test_the_compaction_prompt_asks_for_superseded_values_replaced(tmp_path):
    async with FakeOpenAI() as fake:
        fake.responder = summary_echo
        async with host_with(fake, tmp_path) as (_host, client):
            await say(client, 26)
            await wait_until(lambda: _compactions(client, 1), timeout=10)
        system = fake.requests[0].messages[0]["content"]
        assert "replace the old value" in system and "never list both as current" in system
        assert "Drop questions that were answered" in system and "display names" in system


def test_topics_are_no_ones_name_and_answered_questions_are_not_next():
    summary = offline_summary(
        "",
        _said(
            ("Dániel Kovács", "dani here 👋 Dániel on paper, i have a hamster called Pixel"),
            ("Zoë Fischer", "do u have any pets dani?"),
            ("Dániel Kovács", "just Pixel, and Zoë's plant Fern counts too"),
            ("Ahmed", "how many dogs do you have zoe?"),
            ("Zoë Fischer", "two, Rex and Ash"),
            ("Ahmed", "what time is the Berlin trip on Friday?"),
        ),
    )
    objective = _section(summary, 0).split("about:")[1]
    assert "Pixel" in objective and "Berlin" in objective
    assert not {"Dániel", "Zoë", "dani", "what"} & set(objective.replace(";", " ").replace(".", " ").split())
    next_move = _section(summary, 3)
    assert "Berlin trip" in next_move and "pets" not in next_move and "dogs" not in next_move
