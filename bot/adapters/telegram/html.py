"""Telegram formatting: the Markdown models write, as the HTML subset Telegram accepts.

`markdown_to_html` always yields HTML that Telegram parses (every tag closed in order, the
rest escaped); when Telegram refuses a message anyway, the sender resends it as plain text
(`is_format_error`). Answers are split to Telegram's 4096 characters first.

Why our own ~100 lines and not a library: markdown-it-py and telegramify-markdown (which emits
entities) were tried against the property tests. Both follow CommonMark, which drops the
characters of arithmetic models often write ("2*3*4" becomes "2<em>3</em>4" / "234"),
turns "**a *b** c*" into nested emphasis that loses the asterisks, renumbers ordered lists,
and (telegramify) decorates headings and bullets with emoji; entities would also mean a
second sending path beside the plain-text fallback. This converter keeps every character
that is not markup and always yields HTML Telegram parses (tests/adapters/telegram/test_telegram_fake.py).
"""

from __future__ import annotations

import html
import re

from telegram.constants import MessageLimit
from telegram.error import BadRequest, TelegramError

from bot.adapters.split import split_text

TEXT_LIMIT = MessageLimit.MAX_TEXT_LENGTH  # 4096

_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)(?:\n)?```|```(.*?)```", re.S)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_EMPHASIS = [
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S), r"<b>\1</b>"),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)", re.S), r"<b>\1</b>"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S), r"<s>\1</s>"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"<i>\1</i>"),
    (re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"), r"<i>\1</i>"),
    (re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.M), r"<b>\1</b>"),
]
_KEPT = re.compile("\x00(\\d+)\x00")
_TAG = re.compile(r"<(/?)([a-z]+)[^>]*>")


def markdown_to_html(text: str) -> str:
    """Convert the Markdown models write into Telegram HTML (code kept verbatim, the rest escaped).

    Emphasis that would nest badly (`**a *b** c*`) is left as literal characters, so the
    result always parses; Telegram refusing it anyway is handled by the caller.
    """
    text = text.replace("\x00", "")  # the placeholder mark below
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.append(_inline_html(text[pos : m.start()]))
        if m.group(3) is not None:
            out.append(f"<pre>{_esc(m.group(3))}</pre>")
        else:
            lang, body = m.group(1), _esc(m.group(2))
            out.append(
                f'<pre><code class="language-{lang}">{body}</code></pre>' if lang else f"<pre>{body}</pre>"
            )
        pos = m.end()
    out.append(_inline_html(text[pos:]))
    return "".join(out)


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _inline_html(text: str) -> str:
    """Code spans and links are set aside first, so emphasis never reaches into them."""
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return f"\x00{len(kept) - 1}\x00"

    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{_esc(m.group(1))}</code>"), text)
    # A URL holding a code span is no link (the span would become a tag inside href).
    text = _LINK.sub(
        lambda m: (
            m.group(0)
            if "\x00" in m.group(2)
            else keep(f'<a href="{html.escape(m.group(2))}">{_emphasis(m.group(1))}</a>')
        ),
        text,
    )
    text = _emphasis(text)
    while "\x00" in text:  # a link's text may hold a code span: restore until none is left
        text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return text


def _emphasis(text: str) -> str:
    escaped = _esc(text)
    converted = escaped
    for pattern, repl in _EMPHASIS:
        converted = pattern.sub(repl, converted)
    return converted if _well_nested(converted) else escaped


def _well_nested(fragment: str) -> bool:
    """True when the tags in `fragment` open and close in a proper nesting."""
    stack: list[str] = []
    for closing, name in _TAG.findall(fragment):
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def has_formatting(text: str) -> bool:
    """True when the Markdown in `text` would show differently from the plain text."""
    return markdown_to_html(text) != _esc(text.replace("\x00", ""))


def split_for_telegram(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """Split an answer into parts Telegram accepts (at most `limit` characters each)."""
    return split_text(text, limit) or ["…"]


def is_format_error(exc: TelegramError) -> bool:
    """True when Telegram refused a message because of its entities (HTML/Markdown)."""
    text = str(exc).lower()
    return isinstance(exc, BadRequest) and ("parse entities" in text or "can't find end" in text)
