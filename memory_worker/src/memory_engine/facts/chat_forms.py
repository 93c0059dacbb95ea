"""Facts in the forms chat takes: the subject left out, profile-card lines, sign-offs, short intros.

These run before (or beside) the rules in `facts.rules`/`facts.prefs`: they rewrite a chat form into
the sentence the rules read ("moved to Lisbon" -> "I moved to Lisbon", "my names Priya" ->
"my name's Priya"), or read a form no sentence rule can ("Age: 26", "~ Kwame", "Pedro, 35").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory_engine.facts.clauses import ADV, I_, FactChange, folded, is_name_word, title, triggers
from memory_engine.facts.health import DIET_WORDS, allergy_items, diet_value, language_items
from memory_engine.facts.lexicon import JOBS, NOT_NAMES
from memory_engine.facts.patterns import LazyRe, LiteralIndex, has_digit, lazy, rx, word_runs
from memory_engine.facts.rules import after_job, take_job, take_org, take_place

__all__ = ["doings", "intro_facts", "normalise", "profile_facts", "restore_subject", "signoff"]

# -- the subject left out ------------------------------------------------------------------

_LEAD = r"(?:(?:just|also|still|currently|now|really|recently|finally|actually|originally)\s+)*"
# A verb that opens a statement about the speaker when "I" is left out, and the subject it takes.
_VERBS_I = (
    "live|moved|relocated|work|speak|love|adore|enjoy|hate|detest|got|have|turned|teach|keep|eat|"
    "follow|drive|started|began"
)
_VERBS_IM = "living|based|working|allergic|fluent|teaching|bilingual|trilingual|settled|" + "|".join(
    sorted(DIET_WORDS, key=len, reverse=True)
)
_BARE_VERB = lazy(
    r"^(?P<pre>\W*(?:(?:hi|hey|hello|btw|oh|ok|okay|also|so|update|edit|fyi|anyway|well|yeah|lol)[\s,!.:]+)*)(?P<lead>"
    + _LEAD
    + r")"
    r"(?:(?P<i>(?:" + _VERBS_I + r")\b)|(?P<im>(?:" + _VERBS_IM + r")\b)|(?P<ive>been\b(?!\s+to\b)))",
    re.I,
)
_OPENING_VERBS = frozenset([*_VERBS_I.split("|"), *_VERBS_IM.split("|"), "been"])
_WORDS = lazy(r"[\w-]+", 0)
_WORD_DASH = str.maketrans({c: chr(c) if chr(c).isalnum() or chr(c) in "_-" else " " for c in range(128)})
_SEGMENT = lazy(r"(,\s+|:\s+)", 0)
_BARE_JOB = lazy(
    r"^\W*(?P<job>(?:[\w\-]+\s+){0,2}?(?P<head>[\w\-]+))\s+(?:at|for|with)\s+(?=(?-i:[A-Z0-9]))", re.I
)


_NOT_WORD_ASCII = "".join(chr(c) for c in range(128) if not (chr(c).isalnum() or c == 95))
_AT_FOR_WITH = frozenset(("at", "for", "with"))


def _may_be_bare_job(text: str) -> bool:
    """False when _BARE_JOB cannot match: in ASCII text, "at", "for" or "with" must be one of the
    first four words after the leading non-word characters (at most three words of a job before it)."""
    if not text.isascii():
        return True
    return not _AT_FOR_WITH.isdisjoint(text.lstrip(_NOT_WORD_ASCII).lower().split(None, 4)[:4])


_GERUND_SUBJECT = lazy(r"\s(?:is|was|sucks|seems|can\s+be|must\s+be|gets|makes)\b", re.I)
_VAGUE_OBJECT = lazy(
    r"^\W*(?:love|adore|enjoy|hate|detest)\s+(?:the|this|that|it|these|those|your|his|her|their|how|when|"
    r"what|u|you|ya)\b",
    re.I,
)
_OTHER_SUBJECT = lazy(r"^\W*(?:my|our|his|her|their|the|a|an|he|she|they|it|you|we)\b", re.I)


def _restore_one(part: str) -> str:
    m = _BARE_VERB.match(part)
    gerund = bool(m and m.group("im") and m.group("im").lower().endswith("ing"))
    if m and ((gerund and _GERUND_SUBJECT.search(part)) or _VAGUE_OBJECT.match(part)):
        return part  # "Living in London is expensive", "love the new update"
    if m:
        subject = "I " if m.group("i") else "I'm " if m.group("im") else "I've "
        return part[: m.start("lead")] + subject + part[m.start("lead") :]
    job = _BARE_JOB.match(part) if _may_be_bare_job(part) else None
    if (
        job
        and job.group("head").lower() in JOBS
        and not any(w in NOT_NAMES for w in job.group("job").lower().split())
    ):  # "nurse at Mayo Clinic": "I'm a nurse at ..."
        return "I'm a " + part
    return part


_BARE_FAV = lazy(r"^\W*(?=(?:fav|fave|favou?rite)\s+\w+(?:\s+\w+)?\s+(?:is|are)\s)", re.I)


def restore_subject(sentence: str) -> str:
    """The sentence with "I" put back where chat leaves it out ("love hiking, hate crowds")."""
    low = sentence.lower()
    if "fav" in low and _BARE_FAV.match(sentence):  # "favourite colour is grey": whose else
        sentence = "my " + sentence.lstrip()  # (re.I matches f, a, v only where lower() has them)
        low = sentence.lower()
    words = low.translate(_WORD_DASH).split() if low.isascii() else _WORDS.findall(low)
    if _OPENING_VERBS.isdisjoint(words) and not (
        (" at " in low or " for " in low or " with " in low)
        and _may_be_bare_job(sentence)
        and _BARE_JOB.match(sentence)
    ):
        return sentence  # no verb that opens a statement without "I", anywhere
    parts = _SEGMENT.split(sentence) if "," in sentence or ":" in sentence else [sentence]
    if _OTHER_SUBJECT.match(sentence):  # "My kids, Mia and Noah, love pizza": theirs
        return "".join([_restore_one(parts[0]), *parts[1:]]) if len(parts) > 1 else sentence
    return "".join(p if i % 2 else _restore_one(p) for i, p in enumerate(parts))


# -- spelling of the triggers ----------------------------------------------------------------

_FIXES = (  # each with the strings one of which its every match holds (in folded text)
    (lazy(r"\bmy\s*(?:nmae|nam|nme|naem|mane|namr)\s*(?:is|s)\b|\bmynameis\b", re.I), "my name is", ("my",)),
    (lazy(r"(^|\bmy\s+|[.!,]\s*)names\s+(?=[^\W\d_])", re.I), r"\1name's ", ("names",)),
    (lazy(r"^(\W*)(?:name\s+is)\s+", re.I), r"\1my name is ", ("name",)),
    (lazy(r"\b(hey|hi|hello)y*\b", re.I), r"\1", ("he", "hi")),
    (lazy(r"\b(?:ppl|people|everyone|everybody|friends|they)\s+call\s+me\b", re.I), "call me", ("call",)),
)


def normalise(sentence: str) -> str:
    """Chat spellings of a trigger made standard ("my names", "mynameis", "heyyy")."""
    low = sentence.lower()
    if "nam" not in low and "hey" not in low and "call" not in low and "mane" not in low:
        return sentence
    fold = folded(sentence)
    for pattern, repl, needs in _FIXES:
        if any(need in fold for need in needs):
            fixed = pattern.sub(repl, sentence)
            if fixed != sentence:
                sentence, fold = fixed, folded(fixed)
    return sentence


# -- short intros: "hi im yuki", "Farid here, ...", "Pedro, 35, ...", "X for short" -------------

_GREET = r"(?:(?:hi|hey|hello|hiya|yo|heya|sup|ok|all|everyone|guys|folks|y'all|there)[\s,!.]+)*"
_GREET_FIRST = frozenset(re.findall(r"\w+", g)[0] for g in _GREET[6:].split(")")[0].split("|"))
_NAME_W = r"[^\W\d_][\w'\-]*"
_LOWER_INTRO = lazy(
    r"^\W*"
    + _GREET.replace(")*", ")+")
    + r"(?:i'm|im|i am|it's|its)\s+(?P<n>"
    + _NAME_W
    + r")\s*(?:btw|here|lol)?\W*$",
    re.I,
)
_HERE_INTRO = lazy(
    r"^\W*"
    + _GREET
    + r"(?:(?:ya|your)\s+(?:boy|girl)\s+)?(?P<n>[^\W\d_a-z][\w'\-]*(?:\s+[^\W\d_a-z][\w'\-]*){0,2})"
    r"\s+here\b\s*(?:[,.!;:\-]|$)",
    0,
)
_THIS_IS = lazy(
    r"^\W*"
    + _GREET
    + r"(?:this\s+is|it's|its)\s+(?P<n>(?-i:[^\W\d_a-z])[\w'\-]*)\s*(?:,\s*new\b|\s+from\s+the\b|"
    r"\s+here\b|\s+btw\b)",
    re.I,
)
_FOR_SHORT = lazy(r"(?:^|[\s,])(?P<n>[^\W\d_a-z][\w'\-]*)\s+for\s+short\b", 0)
_FULL_THEN_SHORT = lazy(
    r"^\W*(?:[^\W\d_a-z][\w'\-]*\s+){1,3}?[^\W\d_a-z][\w'\-]*(?:\s+here)?\s*,\s*(?:but\s+)?(?:just\s+)?"
    r"(?P<n>[^\W\d_a-z][\w'\-]*)\s*(?:is\s+fine|is\s+ok|pls|please|works|for\s+short)\b",
    0,
)
_NAME_AGE = lazy(
    r"^\W*" + _GREET + r"(?:(?P<im>i'm|im|i am)\s+)?(?:(?P<n>[^\W\d_][\w'\-]*),\s*)?(?P<age>\d{1,2})"
    r"\s*(?P<unit>y/?o|yrs?(?:\s+old)?|years?\s+old)?\s*(?P<end>,|$)(?P<rest>.*)$",
    re.I,
)
_INTRO_REST = lazy(
    r"\s*(?:from|living|based|live|single|married|taken|dad|mum|mom|father|mother|student|he/him|she/her|"
    r"they/them|male|female|nb|m|f)\b",
    re.I,
)
_AGE_PHRASE = lazy(
    r"(?:^|\bas\s+an?\s+|^\W*being\s+|\bI(?:'m|\s+am)\s+an?\s+|^\W*age\s+)(?P<age>\d{1,2})"
    r"(?:\s*-?\s*(?:year|yr)s?\s*-?\s*old|\s*y/?o\b|(?=\s+here\b)|(?=\s+doesn't|\s+doesnt))",
    re.I,
)


_INTRO_GATED = (_LOWER_INTRO, _HERE_INTRO, _THIS_IS, _FULL_THEN_SHORT, _FOR_SHORT)
_intro_index: list[LiteralIndex] = []  # their literals, indexed on first use (not at import)


def _intro_literals(fold: str) -> frozenset[str]:
    """Which literals of the intro patterns folded text `fold` holds (one look-up per word)."""
    if not _intro_index:
        _intro_index.append(LiteralIndex(frozenset(w for p in _INTRO_GATED for w in p.literals or ())))
    return _intro_index[0].scan(fold, word_runs(fold))[0]


def _holds(pattern: LazyRe, present: frozenset[str]) -> bool:
    """The pattern's gate (LazyRe.gate_passes) told from the literals `_intro_literals` found."""
    gate = pattern.literal_set
    return gate is None or not gate.isdisjoint(present)


