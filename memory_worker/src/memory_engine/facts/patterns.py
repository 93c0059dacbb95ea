"""Rule patterns that compile on first use and know their gates (the literals every match holds).

A host imports the fact rules at start and most of them are never needed on a given message:
compiling about a hundred patterns then costs a noticeable part of the start time, so a
pattern here is compiled when first used.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "LazyRe",
    "LiteralIndex",
    "Rx",
    "alternation",
    "gate_search",
    "has_digit",
    "lazy",
    "required_literals",
    "required_words",
    "rx",
    "word_runs",
]


class LazyRe:
    """A case-insensitive pattern, compiled on first use (a host starts without compiling it).

    It knows the literals its every match holds (`literals`): a text without them needs no search.

    The first call of a method compiles the pattern and binds the compiled pattern's methods to
    this object, so later calls go straight to them (no Python frame of ours in between).
    """

    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    finditer: Callable[..., Iterator[re.Match[str]]]
    findall: Callable[..., list[Any]]
    split: Callable[..., list[str]]
    sub: Callable[..., str]

    def __init__(self, source: str, flags: int = re.I, fast: str | None = None) -> None:
        # `fast`: the same pattern written to run faster (see `alternation`), what is compiled;
        # the gates are read from `source`
        self.source, self.flags, self.fast = source, flags, fast

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled once, when first needed)."""
        compiled: re.Pattern[str] | None = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self.__dict__["_compiled"] = re.compile(self.fast or self.source, self.flags)
            for name in _METHODS:
                self.__dict__[name] = getattr(compiled, name)
        return compiled

    def __getattr__(self, name: str) -> Any:
        if name in _METHODS:
            return getattr(self.compiled, name)
        raise AttributeError(name)

    @functools.cached_property
    def literals(self) -> tuple[str, ...] | None:
        """Lower-case strings one of which every match contains; None when none can be told."""
        return required_literals(self.source, self.flags)

    @functools.cached_property
    def literal_set(self) -> frozenset[str] | None:
        """`literals` as a set (None when none can be told); cached on the object, read per call."""
        gate = self.literals
        return None if gate is None else frozenset(gate)

    @functools.cached_property
    def words(self) -> frozenset[str]:
        """Those of `literals` that every match holds as a whole word (see required_words)."""
        return required_words(self.source, self.flags) if self.literals else frozenset()

    @functools.cached_property
    def fragments(self) -> frozenset[str]:
        """Those of `literals` that may be part of a longer word (tested with `in`)."""
        return frozenset(self.literals or ()) - self.words

    def gate_passes(self, low: str) -> bool:
        """True when folded text `low` holds one of the literals (always, without literals)."""
        search = self.__dict__.get("_gate")
        if search is None:
            gate = self.literals
            search = self.__dict__["_gate"] = gate_search(gate) if gate else _ALWAYS
        return search(low) is not None


_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "split", "sub")


class Rx(LazyRe):
    """A rule's trigger pattern: lazy, and knowing the literals its every match holds (its gate)."""


def _always(_: str) -> object:
    return True


_ALWAYS = _always


def gate_search(literals: tuple[str, ...]) -> Callable[[str], object]:
    """A test for any of `literals` in folded text: True, or None (a loop of `in`: the fastest here)."""

    def search(low: str) -> object:
        for literal in literals:
            if literal in low:
                return True
        return None

    return search


class LiteralIndex:
    """Which of many literals a folded text holds, told from its words (the same answer as `in`).

    Testing each rule's gate with its own loop of `in` scans a clause once per literal (about
    150 scans). A literal of word characters only occurs in a text exactly when it occurs inside
    one of its runs of \\w, and chat reuses few words: what each word holds is remembered, so a
    clause costs a look-up per word plus an `in` for each literal with a space or a quote.
    """

    MAX_WORDS = 50_000  # remembered words (a host reads chat for months: bounded)

    def __init__(
        self,
        literals: frozenset[str],
        bits: dict[str, int] | None = None,
        word_bits: dict[str, int] | None = None,
    ) -> None:
        self.literals = literals
        self._wordy = tuple(sorted(w for w in literals if _WORDY(w)))
        self._other = tuple(sorted(w for w in literals if not _WORDY(w)))
        # A word new to `scan` is searched for the wordy literals by the two letters each opens
        # with, at each place in the word (~1 us), not with an `in` per literal (~100 of them).
        self._by_pair: dict[str, list[str]] = {}
        for w in self._wordy:
            if len(w) >= 2:
                self._by_pair.setdefault(w[:2], []).append(w)
        self._single = tuple(w for w in self._wordy if len(w) < 2)
        # `scan`'s marks: a literal's bits count where the text holds it, a word's where it is a word
        self._bits, self._word_bits = bits or {}, word_bits or {}
        self._runs: dict[str, tuple[frozenset[str], int]] = {}

    def _held(self, run: str) -> frozenset[str]:
        """The wordy literals that occur in `run` (the same as an `in` for each)."""
        found = {w for w in self._single if w in run}
        pairs = self._by_pair
        for at in range(len(run) - 1):
            for w in pairs.get(run[at : at + 2], ()):
                if run.startswith(w, at):
                    found.add(w)
        return frozenset(found) or _NOTHING

    def scan(self, low: str, runs: list[str]) -> tuple[frozenset[str], int]:
        """The literals in folded text `low`, whose runs of \\w (re `\\w+`) are `runs` (the same
        answer as `in`), and the OR of the bits of those literals and of the words in `runs`
        (one look-up per word: what each word holds and marks is remembered)."""
        cache = self._runs
        out: set[str] = set()
        mask = 0
        for run in runs:
            info = cache.get(run)
            if info is None:
                if len(cache) >= self.MAX_WORDS:
                    cache.clear()
                held = self._held(run)
                marks = self._word_bits.get(run, 0)
                for literal in held:
                    marks |= self._bits.get(literal, 0)
                info = cache[run] = (held, marks)
            if info[0]:
                out |= info[0]
            mask |= info[1]
        for literal in self._other:
            if literal in low:
                out.add(literal)
                mask |= self._bits.get(literal, 0)
        return frozenset(out), mask


