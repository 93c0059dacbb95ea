"""The offline model answers from a statement by or about the person named, or says it does not know."""

from __future__ import annotations

from bot.chat.models.base import MemoryContext, ModelRequest
from bot.chat.models.offline import UNKNOWN, OfflineModel


def _fact(author: str, author_id: str, key: str, value: str) -> dict[str, str]:
    return {"author": author, "author_id": author_id, "key": key, "value": value}


def _msg(i: int, author: str, author_id: str, text: str) -> dict[str, object]:
    return {"id": i, "role": "user", "author": author, "author_id": author_id, "text": text, "score": 1.0}


def _ask(text: str, mem: MemoryContext) -> str:
    req = ModelRequest(messages=(), chat_key="c", author="asker", author_id="q", text=text, memory=mem)
    return OfflineModel().answer(req).text


FACTS = (
    _fact("José Martínez", "j", "job", "nurse"),
    _fact("Małgorzata Nowak", "g", "job", "accountant"),
    _fact("Marcus Bell", "m", "alias", "moose"),
    _fact("Marcus Bell", "m", "allergies", "cashews"),
    _fact("Hiroshi Sato", "h", "age", "34"),
)
MESSAGES = (
    _msg(1, "José Martínez", "j", "that time works for me"),
    _msg(2, "José Martínez", "j", "if i won the lottery id quit and move to bali tbh"),
    _msg(3, "Aoife Kelly", "a", "i'm a vet, not a dog whisperer, stop sending me your dog pics"),
    _msg(4, "Aoife Kelly", "a", "what do u all do for work anyway"),
    _msg(5, "Aoife Kelly", "a", "no pets, my landlord would kill me"),
)


def test_names_are_folded_first_names_short_forms_and_aliases():
    mem = MemoryContext(facts=FACTS, retrieved=MESSAGES)
    assert _ask("what does jose do for work?", mem) == "José Martínez works as a nurse."
    assert "accountant" in _ask("what does malgorzata do?", mem)
    assert "cashews" in _ask("what is moose allergic to?", mem)
    assert "34" in _ask("how old is hiro?", mem)


def test_never_from_a_question_a_wish_a_negation_or_an_incidental_word():
    mem = MemoryContext(facts=FACTS, retrieved=MESSAGES)
    assert _ask("where does José live?", mem) == UNKNOWN  # the lottery wish is no home
    assert _ask("what pets does Aoife have?", mem) == UNKNOWN  # "no pets"
    for question in ("what does Aoife do for a living?", "what does Aoife do?"):
        assert _ask(question, mem) in (
            UNKNOWN,
            "Aoife Kelly said: “i'm a vet, not a dog whisperer, stop sending me your dog pics”",
        )
    assert _ask("what is Aoife's cat called?", mem) == UNKNOWN
    assert _ask("what car does Priya drive?", mem) == UNKNOWN  # nobody here is Priya
