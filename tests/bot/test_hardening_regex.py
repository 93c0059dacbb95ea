"""Issue 40, probe item 5: no regular expression that sees user or imported text does work
that grows faster than the text.

Every pattern of bot/ and the memory engine (compiled at module level, or written inline in
a call to `re`) is run by a step-counting matcher with `re`'s semantics
(tests/support/regex_steps.py) over hostile texts made of its own characters and literals,
at two lengths, 4x apart. Linear work counts about 4x the steps; the tier scorer's
`\\w+\\(\\)` counted 16x (quadratic), and a search with `(.+?)...(.+)` more. Nothing is timed.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import bot
import memory_engine
from tests.support.regex_steps import TooMuchWork, hostile_texts, steps

ROOTS = (Path(bot.__file__).parent, Path(memory_engine.__file__).parent)
SHORT, LONG = 48, 192  # 4x apart
LINEAR = 6.0  # linear work is ~4x; quadratic is ~16x
CALLS = {"search": "search", "match": "match", "fullmatch": "fullmatch", "sub": "search",
         "subn": "search", "findall": "search", "finditer": "search", "split": "search"}  # fmt: skip
# (an inline re.compile is a module's pattern, found with its module's other patterns)


def _module_patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for package in (bot, memory_engine):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                module = importlib.import_module(info.name)
            except Exception:  # an optional platform module: its patterns are found inline below
                continue
            for name, value in vars(module).items():
                values = value if isinstance(value, (tuple, list)) else [value]
                for i, v in enumerate(values):
                    if isinstance(v, re.Pattern) and isinstance(v.pattern, str):
                        found.setdefault(f"{info.name}.{name}[{i}]", v)
    return found


def _flags(node: ast.expr | None) -> int:
    """The value of a flags argument written with re.I, re.M, ... (0 when not plain)."""
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        return int(getattr(re, node.attr, 0))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    return 0


def _inline_patterns() -> dict[str, tuple[re.Pattern[str], str]]:
    found: dict[str, tuple[re.Pattern[str], str]] = {}
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                f = node.func
                if not (isinstance(f.value, ast.Name) and f.value.id == "re" and f.attr in CALLS):
                    continue
                if (
                    not node.args
                    or not isinstance(node.args[0], ast.Constant)
                    or not isinstance(node.args[0].value, str)
                ):
                    continue
                flag_at = {"sub": 4, "subn": 4, "split": 3}.get(f.attr, 2)
                given = node.args[flag_at] if len(node.args) > flag_at else None
                for kw in node.keywords:
                    if kw.arg == "flags":
                        given = kw.value
                pattern = re.compile(node.args[0].value, _flags(given))
                found[f"{path.relative_to(root.parent)}:{node.lineno}"] = (pattern, CALLS[f.attr])
    return found


def _modes() -> dict[str, str]:
    """A module-level pattern's name -> "match" or "fullmatch" when that is its only use."""
    uses: dict[str, set[str]] = {}
    for root in ROOTS:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    uses.setdefault(node.value.id, set()).add(node.attr)
    modes = {}
    for name, used in uses.items():
        calls = used & {"search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
        if calls in ({"match"}, {"fullmatch"}):
            modes[name] = calls.pop()
    return modes


# Patterns whose text is bounded where they run: the worst case at that bound is small.
BOUNDED = {
    "bot.adapters.telegram.html.": "one Telegram part, at most 4,096 characters (split_for_telegram)",
    "bot/adapters/telegram/html.py": "one Telegram part, at most 4,096 characters (split_for_telegram)",
    "memory_engine.imports.hold._MESSAGE_ID": "a message id, at most 256 characters (MAX_FIELD_CHARS)",
    "memory_engine.api.http.CHAT_KEY": "anchored at both ends, reads at most 129 characters",
    "memory_engine.api.http_types.CHAT_KEY": "anchored at both ends, reads at most 129 characters",
}


def _cases() -> dict[str, tuple[re.Pattern[str], str]]:
    cases: dict[str, tuple[re.Pattern[str], str]] = {}
    seen: set[tuple[str, int, str]] = set()
    modes = _modes()
    module = {
        name: (p, modes.get(name.rsplit(".", 1)[1].split("[")[0], "search"))
        for name, p in _module_patterns().items()
    }
    both = {
        name: case
        for name, case in (module | _inline_patterns()).items()
        if not any(name.startswith(b) for b in BOUNDED)
    }
    for name, (pattern, mode) in both.items():
        if (pattern.pattern, pattern.flags, mode) not in seen:
            seen.add((pattern.pattern, pattern.flags, mode))
            cases[name] = (pattern, mode)
    return cases


CASES = _cases()


def test_the_audit_sees_the_patterns_that_read_user_text():
    names = " ".join(CASES)
    for where in ("tiers._CODE", "neutral._ESCAPES", "secrets.PATTERNS", "when.", "facts.", "catchup"):
        assert where in names, where
    assert len(CASES) > 90


@pytest.mark.parametrize("name", sorted(CASES))
def test_work_grows_linearly_with_the_text(name):
    pattern, mode = CASES[name]
    worst = ("", 0.0)
    longs = dict(hostile_texts(pattern, LONG))
    for family, short in hostile_texts(pattern, SHORT):
        long = longs[family]
        try:
            ratio = steps(pattern, long, mode) / max(1, steps(pattern, short, mode))
        except TooMuchWork:
            ratio = float("inf")
        if ratio > worst[1]:
            worst = (family, ratio)
    assert worst[1] <= LINEAR, (
        f"{name} {pattern.pattern!r} ({mode}): {worst[1]:.1f}x the work on {worst[0]} x4"
    )


def test_the_tier_scorer_reads_a_bounded_part_of_a_long_message():
    from bot.chat.models.tiers import SCORED_CHARS, ChoiceRules, score_message

    rules = ChoiceRules()
    late = "word " * (SCORED_CHARS // 5) + "def f(): return x()"
    _, reasons = score_message(late, (), 0, rules)
    assert "code" not in reasons  # past the part read
    assert "very long message" in reasons  # the length still counts, whole
    _, early = score_message("def f(): return x()\n" + "word " * 300_000, (), 0, rules)  # 1.5 MB
    assert "code" in early
