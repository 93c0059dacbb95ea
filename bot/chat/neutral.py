"""Other people's text made harmless where it is shown or sent: fence markers, names, terminals.

- `defang`: text that looks like the memory fence's markers (MEMORY-BEGIN / MEMORY-END),
  also spelled with Cyrillic or Greek look-alikes, fullwidth or styled letters, zero-width
  characters or combining marks between the letters, is replaced, so stored text cannot
  close the fence and speak as instructions; and the chat templates' control tokens
  (`<|im_start|>`, `</s>`, `[INST]`, ...) get look-alike brackets, so a tokenizer reads words.
- `one_line`: a person's name as one line without control or format characters (a name is
  put in front of their words in groups, and in /why and /facts).
- `printable`: text for a terminal, without escape sequences (a window title, a cleared
  screen) or other control characters.
"""

from __future__ import annotations

import re
import unicodedata

MARKER_REMOVED = "[memory marker removed]"
# Letters a reader takes for the Latin ones of MEMORY, BEGIN and END (Unicode's confusables,
# the part that matters here); NFKC already folds fullwidth and mathematical letters.
_LOOKS = str.maketrans(
    {
        "\u041c": "m", "\u043c": "m", "\u039c": "m", "\u03bc": "m",  # М м Μ μ
        "\u0415": "e", "\u0435": "e", "\u0395": "e", "\u03b5": "e", "\u0401": "e", "\u0451": "e",
        "\u041e": "o", "\u043e": "o", "\u039f": "o", "\u03bf": "o", "0": "o", "\u0555": "o", "\u0585": "o",
        "\u0423": "y", "\u0443": "y", "\u03a5": "y", "\u04ae": "y", "\u04af": "y", "\u03b3": "y",
        "\u0412": "b", "\u0392": "b", "\u044c": "b", "\u13f4": "b",
        "\u0406": "i", "\u0456": "i", "\u0399": "i", "\u03b9": "i", "1": "i", "l": "i", "|": "i",
        "\u039d": "n", "\u0578": "n", "\u0501": "d", "\u0433": "r", "\u0262": "g", "\u0261": "g",
    }
)  # fmt: skip
_MARKER = re.compile(r"memory[\s\-_.:=~\u2010-\u2015]*(?:begin|end)(?![a-z])")
_ASCII_MARKER = re.compile(r"mem[o0]ry[\s\-_.:=~]*(?:beg[il1|]n|end)(?![a-z])", re.I)
_BLANKS = re.compile(r"[\t\n\r\v\f\x1c-\x1f\x85\u2028\u2029]")
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clearing the screen
    r"|\x9b[0-?]*[ -/]*[@-~]"  # the same, as one C1 character
    r"|[\x1b\x9d][\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC (window title), DCS, ...
    r"|\x1b[ -/]*[0-~]"  # any other escape
)
# The control tokens of the common chat templates (ChatML, Llama 2 and 3, Mistral, Gemma,
# DeepSeek's fullwidth bars); each part is bounded, so the scan stays linear.
_CONTROL_TOKEN = re.compile(
    r"<[|\uff5c][^<>|\uff5c\n]{0,64}[|\uff5c]>"
    r"|</?s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|<(?:bos|eos|pad|unk)>",
    re.I,
)
_TOKEN_LOOKS = str.maketrans(
    {"<": "\u2039", ">": "\u203a", "|": "\u00a6", "\uff5c": "\u00a6", "[": "\u27e6", "]": "\u27e7"}
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # not \t \n


def defang(text: str) -> str:
    """`text` with everything that reads as a memory fence marker replaced, and every chat
    template control token given look-alike brackets."""
    return _CONTROL_TOKEN.sub(lambda m: m.group().translate(_TOKEN_LOOKS), _defang_markers(text))


def _defang_markers(text: str) -> str:
    if text.isascii():
        return _ASCII_MARKER.sub(MARKER_REMOVED, text)
    # A skeleton of what a reader sees, each of its characters mapped to where it came from.
    seen: list[str] = []
    where: list[int] = []
    for i, c in enumerate(text):
        if unicodedata.category(c) in ("Cf", "Mn", "Me"):
            continue  # zero-width and combining: invisible between the letters
        for d in unicodedata.normalize("NFKC", c):
            if unicodedata.category(d) in ("Mn", "Me"):
                continue
            seen.append(d.translate(_LOOKS).lower()[:1] or d)
            where.append(i)
    skeleton = "".join(seen)
    spans = [(where[m.start()], where[m.end() - 1] + 1) for m in _MARKER.finditer(skeleton)]
    for start, end in reversed(spans):
        text = text[:start] + MARKER_REMOVED + text[end:]
    return text


def one_line(name: str, max_chars: int = 128) -> str:
    """A name as one line: line breaks and tabs become spaces, control and format characters
    go (the zero-width joiner of emoji stays), runs of spaces become one."""
    name = _BLANKS.sub(" ", name)
    name = "".join(
        c for c in name if c == "\u200d" or unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp")
    )
    return " ".join(name.split())[:max_chars]


def printable(text: str) -> str:
    """`text` for a terminal: escape sequences and control characters removed (newlines and
    tabs stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))