def _lower_name(name: str) -> str | None:
    if name.lower() in NOT_NAMES or name.lower().endswith("'s") or len(name) < 2:
        return None
    return title(name)


def intro_facts(sentence: str, first: bool) -> list[FactChange]:
    """Name and age from the short forms of an introduction (`first`: the message's first sentence)."""
    out: list[FactChange] = []
    low = sentence.lower()
    digit = has_digit(sentence)  # _NAME_AGE and _AGE_PHRASE need one (the same answer on `low`)
    if not first and "short" not in low and not digit:
        return out  # only the first sentence introduces; "X for short" and ages anywhere
    fold = folded(sentence)  # each pattern is tried only when its literals are there (derived)
    present = _intro_literals(fold)
    runs = word_runs(fold)  # (remembered from _intro_literals)
    # _LOWER_INTRO opens with a greeting: its first word (y'all: "y") is the text's first run of \w
    lower = runs and runs[0] in _GREET_FIRST and _holds(_LOWER_INTRO, present)
    m = _LOWER_INTRO.match(sentence) if lower else None
    if m and (name := _lower_name(m.group("n"))):
        out.append(FactChange("name", name))
    for pattern in (_HERE_INTRO, _THIS_IS) if first else ():
        h = pattern.match(sentence) if _holds(pattern, present) else None
        if h and all(is_name_word(w) for w in h.group("n").split()) and h.group("n").lower() != "bob":
            out.append(FactChange("name", h.group("n")))
    if (
        first
        and _holds(_FULL_THEN_SHORT, present)
        and (full := _FULL_THEN_SHORT.match(sentence))
        and is_name_word(full.group("n"))
    ):
        out.append(FactChange("name", full.group("n")))
    short = _FOR_SHORT.search(sentence) if _holds(_FOR_SHORT, present) else None
    if short and is_name_word(short.group("n")):
        out.append(FactChange("name", short.group("n")))
    if first and digit:
        na = _NAME_AGE.match(sentence) if _NAME_AGE.gate_passes(fold) else None
        # "im nico, 31": a lower-case name only after "I'm", and never a word that is no name
        lower = bool(na and na.group("n") and na.group("n")[0].islower())
        if na and lower and (not na.group("im") or _lower_name(na.group("n")) is None):
            na = None
        intro = na and (na.group("n") or na.group("unit") or _INTRO_REST.match(na.group("rest")))
        if (
            na
            and intro
            and (not na.group("n") or is_name_word(title(na.group("n"))))
            and 0 < int(na.group("age")) <= 120
            and not re.match(r"\s*\d", na.group("rest"))
        ):
            if na.group("n"):
                out.append(FactChange("name", title(na.group("n"))))
            out.append(FactChange("age", str(int(na.group("age")))))
            rest = na.group("rest").strip(" ,.!")
            came = re.match(r"from\s+(.+?)(?:,|$)", rest)
            if came and (place := take_place(came.group(1), allow_lower=False)):
                out.append(FactChange("location", place, remove_from="from"))
            if rest and re.fullmatch(r"[^\W\d_a-z][\w'\-]*(?:\s+[^\W\d_a-z][\w'\-]*)?", rest):
                place = take_place(rest, allow_lower=False)
                if place:
                    out.append(FactChange("location", place))
    ap = _AGE_PHRASE.search(sentence) if digit and _AGE_PHRASE.gate_passes(fold) else None
    if ap and 0 < int(ap.group("age")) <= 120:
        out.append(FactChange("age", ap.group("age")))
    return out


