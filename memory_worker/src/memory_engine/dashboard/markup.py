"""The one template helper: every value is escaped unless it is already `Html`.

`html("<td>{name}</td>", name=person)` escapes `person`; a fragment made by `html` (or
`join` of fragments) passes through as it is. Nothing else turns text into markup, so a
name or a message holding `<script>` renders as text.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable


class Html(str):
    """Text that is already HTML (made by `html`, `join` or `trusted`): inserted as it is."""

    __slots__ = ()


def esc(value: object) -> Html:
    """`value` as HTML: escaped (quotes too), unless it is `Html` already."""
    if isinstance(value, Html):
        return value
    return Html(_html.escape("" if value is None else str(value), quote=True))


def html(template: str, **values: object) -> Html:
    """`template` (a literal of this package, `{name}` fields) with every value escaped."""
    return Html(template.format(**{k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[Html], sep: str = "") -> Html:
    """Fragments joined (each already HTML; a plain string is escaped)."""
    return Html(esc(sep).join(esc(p) for p in parts))


def trusted(text: str) -> Html:
    """A literal of this package that holds markup and no value (CSS, an SVG made here)."""
    return Html(text)
