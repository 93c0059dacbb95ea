"""Who a query names: the words of people's names, accents folded, and the aliases the chat learned.

Retrieval's author boost reads these: "what does jose do" names José, "what is moose allergic to"
names Marcus Bell once the chat has called him moose (an alias fact) or he said his name.
"""

from __future__ import annotations

import functools
import unicodedata

from memory_engine.index.text import tokens
from memory_engine.storage import SqlStorage, rows_of


@functools.lru_cache(maxsize=4096)
def name_words(name: str) -> frozenset[str]:
    """The words of a name, case- and accent-folded as queries are ("José" -> "jose")."""
    folded = name.casefold().translate(_LETTERS)
    plain = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    return frozenset(tokens(plain))


_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "ı": "i"})
_ALIASES = (
    "SELECT author, value FROM facts WHERE key IN ('alias', 'name') AND superseded_at IS NULL "
    "AND kind = 'fact'"
)


def aliased(sql: SqlStorage, named: set[str], authors: set[str]) -> set[str]:
    """The candidates' authors the query names by an alias or a stated name."""
    out = set()
    for author, value in rows_of(sql, _ALIASES):
        if author in authors and not named.isdisjoint(name_words(str(value).replace(",", " "))):
            out.add(author)
    return out
