"""Text handling for search: tokens, stopwords, and FTS5 queries built from quoted tokens only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_engine.index.word_forms import forms_of

# Letters and digits of any script; everything else (quotes, operators, emoji) separates
# tokens. Because a token never holds a quote or an operator, a query built from quoted
# tokens can never be FTS5 syntax, whatever the user typed.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

# Words that carry no topic: question words, pronouns, auxiliaries, chat filler.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
    is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
    or other ought our ours ourselves out over own same shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's
    these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
    who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
    yourself yourselves s t d ll m re ve don didn doesn isn wasn weren hasn haven hadn won wouldn
    shouldn couldn also just really yeah yes oh ok okay hey hi hello thanks thank lol haha hmm um uh
    get got getting go going gone went will shall may might must like well much many one ones thing
    things something anything everything kind sort lot lots way
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# A long message used as a query keeps its first 16 distinct content words: enough to find
# its topic, and each one costs a document-frequency count per search (retrieval._select).
MAX_QUERY_TERMS = 16

MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH_ABBREVIATIONS = {m[:3]: m for m in MONTHS} | {"sept": "september"}
# Words before "may" that make it the month ("in May", "since May", "last May"), not the verb.
_MONTH_CUES = frozenset(
    ["in", "of", "since", "until", "till", "during", "last", "next", "this", "early", "late", "mid",
     "from", "by", "before", "after", "throughout", "around", "between", "about", "each", "every"]
)  # fmt: skip
_LISTING = frozenset(["and", "or", "to", "through"])
_MONTH_WORDS = frozenset(MONTHS).union(_MONTH_ABBREVIATIONS)  # the tokens _month_at can take for one


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens of any script, in order."""
    if text.isascii():  # most text: the same tokens, ~5x faster than the regex
        return text.lower().translate(_ASCII_GAPS).split()
    return [t.lower() for t in _TOKEN.findall(text)]


# For ASCII text _TOKEN matches runs of [A-Za-z0-9]: every other character made a space, split()
# cuts the same runs.
_ASCII_GAPS = str.maketrans({c: " " for c in range(128) if not chr(c).isalnum()})


def _month_at(toks: list[str], i: int) -> str | None:
    """The month that toks[i] names in its place, or None ("may I", "a mar")."""
    tok = toks[i]
    month = tok if tok in MONTHS else _MONTH_ABBREVIATIONS.get(tok)
    if month is None:
        return None
    if tok == month and tok != "may":
        return month  # a full name that is not a stopword: a month wherever it is
    before = toks[i - 1] if i else ""
    after = toks[i + 1] if i + 1 < len(toks) else ""
    if before.isdigit() or after.isdigit():  # "May 2023", "5 May", "Jan 12"
        return month
    if tok == "may" and (
        before in _MONTH_CUES or (before in _LISTING and i >= 2 and _month_at(toks, i - 2) is not None)
    ):
        return month  # "in May", "April and May"
    return None


def query_terms(text: str, limit: int = MAX_QUERY_TERMS, months: bool = True) -> list[str]:
    """The distinct non-stopword tokens of a query, in order, at most `limit`.

    With `months`, a month named by a stopword or an abbreviation ("in May", "Jan 2022")
    is kept, as its full name; "won" is kept unless it is "won't".
    """
    toks = tokens(text)
    seen: dict[str, None] = {}
    for i, tok in enumerate(toks):
        month = _month_at(toks, i) if months and tok in _MONTH_WORDS else None
        if month is not None:
            tok = month
        elif tok == "won" and (i + 1 == len(toks) or toks[i + 1] != "t"):
            pass  # the verb, not the head of "won't"
        elif tok in STOPWORDS:
            continue
        if tok in seen or (len(tok) == 1 and tok.isascii()):
            continue
        seen[tok] = None
        if len(seen) >= limit:
            break
    return list(seen)


def query_groups(
    text: str, limit: int = MAX_QUERY_TERMS, forms: bool = True, months: bool = True
) -> list[tuple[str, ...]]:
    """The query's terms (see `query_terms`), each with its other word forms when `forms`."""
    groups: dict[frozenset[str], tuple[str, ...]] = {}
    for term in query_terms(text, limit, months):
        group = forms_of(term) if forms else (term,)
        groups.setdefault(frozenset(group), group)  # "met" and "meet" in one query: one term
    return list(groups.values())


def fts_query(terms: Sequence[str | tuple[str, ...]]) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms (a tuple: alternatives); None when empty."""
    if not terms:
        return None
    # Tokens hold no double quote (see _TOKEN), so quoting needs no escaping.
    return " OR ".join(f'"{t}"' for term in terms for t in ((term,) if isinstance(term, str) else term))
