"""Text handling for search: tokens, stopwords, and FTS5 queries built from quoted tokens only."""

from __future__ import annotations

import re

# Letters and digits of any script; everything else (quotes, operators, emoji) separates
# tokens. Because a token never holds a quote or an operator, a query built from quoted
# tokens can never be FTS5 syntax, whatever the user typed.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

# Words that carry no topic: question words, pronouns, auxiliaries, chat filler.
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "let's", "me", "more", "most", "mustn't", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "s", "t", "d", "ll", "m", "re", "ve", "don", "didn", "doesn", "isn", "wasn", "weren", "hasn", "haven", "hadn", "won", "wouldn", "shouldn", "couldn", "also", "just", "really", "yeah", "yes", "oh", "ok", "okay", "hey", "hi", "hello", "thanks", "thank", "lol", "haha", "hmm", "um", "uh", "get", "got", "getting", "go", "going", "gone", "went", "will", "shall", "may", "might", "must", "like", "well", "much", "many", "one", "ones", "thing", "things", "something", "anything", "everything", "kind", "sort", "lot", "lots", "way"]
)

# A long message used as a query keeps its first 16 distinct content words: enough to find
# its topic, and each one costs a document-frequency count per search (retrieval._select).
MAX_QUERY_TERMS = 16


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens of any script, in order."""
    return [t.lower() for t in _TOKEN.findall(text)]


def query_terms(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct non-stopword tokens of a query, in order, at most `limit`."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if tok in STOPWORDS or tok in seen:
            continue
        if len(tok) == 1 and tok.isascii():
            continue
        seen[tok] = None
        if len(seen) >= limit:
            break
    return list(seen)


def fts_query(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms; None when there is nothing to match."""
    if not terms:
        return None
    # Tokens hold no double quote (see _TOKEN), so quoting needs no escaping.
    return " OR ".join(f'"{t}"' for t in terms)
