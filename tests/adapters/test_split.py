"""split_text: parts fit, cuts fall at natural boundaries, code blocks survive, nothing is lost."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.adapters.split import split_text

FENCE_LINE = re.compile(r"^[ \t]*```", re.M)


def assert_faithful(text: str, parts: list[str], limit: int) -> None:
    """Every part fits, renders balanced fences, and the parts are the text minus split whitespace."""
    assert all(0 < len(p) <= limit for p in parts), [len(p) for p in parts]
    pos = 0
    reopened = False
    for n, part in enumerate(parts):
        unclosed_text = len(FENCE_LINE.findall(text)) % 2 == 1 and n == len(parts) - 1
        if not unclosed_text:  # an unclosed block in the text stays unclosed in its last part
            assert len(FENCE_LINE.findall(part)) % 2 == 0, f"part {n} has an unbalanced fence: {part!r}"
        body = part
        if reopened:
            # The splitter re-opened the fence of the block the previous part closed.
            assert body.startswith("```"), part
            body = body.split("\n", 1)[1]
        if reopened:
            # A continuation starts where the previous part stopped; a newline cut there is eaten.
            if text.startswith("\n", pos):
                pos += 1
        elif not text.startswith(body, pos):
            pos += len(text[pos:]) - len(text[pos:].lstrip())
        closed = False
        if not text.startswith(body, pos) and body.endswith("\n```"):
            # The splitter closed a code block it had to cut.
            body, closed = body[:-4], True
        assert text.startswith(body, pos), (n, body[:40], text[pos : pos + 40])
        pos += len(body)
        reopened = closed
    assert text[pos:].strip() == "", text[pos:]


def test_short_text_is_one_part_untouched():
    assert split_text("  hello\n\nworld  ", 4096) == ["  hello\n\nworld  "]


def test_blank_text_gives_no_part():
    assert split_text("", 100) == []
    assert split_text(" \n\t ", 100) == []


def test_too_small_limit_is_refused():
    with pytest.raises(ValueError):
        split_text("x" * 100, 3)


def test_paragraph_break_preferred_over_sentence_and_word():
    first = "First paragraph. It has two sentences."
    second = "Second one. " * 5
    text = first + "\n\n" + second.strip()
    parts = split_text(text, len(first) + 30)
    assert parts[0] == first
    assert_faithful(text, parts, len(first) + 30)


def test_line_break_preferred_over_sentence():
    text = "- item one. more words here\n- item two. more words here\n- item three. more"
    parts = split_text(text, 60)
    assert parts[0] == "- item one. more words here\n- item two. more words here"
    assert_faithful(text, parts, 60)


def test_sentence_boundary_preferred_over_word():
    text = "This is the first sentence. This is the second sentence and it goes on and on"
    parts = split_text(text, 50)
    assert parts[0] == "This is the first sentence."
    assert_faithful(text, parts, 50)


def test_word_boundary_when_no_sentence_fits():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
    parts = split_text(text, 20)
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in parts)
    assert " ".join(parts) == text
    assert_faithful(text, parts, 20)


def test_one_huge_word_is_cut_hard_and_kept_whole():
    text = "x" * 250
    parts = split_text(text, 100)
    assert [len(p) for p in parts] == [100, 100, 50]
    assert "".join(parts) == text


def test_code_block_kept_whole_when_it_fits():
    prose = "Intro sentence that is fairly long. " * 4
    code = "```python\n" + "\n".join(f"print({i})" for i in range(10)) + "\n```"
    text = prose + "\n" + code + "\nAfter the code."
    limit = len(code) + 10
    parts = split_text(text, limit)
    assert any(p.startswith(code) for p in parts), parts
    assert_faithful(text, parts, limit)


def test_long_code_block_is_split_with_fences_reopened():
    code_lines = [f"    value_{i} = compute({i})  # step" for i in range(60)]
    text = "Here is the code:\n\n```python\n" + "\n".join(code_lines) + "\n```\n\nDone."
    parts = split_text(text, 300)
    assert len(parts) > 3
    code_parts = [p for p in parts if "value_" in p]
    for p in code_parts:
        assert p.count("```python\n") == 1 and p.count("```") == 2, p
    # No code line is broken across parts: each one appears whole, exactly once.
    joined = "\n".join(parts)
    for line in code_lines:
        assert joined.count(line + "\n") + joined.count(line + "```") >= 1
        assert joined.count(line) == 1
    assert_faithful(text, parts, 300)


def test_code_block_with_a_line_longer_than_the_limit():
    text = "```\n" + "y" * 500 + "\n```"
    parts = split_text(text, 100)
    assert all(len(p) <= 100 for p in parts)
    assert "".join(p.replace("```\n", "").replace("\n```", "") for p in parts) == "y" * 500
    assert_faithful(text, parts, 100)


def test_unclosed_code_block_still_splits_cleanly():
    text = "Look:\n```js\n" + "\n".join(f"let a{i} = {i};" for i in range(50))
    parts = split_text(text, 120)
    assert_faithful(text, parts, 120)


def test_nine_thousand_characters_for_telegram():
    para = "Sentence number {i} tells a little more about memory and chat bots. "
    text = "\n\n".join("".join(para.format(i=i) for i in range(j, j + 6)) for j in range(0, 132, 6))
    text = text[:9000]
    parts = split_text(text, 4096)
    assert len(parts) == 3
    assert_faithful(text, parts, 4096)
    # Cut at paragraph breaks: every part but the last ends a paragraph.
    for p in parts[:-1]:
        assert text[text.index(p) + len(p) :].lstrip(" ").startswith("\n\n")


words = st.text(alphabet="abcdefghij.!?,", min_size=1, max_size=12)
prose_line = st.lists(words, min_size=1, max_size=12).map(" ".join)
code_block = st.tuples(
    st.sampled_from(["", "python", "js"]),
    st.lists(st.text(alphabet="abc xyz()=;", max_size=40), min_size=0, max_size=12),
).map(lambda t: "\n```" + t[0] + "\n" + "\n".join(t[1]) + ("\n" if t[1] else "") + "```\n")
chunk = st.one_of(prose_line, prose_line, code_block)
separator = st.sampled_from(["\n", "\n\n", " ", "\n\n\n"])


@st.composite
def documents(draw):
    pieces = draw(st.lists(st.tuples(chunk, separator), min_size=1, max_size=25))
    return "".join(c + s for c, s in pieces)


@settings(max_examples=400, deadline=None)
@given(documents(), st.integers(min_value=16, max_value=200))
def test_property_parts_fit_and_lose_nothing(text, limit):
    parts = split_text(text, limit)
    assert_faithful(text, parts, limit)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600), st.integers(min_value=16, max_value=120))
def test_property_arbitrary_text(text, limit):
    parts = split_text(text, limit)
    assert all(0 < len(p) <= limit for p in parts)
    if "```" not in text:
        # Without code, parts are exact slices and only whitespace disappears.
        assert re.sub(r"\s", "", "".join(parts)) == re.sub(r"\s", "", text)