# -- sign-offs -----------------------------------------------------------------------------

_SIGNOFF = lazy(
    r"(?:\n\s*(?:-{1,2}|—|~|xx|cheers,?|thanks,?|love,?)\s*|\bxx\s+)(?P<n>[^\W\d_][\w'\-]*)\s*$", re.I
)


def signoff(text: str) -> FactChange | None:
    """The name a message is signed with ("...\\n- Siobhan", "thanks!! xx Leilani")."""
    m = _SIGNOFF.search(text.rstrip(" \n\t.!"))
    if m and is_name_word(m.group("n")):
        return FactChange("name", m.group("n"))
    return None


# -- profile cards: "key: value", one a line --------------------------------------------------

_LABEL_COLON = lazy(r"^\s*(?P<label>[^\W\d][\w '/]{0,24}?)\s*[:=]\s*(?P<value>\S.{0,80}?)\s*$", 0)
_LABEL = lazy(
    r"^\s*(?P<label>[^\W\d][\w '/]{0,24}?|[\U0001f000-\U0001faff\u2600-\u27bf])\ufe0f?\s*"
    r"(?:[:=]|\s-\s|\s+(?=\S))\s*(?P<value>\S.{0,80}?)\s*$",
    0,
)
_LABELS: dict[str, str] = {
    **dict.fromkeys(("name", "nickname", "nick"), "name"),
    **dict.fromkeys(("age", "me"), "age"),
    **dict.fromkeys(
        ("city", "location", "loc", "lives in", "based in", "home", "where", "\U0001f4cd"), "location"
    ),
    **dict.fromkeys(("\U0001f3e0",), "location"),
    "from": "from",
    **dict.fromkeys(("job", "work", "occupation", "profession", "role", "\U0001f4bc"), "job"),
    **dict.fromkeys(("employer", "company", "works at", "workplace"), "employer"),
    **dict.fromkeys(("birthday", "bday", "born", "date of birth"), "birthday"),
    **dict.fromkeys(
        ("languages", "language", "speaks", "speak", "mother tongue", "native language"), "languages"
    ),
    "diet": "diet",
    **dict.fromkeys(("allergies", "allergy", "allergic to"), "allergies"),
    **dict.fromkeys(("likes", "loves", "interests", "hobbies"), "likes"),
    **dict.fromkeys(("dislikes", "hates"), "dislikes"),
    "\U0001f382": "cake",
}
_NAME_VALUE = lazy(r"[^\W\d_][\w'\-]*(?:\s+[^\W\d_][\w'\-]*){0,2}", 0)
_TRAIL = lazy(r"\s+(?:lol|haha|lmao|btw|tbh)\s*$", re.I)


