"""Message text as the fake Bot API reads it: HTML, Markdown and MarkdownV2 to plain text, entities."""

from __future__ import annotations

import html
import re

from tests.fakes.telegram_errors import ApiError, bad


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _byte_offset(text: str, i: int) -> int:
    return len(text[:i].encode("utf-8"))


_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[^<>]*?)?)\s*(/?)>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});")


def parse_html(text: str) -> str:
    """Parse Telegram HTML into plain text, or raise like the server ("can't parse entities")."""
    out: list[str] = []
    stack: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "<":
            m = _TAG.match(text, i)
            if not m:
                raise bad(f"can't parse entities: Unclosed start tag at byte offset {_byte_offset(text, i)}")
            closing, name, attrs = m.group(1), m.group(2).lower(), m.group(3)
            if name not in _HTML_TAGS:
                kind = "end" if closing else "start"
                raise bad(
                    f'can\'t parse entities: Unsupported {kind} tag "{name}"'
                    f" at byte offset {_byte_offset(text, i)}"
                )
            if closing:
                if not stack:
                    raise bad(
                        f"can't parse entities: Unexpected end tag at byte offset {_byte_offset(text, i)}"
                    )
                expected, _ = stack.pop()
                if expected != name:
                    raise bad(
                        f"can't parse entities: Unmatched end tag at byte offset {_byte_offset(text, i)}, "
                        f'expected "</{expected}>", found "</{name}>"'
                    )
            else:
                if name == "a" and "href" not in attrs:
                    pass  # the real server accepts <a> without href and drops the link
                if name == "span" and "tg-spoiler" not in attrs:
                    raise bad(
                        f'can\'t parse entities: Tag "span" must have class "tg-spoiler"'
                        f" at byte offset {_byte_offset(text, i)}"
                    )
                stack.append((name, i))
            i = m.end()
        elif c == "&":
            m = _ENTITY.match(text, i)
            if m:
                out.append(html.unescape(m.group(0)))
                i = m.end()
            else:
                out.append(c)
                i += 1
        elif c == ">":
            out.append(c)  # tolerated by the real server
            i += 1
        else:
            out.append(c)
            i += 1
    if stack:
        name, _ = stack[-1]
        raise bad(f"can't parse entities: Can't find end tag corresponding to start tag \"{name}\"")
    return "".join(out)


def _unclosed(text: str, i: int) -> ApiError:
    """Telegram's refusal of a legacy Markdown entity opened at `i` and never closed."""
    return bad(
        f"can't parse entities: Can't find end of the entity starting at byte offset {_byte_offset(text, i)}"
    )


def parse_markdown(text: str) -> str:
    """Parse legacy Markdown (*bold* _italic_ `code` ```pre``` [text](url)) into plain text."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in "_*`[":
            out.append(text[i + 1])
            i += 2
        elif text.startswith("```", i):
            end = text.find("```", i + 3)
            if end < 0:
                raise _unclosed(text, i)
            body = text[i + 3 : end]
            first, nl, rest = body.partition("\n")
            out.append(rest if nl and first and " " not in first else body)
            i = end + 3
        elif c in "*_`":
            end = text.find(c, i + 1)
            if end < 0:
                raise _unclosed(text, i)
            out.append(text[i + 1 : end])
            i = end + 1
        elif c == "[":
            m = re.compile(r"\[([^\]]*)\]\(([^)]*)\)").match(text, i)
            if not m:
                raise _unclosed(text, i)
            out.append(m.group(1))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


_V2_RESERVED = set("_*[]()~`>#+-=|{}.!")


def parse_markdown_v2(text: str) -> str:
    """Parse MarkdownV2 into plain text; unescaped reserved characters are refused as upstream."""
    out: list[str] = []
    open_marks: list[tuple[str, int]] = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\\":
            if i + 1 < n and ord(text[i + 1]) <= 126:
                out.append(text[i + 1])
                i += 2
                line_start = False
                continue
            out.append(c)
            i += 1
            continue
        if text.startswith("```", i):
            end = text.find("```", i + 3)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of Pre entity"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            body = text[i + 3 : end]
            first, nl, rest = body.partition("\n")
            out.append(rest if nl and first and " " not in first else body)
            i = end + 3
            continue
        if c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise bad(
                    f"can't parse entities: Can't find end of Code entity"
                    f" at byte offset {_byte_offset(text, i)}"
                )
            out.append(text[i + 1 : end])
            i = end + 1
            continue
        if c == ">" and line_start:
            i += 1
            continue
        mark = (
            "__"
            if text.startswith("__", i)
            else "||"
            if text.startswith("||", i)
            else c
            if c in "*_~"
            else None
        )
        if mark:
            if open_marks and open_marks[-1][0] == mark:
                open_marks.pop()
            else:
                open_marks.append((mark, i))
            i += len(mark)
            line_start = False
            continue
        if c == "[":
            m = re.compile(r"\[((?:\\.|[^\]\\])*)\]\(((?:\\.|[^)\\])*)\)").match(text, i)
            if m:
                out.append(parse_markdown_v2(m.group(1)))
                i = m.end()
                continue
        if c in _V2_RESERVED:
            raise bad(
                f"can't parse entities: Character '{c}' is reserved"
                f" and must be escaped with the preceding '\\'"
            )
        out.append(c)
        line_start = c == "\n"
        i += 1
    if open_marks:
        _, at = open_marks[-1]
        raise bad(
            f"can't parse entities: Can't find end of the entity starting"
            f" at byte offset {_byte_offset(text, at)}"
        )
    return "".join(out)


def plain_text(text: str, parse_mode: str | None) -> str:
    """The text the server keeps after entity parsing for `parse_mode`."""
    if not parse_mode:
        return text
    mode = parse_mode.lower()
    if mode == "html":
        return parse_html(text)
    if mode == "markdown":
        return parse_markdown(text)
    if mode == "markdownv2":
        return parse_markdown_v2(text)
    raise bad("unsupported parse_mode")


def detect_entities(text: str) -> list[dict]:
    """Entities the real server computes for a user's message: bot commands and @mentions."""
    entities = []
    for m in re.finditer(
        r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![\w/])|(?<!\w)@[A-Za-z0-9_]{3,32}", text
    ):
        kind = "bot_command" if m.group(0).startswith("/") else "mention"
        entities.append(
            {"type": kind, "offset": _utf16_len(text[: m.start()]), "length": _utf16_len(m.group(0))}
        )
    return entities
