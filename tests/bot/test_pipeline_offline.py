"""The offline model: says it is offline (shown, never recorded) and answers from the matching memory."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bot.app import build_pipeline
from bot.chat.models.base import MemoryContext, ModelRequest
from bot.chat.models.offline import OFFLINE_NOTICE, OFFLINE_SHORT, UNKNOWN, OfflineModel
from bot.config import load_settings
from tests.support import FAST, msg


def _answer(model: OfflineModel, text: str, mem: MemoryContext | None, author_id: str = "u1"):
    req = ModelRequest(messages=(), chat_key="c", author="ada", author_id=author_id, text=text, memory=mem)
    return model.answer(req)


def _ask(model: OfflineModel, text: str, mem: MemoryContext | None, author_id: str = "u1") -> str:
    return _answer(model, text, mem, author_id).text


def _facts(*pairs: tuple[str, str], author_id: str = "u1") -> tuple[dict[str, str], ...]:
    return tuple({"author": "ada", "author_id": author_id, "key": k, "value": v} for k, v in pairs)


def test_offline_model_says_offline_apart_from_its_words_and_answers_per_speaker():
    model = OfflineModel()
    facts = (
        *_facts(("name", "Ada"), ("location", "Lisbon")),
        *_facts(("name", "Bob"), author_id="u2"),
    )
    mem = MemoryContext(facts=facts)
    first = _answer(model, "hello", mem)
    assert (
        first.notice == OFFLINE_NOTICE
        and "OPENAI_API_KEY" in first.notice
        and "OPENAI_BASE_URL" in first.notice
    )
    assert "offline" not in first.text
    second = _answer(model, "what is my name?", mem)
    assert second.notice == OFFLINE_SHORT and second.text == "Your name is Ada."
    assert _ask(model, "Where do I live?", mem) == "You live in Lisbon."
    assert _ask(model, "what's my name?", mem, author_id="u2") == "Your name is Bob."
    assert _ask(model, "what do I like?", mem) == UNKNOWN
    assert "unreachable" in _ask(model, "what is my name?", None)


def test_a_question_is_answered_by_the_fact_it_asks_for_not_by_every_fact():
    model = OfflineModel()
    mem = MemoryContext(
        facts=_facts(
            ("name", "Marta"),
            ("location", "Porto"),
            ("job", "nurse"),
            ("employer", "Santo António hospital"),
            ("favorite_book", "The Name of the Rose"),
            ("favorite_food", "bacalhau"),
            ("likes", "hiking, black coffee, old jazz records"),
            ("dislikes", "cilantro"),
            ("pets", "Biscuit (dog), Mia (cat)"),
            ("family", "Ana (sister)"),
            ("age", "34"),
        )
    )
    cases = {
        "What's my favourite book?": "Your favourite book is The Name of the Rose.",
        "what is my favorite food?": "Your favourite food is bacalhau.",
        "where do I live?": "You live in Porto.",
        "Where do I work?": "You work at Santo António hospital.",
        "what is my job?": "You work as a nurse.",
        "what's my dog called?": "Your dog is Biscuit.",
        "what is my cat's name?": "Your cat is Mia.",
        "who is my sister?": "Your sister is Ana.",
        "how old am I?": "You are 34.",
        "what do I like?": "You like hiking, black coffee and old jazz records.",
        "what don't I like?": "You don't like cilantro.",
        "what's my name?": "Your name is Marta.",
    }
    for question, expected in cases.items():
        answer = _ask(model, question, mem)
        assert answer == expected, question
        assert "Porto" not in answer or "live" in question  # no recital of the other facts


def test_a_question_without_a_fact_is_answered_from_the_matching_message():
    model = OfflineModel()
    retrieved = (
        {"id": 3, "role": "user", "author_id": "u1", "text": "by the way, my name is Grace Hopper"},
        {"id": 5, "role": "user", "author_id": "u1", "text": "The trip to Kyoto is planned for May"},
        {"id": 6, "role": "user", "author_id": "u2", "text": "my trip to Oslo is in June"},  # someone else
        {"id": 7, "role": "assistant", "text": "Noted: trip to Mars"},  # the bot's own words
    )
    mem = MemoryContext(retrieved=retrieved)
    assert _ask(model, "do you remember my name?", mem) == "Your name is Grace Hopper."
    assert _ask(model, "when is my trip?", mem) == "You told me: “The trip to Kyoto is planned for May”"
    assert _ask(model, "what is my blood type?", mem) == UNKNOWN  # nothing matches: said briefly


def test_statements_are_acknowledged_and_everything_only_when_asked_for_everything():
    model = OfflineModel()
    mem = MemoryContext(facts=_facts(("name", "Ada"), ("location", "Lisbon")))
    assert _ask(model, "my name is Ada", mem) == "Noted, I'll remember that (name: Ada)."
    assert _ask(model, "the weather is nice", mem) == "Noted."
    everything = _ask(model, "what do you know about me?", mem)
    assert "name: Ada" in everything and "location: Lisbon" in everything


async def test_the_offline_notice_is_shown_but_never_stored(tmp_path):
    settings = load_settings(env={}, env_file=None)
    async with build_pipeline(settings, tmp_path, options=FAST) as pipeline:
        shown = await pipeline.handle(msg("my name is Ada and I live in Lisbon"))
        assert shown.text.startswith(OFFLINE_NOTICE) and shown.text.endswith(
            "Noted, I'll remember that (name: Ada; location: Lisbon)."
        )
        streamed = "".join([p async for p in pipeline.stream(msg("where do I live?"))])
        assert streamed == f"{OFFLINE_SHORT}\nYou live in Lisbon."
        stored = await pipeline.memory.search("test:chat", "offline memory answering", k=10)
        assert stored == []  # no stored message holds the notice
        found = await pipeline.memory.search("test:chat", "Lisbon", k=10)
        bot_words = {m["text"] for m in found if m["role"] == "assistant"}
        assert bot_words == {
            "Noted, I'll remember that (name: Ada; location: Lisbon).",
            "You live in Lisbon.",
        }


@hsettings(max_examples=200, deadline=None)
@given(
    st.text(max_size=200),
    st.lists(
        st.fixed_dictionaries(
            {
                "key": st.sampled_from(["name", "location", "likes", "pets", "favorite_book"]),
                "value": st.text(max_size=30),
                "author_id": st.sampled_from(["u1", "u2", ""]),
            }
        ),
        max_size=5,
    ),
)
def test_offline_model_always_answers(text, facts):
    answer = _answer(OfflineModel(), text, MemoryContext(facts=tuple(facts)))
    assert answer.notice.startswith("I'm offline") and answer.text.strip()