_WORDY = re.compile(r"\w+").fullmatch
_DIGIT = re.compile(r"\d")
_DIGIT_MARK = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))  # ASCII digits to "0", the rest to " "


_RUNS = re.compile(r"\w+").findall
# For ASCII text re's \w is [A-Za-z0-9_]: its runs are what is left after every other character
# becomes a space (str.translate has a fast path for ASCII: ~2.5x faster than findall).
_WORD_CHARS = str.maketrans({c: (chr(c) if chr(c).isalnum() or c == 95 else " ") for c in range(128)})
_last_runs: tuple[str, list[str]] = ("", [])


def word_runs(text: str) -> list[str]:
    """re.findall(r"\\w+", text) (the last text's answer is remembered: callers in a row ask for it)."""
    global _last_runs
    last, runs = _last_runs  # one tuple: a thread reads a consistent pair
    if last == text:
        return runs
    runs = text.translate(_WORD_CHARS).split() if text.isascii() else _RUNS(text)
    _last_runs = (text, runs)
    return runs


def has_digit(text: str) -> bool:
    """True when `text` holds a character re's \\d matches (for ASCII, one translate: no scan in re)."""
    if text.isascii():
        return b"0" in text.encode().translate(_DIGIT_MARK)
    return _DIGIT.search(text) is not None


_NOTHING: frozenset[str] = frozenset()


_CHANCE = (1.0, 1.0, 1.0, 0.3, 0.1, 0.03)  # how often a literal of this length is there by chance


def lazy(pattern: str, flags: int = re.I, fast: str | None = None) -> LazyRe:
    """A helper pattern (not a trigger: it gates nothing), compiled on first use."""
    return LazyRe(pattern, flags, fast)


def rx(pattern: str, first: str = "", fast: str | None = None) -> Rx:
    """A case-insensitive rule pattern, compiled lazily.

    `first`: the letters every match starts with; a lookahead for them lets the engine pass over
    the other positions at once (about twice as fast, the same matches). `fast`: the same
    pattern written to run faster (compiled instead of `pattern`, whose gates still count).
    """
    if first:
        return Rx(f"(?=[{first}])(?:{pattern})", fast=f"(?=[{first}])(?:{fast})" if fast else None)
    return Rx(pattern, fast=fast)


def alternation(words: list[str]) -> str:
    """A regex that matches as "|".join(map(re.escape, words)) does, the same alternative first,
    written as a tree of shared prefixes: re tries alternatives one by one, so a list of 200
    words costs 200 tries at every place; the tree costs a few.

    Two alternatives may only trade places when they can never both match at one place: the
    words must be lower-case (their first characters then differ under re.I too, as for any
    pattern of them), and an empty alternative (a word that ends here) keeps its place among
    the others, which are grouped by their first character only between two empty ones.
    """
    if any(w != w.lower() for w in words):
        raise ValueError("alternation() takes lower-case words")
    branches: list[str] = []
    group: dict[str, list[str]] = {}

    def close() -> None:
        for first, rests in group.items():
            inner = alternation(rests)
            branches.append(re.escape(first) + (f"(?:{inner})" if "|" in inner else inner))
        group.clear()

    for word in words:
        if not word:
            close()
            branches.append("")
        else:
            group.setdefault(word[0], []).append(word[1:])
    close()
    return "|".join(branches)


def required_literals(source: str, flags: int = re.I) -> tuple[str, ...] | None:
    """Strings one of which every match of `source` contains (lower-cased), or None.

    Read from the parsed pattern: a literal run in a sequence is needed by every match; of an
    alternation, one of each branch's; a repeat needs its body only when it must occur once.
    Of the sets a sequence offers, the one whose shortest string is longest is the sharpest gate.
    """
    found = _parsed_needs(source, flags)
    return tuple(sorted({w for w, _ in found})) if found else None


def required_words(source: str, flags: int = re.I) -> frozenset[str]:
    """Those of `required_literals` that every match holds as a whole word (a run of \\w).

    A literal of word characters is a whole word where the pattern puts, on each side of it, what
    cannot be a word character: a space, punctuation, \\b, ^ or $, a lookbehind (?<![\\w...]).
    """
    found = _parsed_needs(source, flags) or frozenset()
    return frozenset(w for w, whole in found if whole) - {w for w, whole in found if not whole}


