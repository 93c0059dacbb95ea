"""How much work a regular expression does on a text, counted, not timed.

`steps(pattern, text, mode)` runs Python's own parse of the pattern (`re._parser`) through
a small backtracking matcher with the same semantics as `re` (greedy, lazy and possessive
repeats, alternatives in order, groups and back-references, look-arounds, anchors, the
i/m/s/a flags) and counts every node it tries at every position. A pattern whose count
grows with the square of the text (a repeat that rescans what a failed attempt at the
previous position scanned) shows it on texts 4x longer, whatever the machine's speed.

`hostile_texts(pattern)` makes the texts that find such growth: runs of the pattern's own
characters and literals, alone and in pairs, at two lengths.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from re import _constants as c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

MODES = ("search", "match", "fullmatch")
_WORD = {False: re.compile(r"\w"), True: re.compile(r"\w", re.A)}
_CATEGORY = {
    c.CATEGORY_DIGIT: (r"\d", False),
    c.CATEGORY_NOT_DIGIT: (r"\d", True),
    c.CATEGORY_SPACE: (r"\s", False),
    c.CATEGORY_NOT_SPACE: (r"\s", True),
    c.CATEGORY_WORD: (r"\w", False),
    c.CATEGORY_NOT_WORD: (r"\w", True),
}


class TooMuchWork(Exception):
    """The count went past its budget: certainly not linear."""


class _Run:
    def __init__(self, text: str, budget: int) -> None:
        self.text, self.n, self.count, self.budget = text, len(text), 0, budget
        self.groups: dict[int, tuple[int, int]] = {}
        self.taken: dict[tuple[object, str, int], bool] = {}  # (node, character, flags) -> taken

    def one(self, op: Any, av: Any, ch: str, flags: int) -> bool:
        """Does the one-character node (op, av) take `ch`? (remembered: the same questions recur)"""
        key = (("set", id(av)) if isinstance(av, list) else (op, av), ch, flags)
        taken = self.taken.get(key)
        if taken is None:
            taken = self.taken[key] = self._one(op, av, ch, flags)
        return taken

    def tick(self) -> None:
        self.count += 1
        if self.count > self.budget:
            raise TooMuchWork

    def _one(self, op: Any, av: Any, ch: str, flags: int) -> bool:
        fold = flags & re.I
        if op is c.LITERAL:
            return ch == chr(av) or bool(fold and ch.lower() == chr(av).lower())
        if op is c.NOT_LITERAL:
            return not (ch == chr(av) or bool(fold and ch.lower() == chr(av).lower()))
        if op is c.ANY:
            return bool(flags & re.S) or ch != "\n"
        if op is c.CATEGORY:
            return self.category(av, ch, flags)
        if op is c.IN:
            negate, hit = False, False
            for iop, iav in av:
                if iop is c.NEGATE:
                    negate = True
                elif iop is c.LITERAL:
                    hit = hit or ch == chr(iav) or bool(fold and ch.lower() == chr(iav).lower())
                elif iop is c.RANGE:
                    lo, hi = iav
                    chars = {ch, ch.lower(), ch.upper()} if fold else {ch}
                    hit = hit or any(lo <= ord(x) <= hi for x in chars if len(x) == 1)
                elif iop is c.CATEGORY:
                    hit = hit or self.category(iav, ch, flags)
                else:
                    raise NotImplementedError(iop)
            return hit != negate
        raise NotImplementedError(op)

    @staticmethod
    def category(av: Any, ch: str, flags: int) -> bool:
        pattern, negate = _CATEGORY[av]
        return bool(re.match(pattern, ch, flags & re.A)) != negate

    def is_word(self, pos: int, flags: int) -> bool:
        return 0 <= pos < self.n and bool(_WORD[bool(flags & re.A)].match(self.text[pos]))

    def at(self, av: Any, pos: int, flags: int) -> bool:
        text, n = self.text, self.n
        if av is c.AT_BEGINNING:
            return pos == 0 or bool(flags & re.M and text[pos - 1] == "\n")
        if av is c.AT_BEGINNING_STRING:
            return pos == 0
        if av is c.AT_END:
            if flags & re.M:
                return pos == n or text[pos] == "\n"
            return pos == n or (pos == n - 1 and text[pos] == "\n")
        if av is c.AT_END_STRING:
            return pos == n
        if av in (c.AT_BOUNDARY, c.AT_NON_BOUNDARY):
            edge = self.is_word(pos - 1, flags) != self.is_word(pos, flags)
            return edge == (av is c.AT_BOUNDARY)
        raise NotImplementedError(av)

    def seq(self, items: list, i: int, pos: int, flags: int, k: Callable[[int], int | None]) -> int | None:
        if i == len(items):
            return k(pos)
        op, av = items[i]
        return self.node(op, av, pos, flags, lambda p: self.seq(items, i + 1, p, flags, k))

    def node(self, op: Any, av: Any, pos: int, flags: int, k: Callable[[int], int | None]) -> int | None:
        self.tick()
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.CATEGORY):
            if pos < self.n and self.one(op, av, self.text[pos], flags):
                return k(pos + 1)
            return None
        if op is c.AT:
            return k(pos) if self.at(av, pos, flags) else None
        if op is c.SUBPATTERN:
            group, add, remove, sub = av
            inner = (flags | add) & ~remove

            def close(end: int) -> int | None:
                saved = self.groups.get(group) if group else None
                if group:
                    self.groups[group] = (pos, end)
                result = k(end)
                if result is None and group:
                    if saved is None:
                        self.groups.pop(group, None)
                    else:
                        self.groups[group] = saved
                return result

            return self.seq(sub.data, 0, pos, inner, close)
        if op is c.BRANCH:
            for alt in av[1]:
                result = self.seq(alt.data, 0, pos, flags, k)
                if result is not None:
                    return result
            return None
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            return self.repeat(op, av, pos, flags, k)
        if op in (c.ASSERT, c.ASSERT_NOT):
            direction, sub = av
            if direction == 1:
                found = self.seq(sub.data, 0, pos, flags, lambda e: e) is not None
            else:
                width = sub.getwidth()[0]
                start = pos - width
                found = (
                    start >= 0
                    and self.seq(sub.data, 0, start, flags, lambda e: e if e == pos else None) is not None
                )
            return k(pos) if found == (op is c.ASSERT) else None
        if op is c.ATOMIC_GROUP:
            end = self.seq(av.data, 0, pos, flags, lambda e: e)
            return None if end is None else k(end)
        if op is c.GROUPREF:
            span = self.groups.get(av)
            if span is None:
                return None
            said = self.text[span[0] : span[1]]
            if self.text.startswith(said, pos):
                return k(pos + len(said))
            return None
        raise NotImplementedError(op)

    def repeat(self, op: Any, av: Any, pos: int, flags: int, k: Callable[[int], int | None]) -> int | None:
        lo, hi, sub = av
        items = sub.data
        if len(items) == 1 and items[0][0] in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.CATEGORY):
            single_op, single_av = items[0]
            end = pos
            while end - pos < hi and end < self.n:
                self.tick()
                if not self.one(single_op, single_av, self.text[end], flags):
                    break
                end += 1
            if end - pos < lo:
                return None
            if op is c.POSSESSIVE_REPEAT:
                return k(end)
            order = range(end, pos + lo - 1, -1) if op is c.MAX_REPEAT else range(pos + lo, end + 1)
            for p in order:
                self.tick()
                result = k(p)
                if result is not None:
                    return result
            return None
        if op is c.POSSESSIVE_REPEAT:
            count, at = 0, pos
            while count < hi:
                ended = self.seq(items, 0, at, flags, lambda e: e)
                if ended is None or ended == at:
                    break
                count, at = count + 1, ended
            return k(at) if count >= lo else None

        def more(count: int, at: int) -> int | None:
            self.tick()

            def go_on(end: int) -> int | None:
                if end == at and count >= lo:
                    return None  # an empty round: no progress
                return more(count + 1, end)

            if op is c.MIN_REPEAT and count >= lo:
                result = k(at)
                if result is not None:
                    return result
            if count < hi:
                result = self.seq(items, 0, at, flags, go_on)
                if result is not None:
                    return result
            if op is c.MAX_REPEAT and count >= lo:
                return k(at)
            return None

        return more(0, pos)


def steps(pattern: re.Pattern[str], text: str, mode: str = "search", budget: int = 3_000_000) -> int:
    """The nodes tried to run `pattern` over `text`: every match of a search (finditer), or
    one match / fullmatch at the start. TooMuchWork past `budget`."""
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    flags = parsed.state.flags
    run = _Run(text, budget)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 200_000))
    try:
        if mode == "search":
            start = 0
            while start <= len(text):
                run.groups = {}
                end = run.seq(parsed.data, 0, start, flags, lambda e: e)
                start = start + 1 if end is None or end == start else end
        else:
            full = mode == "fullmatch"
            run.seq(parsed.data, 0, 0, flags, lambda e: e if not full or e == len(text) else None)
    finally:
        sys.setrecursionlimit(limit)
    return run.count


def _units(pattern: re.Pattern[str]) -> tuple[list[str], list[str]]:
    """The characters and the literal strings of a pattern (what its hostile texts are made of)."""
    chars: dict[str, None] = dict.fromkeys(["a", " ", "\n", "1", ".", "(", "-", "A", "é"])
    literals: dict[str, None] = {}

    def walk(items: Any) -> None:
        run = ""
        for op, av in items:
            if op is c.LITERAL:
                chars[chr(av)] = None
                run += chr(av)
                continue
            if len(run) > 1:
                literals[run] = None
            run = ""
            if op is c.IN:
                for iop, iav in av:
                    if iop is c.LITERAL:
                        chars[chr(iav)] = None
                    elif iop is c.RANGE:
                        chars[chr(iav[0])] = None
            elif op is c.SUBPATTERN:
                walk(av[3].data)
            elif op is c.BRANCH:
                for alt in av[1]:
                    walk(alt.data)
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                walk(av[2].data)
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1].data)
            elif op is c.ATOMIC_GROUP:
                walk(av.data)
        if len(run) > 1:
            literals[run] = None

    walk(sre_parse.parse(pattern.pattern, pattern.flags).data)
    return list(chars)[:16], list(literals)[:8]


def hostile_texts(pattern: re.Pattern[str], size: int) -> Iterator[tuple[str, str]]:
    """(name, text of about `size` characters) for each family of hostile text."""
    chars, literals = _units(pattern)
    units = chars + literals
    seen: set[str] = set()
    for u in units:
        for v in ["", *chars[:6]]:
            unit = u + v
            if unit in seen:
                continue
            seen.add(unit)
            yield repr(unit), (unit * (size // len(unit) + 1))[:size]
    for lit in literals:
        for ch in chars[:6]:
            yield f"{lit!r}+{ch!r}*n", lit + ch * (size - len(lit))
