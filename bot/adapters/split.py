"""Split a long answer into parts a chat platform accepts (Telegram 4096, Discord 2000).

Cuts are chosen, in order of preference, at a paragraph break, a line break, the end of a
sentence, a space, and only then anywhere. ``` code blocks are kept whole when they fit in
one part; a block longer than a part is cut between its lines, closing the fence at the end
of one part and opening it again (same language tag) at the start of the next, so every part
renders as code. Nothing is lost but the whitespace at a cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["split_text"]

CLOSE_FENCE = "\n```"

# Preference levels of a cut position; a lower number is a better place to cut.
_PARAGRAPH, _LINE, _SENTENCE, _WORD = range(4)
_SENTENCE_END = re.compile(r"[.!?…。！？][)\]\"'»”’]*(?=\s)")


@dataclass(frozen=True)
class _Block:
    """A fenced code block: [start, end) in the text, and its opening fence line."""

    start: int
    end: int
    fence: str


def split_text(text: str, limit: int) -> list[str]:
    """Split `text` into parts of at most `limit` characters at the most natural boundaries."""
    if limit < 16:
        raise ValueError("limit is too small to split sensibly (need >= 16)")
    if len(text) <= limit:
        return [text] if text.strip() else []
    blocks = _code_blocks(text)
    parts: list[str] = []
    pos = 0
    reopen: _Block | None = None  # the code block the next part continues, if any
    while pos < len(text):
        prefix = reopen.fence + "\n" if reopen else ""
        if not reopen:
            # Whitespace between parts is the only thing a split may drop.
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
        budget = limit - len(prefix)
        if len(text) - pos <= budget:
            parts.append(prefix + text[pos:])
            break
        cut, inside = _choose_cut(text, pos, budget, limit, blocks)
        if inside is not None:
            parts.append(prefix + text[pos:cut] + CLOSE_FENCE)
            # A cut at a newline consumes it: the closing fence stands in for it.
            pos = cut + 1 if text[cut] == "\n" else cut
            reopen = inside
        else:
            part = (prefix + text[pos:cut]).rstrip()
            if part:
                parts.append(part)
            pos = cut
            reopen = None
    return parts


def _code_blocks(text: str) -> list[_Block]:
    """Find ``` fenced blocks; an unclosed block runs to the end of the text."""
    blocks: list[_Block] = []
    open_at: int | None = None
    fence = ""
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```"):
            if open_at is None:
                if not (len(stripped) > 3 and stripped.endswith("```") and stripped.count("```") >= 2):
                    open_at, fence = offset + (len(line) - len(line.lstrip())), stripped
            elif stripped.strip("`") == "":
                end = offset + len(line.rstrip("\r\n"))
                blocks.append(_Block(open_at, end, fence))
                open_at = None
        offset += len(line)
    if open_at is not None:
        blocks.append(_Block(open_at, len(text), fence))
    return blocks


def _block_at(blocks: list[_Block], i: int) -> _Block | None:
    """The code block strictly containing position i (a cut there would be inside code)."""
    for b in blocks:
        if b.start < i < b.end:
            return b
        if b.start >= i:
            break
    return None


def _choose_cut(
    text: str, pos: int, budget: int, limit: int, blocks: list[_Block]
) -> tuple[int, _Block | None]:
    """Pick the best cut in (pos, pos + budget]; returns (cut, block) when cutting inside code."""
    hi = pos + budget
    best: tuple[int, int] | None = None  # (level, position)

    def offer(level: int, i: int) -> None:
        nonlocal best
        if pos < i <= hi and (best is None or (level, -i) < (best[0], -best[1])):
            best = (level, i)

    window = text[pos : hi + 1]
    for m in re.finditer(r"\n[ \t]*\n", window):
        i = pos + m.start()
        if _block_at(blocks, i) is None:
            offer(_PARAGRAPH, i)
    for b in blocks:
        # The edges of a code block are as good as paragraph breaks.
        if b.start > pos:
            offer(_PARAGRAPH, b.start)
        if b.end < len(text):
            offer(_PARAGRAPH, b.end)
    for m in re.finditer(r"\n", window):
        i = pos + m.start()
        if _block_at(blocks, i) is None:
            offer(_LINE, i)
    for m in _SENTENCE_END.finditer(window):
        i = pos + m.end()
        if _block_at(blocks, i) is None:
            offer(_SENTENCE, i)
    for m in re.finditer(r"\s", window):
        i = pos + m.start()
        if _block_at(blocks, i) is None:
            offer(_WORD, i)

    # A code block too long for any part must be cut inside: between lines, leaving room
    # for the closing fence. Such a cut competes with paragraph breaks, so a long block
    # fills the part it starts in instead of leaving a short part before it.
    code_hi = hi - len(CLOSE_FENCE)
    inside: tuple[int, _Block] | None = None
    for b in blocks:
        if b.end <= pos or b.start >= code_hi:
            continue
        if b.end - b.start + len(CLOSE_FENCE) <= limit and b.start >= pos:
            continue  # it fits whole in a part of its own: keep it whole
        lo = max(pos, b.start + len(b.fence))
        nl = text.rfind("\n", lo + 1, min(code_hi, b.end))
        if nl > pos:
            inside = (nl, b)
        elif best is None and code_hi > max(pos, b.start + len(b.fence)):
            inside = (code_hi, b)  # one line longer than a part: cut it mid-line
    if inside and (best is None or best[0] > _PARAGRAPH or inside[0] > best[1]):
        return inside
    if best is not None:
        return best[1], None
    return hi, None