def _profile_value(key: str, value: str) -> list[FactChange]:
    value = _TRAIL.sub("", value).strip(" .,;!")
    if key == "cake":
        key = "age" if value.isdigit() else "birthday"
    if key == "age":
        return [FactChange("age", value)] if value.isdigit() and 0 < int(value) <= 120 else []
    if key == "name":
        words = value.split()
        ok = bool(_NAME_VALUE.fullmatch(value)) and all(w.lower() not in NOT_NAMES for w in words)
        ok = ok and (len(words) == 1 or all(is_name_word(w) for w in words))
        return [FactChange("name", title(value))] if ok else []
    if key in ("location", "from"):
        place = take_place(value)
        if not place or place != value:
            return []
        return [FactChange("location", place, remove_from="from" if key == "from" else None)]
    if key == "job":
        job = take_job(value, need_lexicon=False)
        return [FactChange("job", job[0])] if job and job[0] == value and len(value.split()) <= 4 else []
    if key == "employer":
        org = take_org(value)
        return [FactChange("employer", org)] if org else []
    if key == "birthday":
        return [FactChange("birthday", value)] if re.search(r"\d", value) and len(value) <= 30 else []
    if key == "diet":
        diet = diet_value(value)
        return [FactChange("diet", diet)] if diet else []
    if key == "languages":
        return [FactChange("languages", v) for v in language_items(value)]
    if key == "allergies":
        return [FactChange("allergies", v) for v in allergy_items(value)]
    items = [i.strip() for i in re.split(r",|\band\b", value) if i.strip()]
    return [FactChange(key, i) for i in items if len(i.split()) <= 4]


