"""The import route's one-pass check of a message (`validation.imported_message`) accepts
exactly what the field-by-field checks accept, with the same values, and leaves every refusal
to them (the same status and message, naming the message and the field)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memory_engine.api import route_args
from memory_engine.api.route_args import Call, _imported_message
from memory_engine.api.validation import MAX_FIELD_CHARS, MAX_TEXT_BYTES, ApiError, imported_message

FIELDS = ("role", "text", "author", "author_id", "message_id", "ts")
FIELDS += ("reply_to_message_id", "reply_to_author_id")
ABSENT = object()
STRINGS: list[Any] = [
    ABSENT, None, "", "ok", "Person 12", "Ана", "😀 emoji", "\ud800", 5, 0, True, 1.5, [], {}, ["x"],
    "x" * MAX_FIELD_CHARS, "x" * (MAX_FIELD_CHARS + 1),
    "é" * (MAX_FIELD_CHARS // 2), "é" * (MAX_FIELD_CHARS // 2 + 1),
]  # fmt: skip
TEXTS: list[Any] = [
    *STRINGS, "   ", "\u3000", "\n\t", " hi ", "x" * MAX_TEXT_BYTES, "x" * (MAX_TEXT_BYTES + 1),
    "é" * (MAX_TEXT_BYTES // 2), "é" * (MAX_TEXT_BYTES // 2 + 1), "a\ud800b",
]  # fmt: skip
TIMES: list[Any] = [
    *STRINGS, "2020-09-13T12:26:40.000Z", "2020-09-13T12:26:40Z", "2020-09-13T12:26:40+02:00", "2020-09-13",
    "2020-02-30T00:00:00Z", "2020-09-13T24:00:00Z", "2020-09-13T12:26:40ZZ", "2020-09-13 12:26:40",
    "２０２０-09-13T12:26:40Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "20200913T122640Z",
]  # fmt: skip
ROLES: list[Any] = [ABSENT, None, "user", "assistant", "system", "robot", "User", 1, True, ["user"], {}]
PLAIN = {"role": "user", "text": "hello there", "author": "Ann", "author_id": "u1", "message_id": "7"}
PLAIN |= {"ts": "2020-09-13T12:26:40.000Z", "reply_to_message_id": "6", "reply_to_author_id": "u2"}


def _message(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in (PLAIN | values).items() if v is not ABSENT}


def _cases() -> list[dict[str, Any]]:
    """Each field through its variants, the others plain; and some pairs of odd fields."""
    cases = [_message(role=r) for r in ROLES] + [_message(text=t) for t in TEXTS]
    cases += [_message(ts=t) for t in TIMES]
    for name in ("author", "author_id", "message_id", "reply_to_message_id", "reply_to_author_id"):
        cases += [_message(**{name: v}) for v in STRINGS]
    for a, b in itertools.product(STRINGS[:8], repeat=2):
        cases.append(_message(author=a, reply_to_author_id=b))
    cases.append({"text": "only the text"})
    cases.append(_message(extra={"ignored": [1, 2]}))
    return cases


def _outcome(check: Any) -> Any:
    try:
        return ("ok", check())
    except ApiError as err:
        return ("refused", err.status, err.message)


def _as_engine_reads(m: dict[str, Any]) -> dict[str, Any]:
    """The fields as the engine reads them (`m.get(field)`, an empty reply_to_author_id as none)."""
    values = {name: m.get(name) for name in FIELDS}
    values["reply_to_author_id"] = values["reply_to_author_id"] or None
    return values


@pytest.mark.parametrize("case", _cases(), ids=lambda c: repr(c)[:60])
def test_the_one_pass_check_takes_what_the_field_checks_take_and_refuses_nothing_itself(case):
    slow = _outcome(lambda: _imported_message(dict(case), 3))
    fast = imported_message(dict(case))
    if fast is not None:  # accepted at once: the field checks accept it too, with the same values
        assert slow[0] == "ok", (case, slow)
        assert _as_engine_reads(fast) == _as_engine_reads(slow[1])
    # Through the route: the same outcome as the field checks give, whichever path took it.
    batch = [dict(PLAIN), dict(PLAIN), dict(PLAIN), dict(case)]
    routed = _outcome(lambda: route_args.import_messages(Call({}, {}, b"", {"messages": batch})))
    if slow[0] == "refused":
        assert routed == slow
        assert slow[2].startswith("messages[3]: ")
    else:
        assert routed[0] == "ok"
        assert _as_engine_reads(routed[1]["messages"][3]) == _as_engine_reads(slow[1])


def test_nearly_every_plain_message_takes_the_one_pass_check():
    """The messages `chatbot import` sends are checked in one pass (else it saves nothing)."""
    assert imported_message(dict(PLAIN)) is not None
    assert imported_message(_message(author="Ана", text="привет 😀")) is not None
    assert imported_message({"text": "x", "role": None}) == {"text": "x", "role": "user"}
