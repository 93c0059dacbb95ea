"""Rule-based fact extraction: what the speaker says about themselves, now.

A message is cut into sentences (questions are skipped) and each sentence into clauses (at
conjunctions and at a comma before a new subject). A rule fires on a first-person trigger
("I live in", "my name is", "my dog ..."); the words before the trigger in its clause must not
negate it, make it hypothetical or past, hedge it or report someone else's words; the value is
then cut at the end of its phrase and cleaned of fillers and time words. Precision comes first:
a wrong fact in every prompt is worse than a missing one.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

from memory_engine.facts.chat_forms import (
    doings,
    intro_facts,
    normalise,
    profile_facts,
    restore_subject,
    signoff,
)
from memory_engine.facts.clauses import (
    FactChange,
    clause_literals,
    clauses,
    folded,
    is_question,
    rule_gate,
    rule_patterns,
    sentences,
)
from memory_engine.facts.corrections import (
    INSIDE_WORDS,
    OPENING_WORDS,
    correction_of,
    corrections_within,
    looks_like_correction,
)
from memory_engine.facts.group_talk import DIET_CONDITIONS, GROUP_TRIGGERS, GROUP_WORDS, group_facts
from memory_engine.facts.health import DIET_WORDS, health, languages
from memory_engine.facts.patterns import LiteralIndex, has_digit, lazy, word_runs
from memory_engine.facts.prefs import favorites, kin, preferences
from memory_engine.facts.rules import age, dates_and_pronouns, names, names_here, names_i_am, places, work

__all__ = [
    "FactChange",
    "canonical_key",
    "extract_facts",
    "facts_and_past",
    "is_list_key",
    "looks_like_correction",
    "merge_list",
    "states_nothing",
]

# values that accumulate as a list
LIST_KEYS = ("likes", "dislikes", "pets", "family", "allergies", "languages", "health", "alias")
MAX_SET_ITEMS = 12
MAX_CHANGES = 40  # per message: a pasted wall of text must not rewrite every fact
MAX_TEXT = 8000  # facts are read from the start of a long message only

_ABOUT_ME = lazy(r"\b(?:i|i'm|i've|my|me|we|we're|we've|our|name|here|this|it's|fav\w*)\b", re.I)
# The same test, case-sensitive on folded text (the same matches, several times faster), and a
# wider one for whole sentences: "im", "ive" and "pronouns:" become "I'm", "I've", "my pronouns".
_ABOUT_ME_FOLDED = lazy(r"(?=[imwonhtf])\b(?:i|my|me|we|our|name|here|this|it's|fav\w*)\b", 0)
_ABOUT_ME_WORDS = ("i", "my", "me", "we", "our", "name", "here", "this", "im", "ive", "pronouns")
_MAY_BE_ABOUT_ME = lazy(r"(?=[imwonhtfp])\b(?:" + "|".join(_ABOUT_ME_WORDS) + r"|it's|fav\w*)\b", 0)
_ABOUT_WORDS = frozenset(("i", "my", "me", "we", "our", "name", "here", "this", "allergy"))  # one-word terms
# Chat leaves the subject out ("moved to Lisbon", "vegan since 2019", "Pedro, 35"): these words
# can open a fact without "I" or "my".
_CHAT_WORDS = (
    *("live", "living", "moved", "relocated", "work", "working", "based", "settled", "speak", "fluent"),
    *("native", "bilingual", "love", "adore", "enjoy", "hate", "detest", "got", "have", "turned", "teach"),
    *("teaching", "keep", "eat", "follow", "drive", "been", "call", "short", "at", "for", "with", "fine"),
    *("pls", "please", "started", "began", "hired", "mynameis", "its", "xx", *sorted(DIET_WORDS)),
)
_CHAT_GATE = lazy(r"\b(?:" + "|".join(_CHAT_WORDS) + r"|allerg\w*|fav\w*|nam\w*|it'?s|\d+)\b|\n|:", 0)
# For ASCII text, _MAY_BE_ABOUT_ME or _CHAT_GATE matches exactly when: the text holds "\n" or ":";
# or one of their plain words is one of its words (runs of [a-z0-9_] of the lower-cased text, cut
# out by one bytes.translate); or one of their other alternatives matches, which needs "'" (it's),
# "fav", "nam", "allerg" or a word of digits. Most chat holds none of these: this says so in ~1 us
# where the two searches took ~10 us.
_GATE_WORDS = frozenset(w.encode() for w in _ABOUT_ME_WORDS + _CHAT_WORDS)
_GATE_LITERALS = ("'", "fav", "nam", "allerg")  # it's, fav..., nam..., allerg...
_NOT_WORD = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == 95) else 32 for c in range(256))


# Letters and "_" kept; what opens another path (a quote, colon, newline, "=", "'", a digit)
# marked \v (a space to bytes.split); every other character a space.
_FAST_WORDS = bytes(
    11 if chr(c) in "\"':\n=0123456789" else c if chr(c).isascii() and (chr(c).isalpha() or c == 95) else 32
    for c in range(256)
)


def _states_nothing(low: str) -> bool:
    """True for most messages: lower-cased ASCII `low` has no quote, colon, newline, "=", "'" or
    digit (profile lines, sign-offs, quotes, "it's", numbers take the other path) and none of the
    words of _MAY_BE_ABOUT_ME or _CHAT_GATE, nor "fav", "nam", "allerg" or "xx" (a sign-off):
    then the extractor finds nothing (_may_state_facts is False). One translate and one split."""
    marked = low.encode().translate(_FAST_WORDS)
    if b"\v" in marked or "xx" in low or "fav" in low or "nam" in low or "allerg" in low:
        return False
    return _NOTHING_WORDS.isdisjoint(marked.split())


_NOTHING_WORDS = _GATE_WORDS | GROUP_WORDS  # a word of either: the message may state something
_ABOUT_ME_RUNS = frozenset(_ABOUT_ME_WORDS)


def states_nothing(text: str) -> bool:
    """True only when the rules record nothing for this message, whatever its author said before
    (`extract_facts(text, previous)` is empty for each `previous` `ChatMemory.apply_facts` may
    give), without the correction pattern and the calls: the import's pre-check (`imports.bulk`,
    `imports.hold`), apart from the turn's path. It saves ~4 % of the host's import."""
    if not text.isascii():
        return False
    low = text[:MAX_TEXT].lower()
    if not _states_nothing(low):
        return False
    # looks_like_correction(text) is False, so no previous message is read:
    if len(text) > 160 or "?" in text:
        return True
    if "*" in text or "actually" in low:  # (low is all of text: 160 characters at most)
        return False
    # _OPENS must take an opening word first, after the characters no word holds
    words = text.encode().translate(_NOT_WORD).split(None, 1)
    return not words or words[0].lower() not in OPENING_WORDS


def _about_me(sentence: str) -> bool:
    """_MAY_BE_ABOUT_ME.search(folded(sentence)), told from the words of ASCII text where it can be."""
    low = folded(sentence)
    if not sentence.isascii() or "it's" in low:
        return _MAY_BE_ABOUT_ME.search(low) is not None
    runs = word_runs(low)  # a plain word of the pattern is one of them; fav\w* starts one
    if not _ABOUT_ME_RUNS.isdisjoint(runs):
        return True
    return "fav" in low and any(run.startswith("fav") for run in runs)


def _ascii_words(low: str) -> list[bytes]:
    """The runs of [a-z0-9_] of lower-cased ASCII `low` (one translate, one split)."""
    return low.encode().translate(_NOT_WORD).split()


def _may_state_facts(low: str, words: list[bytes] | None = None) -> bool:
    """True exactly when lower-cased ASCII `low` (its _ascii_words: `words`, when known) holds a
    match of _MAY_BE_ABOUT_ME or _CHAT_GATE."""
    if "\n" in low or ":" in low:
        return True
    if words is None:
        words = _ascii_words(low)
    if not _GATE_WORDS.isdisjoint(words):
        return True  # a whole word of one of the two patterns' plain alternatives
    for literal in _GATE_LITERALS:
        if literal in low:
            return _MAY_BE_ABOUT_ME.search(low) is not None or _CHAT_GATE.search(low) is not None
    return has_digit(low) and any(map(bytes.isdigit, words))  # \b\d+\b


_QUOTED_SELF = lazy(r"[\"\u201c]\s*(?:i|i'm|im|i've|my)\b[^\"\u201d]*[\"\u201d]", re.I)
# A question added to a statement ("just moved to Cork, know anyone here?") opens with one of these.
_TAG_QUESTION = frozenset(
    [
        "know",
        "anyone",
        "anybody",
        "right",
        "you",
        "u",
        "what",
        "who",
        "how",
        "where",
        "when",
        "any",
        "wbu",
        "hbu",
        "and",
        "or",
        "ok",
        "yeah",
        "isn't",
        "aren't",
        "don't",
        "eh",
        "huh",
        "thoughts",
        "ideas",
        "recommendations",
        "tips",
    ]
)
# "favourite colour" and "fav color" are one key: the spelling a key is stored under.
_KEY_SPELLING = (("colour", "color"), ("flavour", "flavor"), ("favourite", "favorite"), ("colors", "color"))
Rule = Callable[[str], Iterable[FactChange]]
RULES: tuple[Rule, ...] = (
    names,
    names_i_am,
    names_here,
    places,
    work,
    age,
    dates_and_pronouns,
    preferences,
    favorites,
    kin,
    health,
    languages,
    doings,
)
_Gate = frozenset[str]
_gates: list[tuple[Rule, _Gate | None]] = []  # each rule with its gate, derived on first use
_index: list[LiteralIndex] = []  # every literal of the rules' patterns, found in one pass
# For each literal, the rules whose gate holds it, as bits (rule i is bit i): as a whole word
# (`_word_bits`, looked up by the clause's words) or as any part of the text (`_bits`), and the
# rules that have no gate (always run). A clause ORs the bits it holds and calls only those rules.
_bits: dict[str, int] = {}
_word_bits: dict[str, int] = {}
_always: list[int] = []
_building = threading.Lock()


def _gated() -> list[tuple[Rule, _Gate | None]]:
    """The rules in order, each with the literals one of which its findings need (rule_gate).

    Built once, under a lock: a host runs chats' turns in threads, and a thread must not use
    the tables while another still fills them (`_always`, appended last, says they are whole).
    """
    if not _always:
        with _building:
            if not _always:
                _build_gates()
    return _gates


def _build_gates() -> None:
    """Fill the tables in place (the module's names stay the same objects)."""
    literals: set[str] = set()
    always = 0
    for i, rule in enumerate(RULES):
        gate = rule_gate(rule)
        _gates.append((rule, None if gate is None else frozenset(gate)))
        always |= (gate is None) << i
        for pattern in rule_patterns(rule) if gate is not None else ():
            for word in pattern.words:
                _word_bits[word] = _word_bits.get(word, 0) | 1 << i
            for fragment in pattern.fragments:
                _bits[fragment] = _bits.get(fragment, 0) | 1 << i
            literals.update(pattern.literals or ())
    _index.append(LiteralIndex(frozenset(literals), _bits, _word_bits))
    _always.append(always)  # last: the tables are whole


def canonical_key(key: str) -> str:
    """The one spelling of a fact key ("favorite_colour" -> "favorite_color")."""
    for variant, spelling in _KEY_SPELLING:
        if variant in key:
            key = key.replace(variant, spelling)
    return key


def facts_and_past(text: str, previous: str | None = None) -> tuple[list[FactChange], list[FactChange]]:
    """(values the message says were so before, as "left Lyon for Montreal" says Lyon; its facts).

    The past values are applied first, so the facts supersede them and they are the history.
    """
    past: list[FactChange] = []
    return past, extract_facts(text, previous, past)


def extract_facts(
    text: str, previous: str | None = None, past: list[FactChange] | None = None
) -> list[FactChange]:
    """Facts the speaker states about themselves in one message, in the order found.

    `previous` is the speaker's message before this one: a correction ("sorry, Osaka") changes
    what it stated. `past`: where to add the values it says were so before (facts_and_past).
    """
    text = text[:MAX_TEXT]
    ascii_text = text.isascii()
    if ascii_text:
        low = text.lower()
        if _states_nothing(low):  # most chat: nothing here, unless it corrects `previous`
            return _finish(correction_of(text, extract_facts(previous), []), False) if previous else []
    else:
        low = ""
    changes: list[FactChange] = []
    whole = text  # `low` is its lower case while no profile line is taken out
    if "\n" in text or ":" in text or "=" in text:  # profile-card lines ("Age: 26") and sign-offs
        kept = []
        for line in text.split("\n"):
            found = profile_facts(line)
            if found is None:
                kept.append(line)
            else:
                changes.extend(found)
        text = "\n".join(kept)
    if ascii_text and text is not whole:
        low = text.lower()
    if "\n" in text or "xx" in (low if ascii_text else text.lower()):
        signed = signoff(text)
        if signed:
            changes.append(signed)
    words = _ascii_words(low) if ascii_text else []
    changes.extend(_sentence_facts(text, low, words) if ascii_text else _sentence_facts(text))
    may_correct = changes and (not ascii_text or not INSIDE_WORDS.isdisjoint(words))
    corrected = corrections_within(text, _sentence_facts) if may_correct else []
    changes.extend(corrected)
    # "left Lyon for Montreal": Lyon is the past, Montreal the fact. For ASCII text, the rules'
    # trigger words looked up among its words first (one C call; most messages hold none).
    before: list[FactChange] = []
    if ascii_text:
        if (
            GROUP_TRIGGERS.isdisjoint(words)
            and not (  # nor "29, ...", "Lukas. 45, ...": an introduction
                words
                and (
                    (words[0].isdigit() and "," in text[:8])
                    or (len(words) > 1 and words[1].isdigit() and "." in text[: len(words[0]) + 3])
                )
            )
        ):
            group: list[FactChange] = []
        else:
            before, group = group_facts(text, low)
    else:
        before, group = group_facts(text)
    if past is not None and before:
        past.extend(before)
    if group:
        named = {c.value.casefold() for c in changes if c.key == "name"}
        diet = any(c.key == "diet" for c in changes)
        changes.extend(
            c
            for c in group
            if not (c.key == "alias" and c.value.casefold() in named)  # "call me Seun": the name says it
            and not (c.key == "health" and diet and c.value in DIET_CONDITIONS)  # coeliac: gluten-free
        )
    if previous:
        changes.extend(correction_of(text, extract_facts(previous), changes))
    return _finish(changes, corrected=bool(corrected))


def _sentence_facts(text: str, low: str = "", words: list[bytes] | None = None) -> list[FactChange]:
    """What the rules read in the sentences of `text` (ASCII text: `low` its lower case and
    `words` its _ascii_words, when known)."""
    if '"' in text or "\u201c" in text:  # a first-person sentence in quotes is someone's line
        quoted = _QUOTED_SELF.sub('"..."', text)
        if quoted != text:
            text, low, words = quoted, "", None
    ascii_text = text.isascii()
    low = low or text.lower()
    if ascii_text and not _may_state_facts(low, words):
        return []  # (outside ASCII, quotes and emoji change before sentences are cut)
    changes: list[FactChange] = []
    parts = sentences(text)
    all_short = True  # every part before this one has at most two words
    for index, sentence in enumerate(parts):
        if index:
            all_short = all_short and len(parts[index - 1].split()) <= 2
        if is_question(sentence):
            # "just moved to Cork, know anyone here?": the statement before the question counts
            head, _, tail = sentence.rpartition(", ")
            asks = tail.split()[:1]
            if len(head.split()) < 3 or is_question(head) or not asks or asks[0].lower() not in _TAG_QUESTION:
                continue
            sentence = head
        if ascii_text and len(parts) > 1 and not _may_state_facts(sentence.lower()):
            continue  # the message's gate, per sentence: nothing here opens a fact (~40 % of LoCoMo's)
        sentence = normalise(restore_subject(sentence))
        # "Kwame here. 34, from Accra": the sentence after a name still opens the introduction
        intro = (
            index == 0
            or (index == 1 and any(c.key == "name" for c in changes))
            or all_short  # "Hey! Priyanka here, ...": every sentence before it is short
        )
        introduced = intro_facts(sentence, first=intro)  # after the sentence's rules: "X for short" wins
        if not _about_me(sentence) and "allergy" not in sentence.lower():
            changes.extend(introduced)
            continue
        for clause in clauses(sentence):
            low = folded(clause)
            # Without "I", "my"... only "it's" or "fav..." can be about the speaker.
            runs = word_runs(low)
            about = not _ABOUT_WORDS.isdisjoint(runs)
            if not about and not (("fav" in low or "it's" in low) and _ABOUT_ME_FOLDED.search(low)):
                continue
            gated = _gated()
            called = _always[0] | clause_literals(clause, low, runs, _index[0])
            while called:  # lowest bit first: the rules run in their order, those whose gate is there
                bit = called & -called
                changes.extend(gated[bit.bit_length() - 1][0](clause))
                called ^= bit
        changes.extend(introduced)
    return changes


def _finish(changes: list[FactChange], corrected: bool) -> list[FactChange]:
    """Keys spelled one way, "I'm from X" dropped when the message says where they live, no repeats."""
    if not changes:
        return changes
    lived = any(c.key == "location" and c.remove_from is None for c in changes)
    out: list[FactChange] = []
    for c in changes:
        if c.remove_from == "from":  # "I'm from X" counts unless the message says where they live
            if lived:
                continue
            c = FactChange("location", c.value)
        key = canonical_key(c.key)
        if key != c.key:
            c = FactChange(key, c.value, c.remove_from, c.add)
        if corrected and not is_list_key(c.key):  # "I'm 34, sorry 35": only the corrected value
            out = [o for o in out if o.key != c.key]
        if c not in out:
            out.append(c)
    return out[:MAX_CHANGES]


def merge_list(current: str | None, add: str | None = None, remove: str | None = None) -> str:
    """Add or remove one item of a comma-separated list value, newest last, bounded."""
    items = [i.strip() for i in (current or "").split(",") if i.strip()]
    folded = [i.lower() for i in items]
    if remove and remove.lower() in folded:
        del items[folded.index(remove.lower())]
        folded.remove(remove.lower())
    if add:
        if add.lower() in folded:
            del items[folded.index(add.lower())]
        items.append(add.replace(",", " "))
    return ", ".join(items[-MAX_SET_ITEMS:])


def is_list_key(key: str) -> bool:
    """True for keys whose value is a list that grows (likes, pets, family, allergies, languages...)."""
    return key in LIST_KEYS