def _parsed_needs(source: str, flags: int) -> frozenset[tuple[str, bool]] | None:
    try:
        from re import _parser as parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover (Python < 3.11)
        import sre_parse as parser
    return _needs(parser.parse(source, flags), parser, False, False)


def _is_word(text: str) -> bool:
    return bool(re.fullmatch(r"\w+", text))


def _gap(item: Any, side: int) -> bool:
    """True when `item` can only match what is no word character (or asserts so) on `side`."""
    op, arg = item
    name = str(op)
    if name == "LITERAL":
        return not _is_word(chr(arg))
    if name == "IN":
        return all(
            (str(o) == "CATEGORY" and str(a) == "CATEGORY_SPACE")
            or (str(o) == "LITERAL" and not _is_word(chr(a)))
            for o, a in arg
        )
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return arg[0] >= 1 and len(arg[2]) == 1 and _gap(arg[2][0], side)
    if name == "AT":
        return str(arg) in ("AT_BOUNDARY", "AT_BEGINNING", "AT_BEGINNING_STRING", "AT_END", "AT_END_STRING")
    if name == "ASSERT_NOT":  # (?<![\w']) before, (?![\w]) after: no word character there
        direction, body = arg
        body = list(body)
        return (
            direction == side
            and len(body) == 1
            and str(body[0][0]) == "IN"
            and any(str(o) == "CATEGORY" and str(a) == "CATEGORY_WORD" for o, a in body[0][1])
            and not any(str(o) == "NEGATE" for o, _ in body[0][1])
        )
    return False


def _optional_gap(item: Any, side: int) -> bool:
    """True for a part that may match nothing and, when it matches, ends in a gap on `side`.

    `side` 1: its last character ((?:really\\s+)* before "love"); -1: its first one.
    """
    op, arg = item
    if str(op) not in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") or arg[0] != 0:
        return False
    return _ends_in_gap(list(arg[2]), side)


def _ends_in_gap(seq: list[Any], side: int) -> bool:
    """True when every match of a sequence ends (`side` 1) or starts (-1) with a non-word character."""
    if not seq:
        return False
    edge = seq[-1] if side == 1 else seq[0]
    op, arg = edge
    if str(op) == "SUBPATTERN":
        return _ends_in_gap(list(arg[-1]), side)
    if str(op) == "BRANCH":
        return all(_ends_in_gap(list(b), side) for b in arg[1])
    return str(op) != "AT" and not str(op).startswith("ASSERT") and _gap(edge, side)


def _side_gap(seq: list[Any], at: int, step: int, outer: bool) -> bool:
    """Whether the item next to position `at` (step -1: before, 1: after) is a sure gap."""
    i = at + step
    # zero-width, or an optional part that ends (toward us) in a gap: look past it
    while 0 <= i < len(seq) and (str(seq[i][0]) == "ASSERT" or _optional_gap(seq[i], -step)):
        i += step
    if not 0 <= i < len(seq):
        return outer
    return _gap(seq[i], step)


def _needs(items: Any, p: Any, left: bool, right: bool) -> frozenset[tuple[str, bool]] | None:
    """The literal set one of which every match of a parsed sequence holds (see required_literals),
    each with whether it is a whole word there (`left`, `right`: a sure gap around the sequence)."""
    options: list[frozenset[tuple[str, bool]]] = []
    seq = list(items)
    start = -1
    for i, (op, arg) in enumerate([*seq, (None, None)]):
        name = str(op)
        if name == "LITERAL":
            start = i if start < 0 else start
            continue
        if start >= 0:
            word = "".join(chr(a) for _, a in seq[start:i]).lower()
            whole = _is_word(word) and _side_gap(seq, start, -1, left) and _side_gap(seq, i - 1, 1, right)
            options.append(frozenset([(word, whole)]))
            start = -1
        if op is None:
            break
        gl, gr = _side_gap(seq, i, -1, left), _side_gap(seq, i, 1, right)
        if name == "SUBPATTERN":
            inner = _needs(arg[-1], p, gl, gr)
        elif name == "BRANCH":
            branches = [_needs(b, p, gl, gr) for b in arg[1]]
            inner = None if any(b is None for b in branches) else frozenset().union(*branches)  # type: ignore[arg-type]
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and arg[0] >= 1:
            inner = _needs(arg[2], p, False, False)  # a repeat's body sits beside itself
        elif name == "ATOMIC_GROUP":
            inner = _needs(arg, p, gl, gr)
        else:
            inner = None  # classes, anchors, lookarounds, optional parts: nothing sure
        if inner:
            options.append(inner)
    if not options:
        return None
    # The sharpest gate: the literals least likely to be in a clause by chance (a short one is in
    # many words: "in" in "thinking"), none a single letter.
    return min(options, key=lambda o: _chance({w for w, _ in o}))


def _chance(words: set[str]) -> tuple[bool, float]:
    return (min(len(w) for w in words) < 2, sum(_CHANCE[min(len(w), 5)] for w in words))