# A line's label, lower-cased, is one of _LABELS: the line's first word starts with that label's.
_LABEL_STARTS = tuple(sorted({label.split()[0] for label in _LABELS}))


def profile_facts(line: str) -> list[FactChange] | None:
    """The facts of one profile-card line ("Age: 26"), or None when it is no such line."""
    words = line.split(None, 1)
    if not words or not words[0].lower().startswith(_LABEL_STARTS):
        return None  # no label of _LABELS can open it (the patterns below would find none)
    m = _LABEL_COLON.match(line) or _LABEL.match(line)
    if not m:
        return None
    label = " ".join(m.group("label").lower().split())
    key = _LABELS.get(label)
    if key is None:
        return None
    if label.isascii() and not re.search(r"[:=]|\s-\s", line):
        return None  # "work sucks": a word label needs its colon (an emoji label does not)
    found = _profile_value(key, m.group("value"))
    return None if key == "name" and not found else found  # then the sentence rules read it


# -- jobs described by what people do -------------------------------------------------------

_ACTIVITIES = {
    "cut hair": "hairdresser",
    "fix bikes": "bike mechanic",
    "fix cars": "mechanic",
    "fix computers": "computer technician",
    "write code": "programmer",
    "write software": "software developer",
    "sell insurance": "insurance salesperson",
    "sell houses": "real estate agent",
    "do plumbing": "plumber",
    "do taxes": "accountant",
    "build houses": "builder",
    "deliver packages": "courier",
    "deliver mail": "mail carrier",
    "fly planes": "pilot",
}
_NOT_SUBJECTS = frozenset(
    [
        "kids",
        "children",
        "people",
        "adults",
        "students",
        "them",
        "myself",
        "you",
        "a",
        "an",
        "the",
        "at",
        "online",
        "part",
        "full",
        "and",
        "in",
        "for",
        "how",
        "my",
        "our",
        "me",
        "him",
        "her",
        "us",
        "classes",
        "class",
    ]
)
_TEACH = rx(
    I_ + r"(?:'m|\s+am)?\s+" + ADV + r"(?:teach|teaching)\s+(?P<subject>[a-z]+)\b",
    first="i",
)
_DRIVE = rx(
    I_ + r"\s+" + ADV + r"drive\s+(?:an?\s+)?(?P<vehicle>bus|taxi|cab|truck|lorry|tram|train|forklift|"
    r"ambulance|school\s+bus|delivery\s+van)\b",
    first="i",
)
_DOING = rx(
    I_ + r"\s+" + ADV + r"(?P<doing>(?:cut|fix|write|sell|do|build|deliver|fly)\s+[a-z]+)\b",
    first="i",
)
_STARTED_AS = rx(
    I_
    + r"(?:'ve|\s+have)?\s+"
    + ADV
    + r"(?:(?:started|began)\s+(?:working\s+|work\s+)?|(?:got\s+)?hired\s+)as\s+"
    r"(?P<a>an?\s+)?",
    first="i",
)
_WORK_IN = rx(
    I_ + r"\s+" + ADV + r"work\s+in\s+(?P<field>[a-z]+(?:\s+[a-z]+)?|[A-Z]{2,4})\s+(?=(?:at|for)\s+[A-Z0-9])",
    first="i",
)


def doings(clause: str) -> Iterator[FactChange]:
    """Jobs told by what people do: "I teach chemistry", "I drive a bus", "I work in HR at Unilever"."""
    for m in triggers(clause, _TEACH):
        if m.group("subject").lower() not in _NOT_SUBJECTS:
            yield FactChange("job", m.group("subject") + " teacher")
    for m in triggers(clause, _DRIVE):
        yield FactChange("job", " ".join(m.group("vehicle").split()) + " driver")
    for m in triggers(clause, _DOING):
        doing = _ACTIVITIES.get(" ".join(m.group("doing").lower().split()))
        if doing:
            yield FactChange("job", doing)
    for m in triggers(clause, _STARTED_AS):
        job = take_job(clause[m.end() :], need_lexicon=not m.group("a"))
        if job:
            yield FactChange("job", job[0])
            yield from after_job(job[1])
    for m in triggers(clause, _WORK_IN):
        field = m.group("field")
        if field.lower() not in _NOT_SUBJECTS and not field.endswith("ing"):
            yield FactChange("job", field)
            yield from after_job(clause[m.end() :])
