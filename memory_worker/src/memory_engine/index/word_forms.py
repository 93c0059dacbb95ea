"""Word forms the Porter stemmer does not join: irregular English forms and British/American spellings.

FTS5's `porter` tokenizer joins regular forms (walk, walked, walking) but not irregular
ones (meet/met, buy/bought) nor spelling variants (favourite/favorite). A query term found
here is searched together with the other forms of its group, as OR-ed alternatives that
count as one term (see `retrieval._select`). General English only: the groups were written
from grammar tables, not from any benchmark's words.
"""

from __future__ import annotations

# Each group: the forms of one word. Only forms that Porter stems differently need listing.
# The light verbs (LIGHT_VERBS) are not expanded: their meaning is in their object
# ("make a cake", "take a class", "give a talk"), so their other forms match turns about
# anything else (measured: benchmarks/README.md). do, have, get and go are stopwords.
LIGHT_VERBS = frozenset(["do", "give", "have", "make", "take", "get", "go"])
_IRREGULAR = [
    "arise arose arisen",
    "awake awoke awoken",
    "bear bore borne",
    "beat beaten",
    "become became",
    "begin began begun",
    "bend bent",
    "bind bound",
    "bite bit bitten",
    "bleed bled",
    "blow blew blown",
    "break broke broken",
    "breed bred",
    "bring brought",
    "build built",
    "burn burnt",
    "buy bought",
    "catch caught",
    "choose chose chosen",
    "cling clung",
    "come came",
    "creep crept",
    "deal dealt",
    "dig dug",
    "draw drew drawn",
    "dream dreamt",
    "drink drank drunk",
    "drive drove driven",
    "eat ate eaten",
    "fall fell fallen",
    "feed fed",
    "feel felt",
    "fight fought",
    "find found",
    "flee fled",
    "fly flew flown",
    "forbid forbade forbidden",
    "forget forgot forgotten",
    "forgive forgave forgiven",
    "freeze froze frozen",
    "give gave given",
    "grind ground",
    "grow grew grown",
    "hang hung",
    "hear heard",
    "hide hid hidden",
    "hold held",
    "keep kept",
    "kneel knelt",
    "know knew known",
    "lay laid",
    "lead led",
    "lean leant",
    "leap leapt",
    "learn learnt",
    "leave left",
    "lend lent",
    "lie lay lain",
    "lose lost",
    "make made",
    "mean meant",
    "meet met",
    "pay paid",
    "ride rode ridden",
    "ring rang rung",
    "rise rose risen",
    "run ran",
    "say said",
    "see saw seen",
    "seek sought",
    "sell sold",
    "send sent",
    "sew sewn",
    "shake shook shaken",
    "shine shone",
    "shoot shot",
    "show shown",
    "shrink shrank shrunk",
    "sing sang sung",
    "sink sank sunk",
    "sit sat",
    "sleep slept",
    "slide slid",
    "speak spoke spoken",
    "speed sped",
    "spend spent",
    "spin spun",
    "spit spat",
    "spring sprang sprung",
    "stand stood",
    "steal stole stolen",
    "stick stuck",
    "sting stung",
    "stink stank stunk",
    "strike struck",
    "swear swore sworn",
    "sweep swept",
    "swim swam swum",
    "swing swung",
    "take took taken",
    "teach taught",
    "tear tore torn",
    "tell told",
    "think thought",
    "throw threw thrown",
    "understand understood",
    "wake woke woken",
    "wear wore worn",
    "weave wove woven",
    "weep wept",
    "win won",
    "wind wound",
    "withdraw withdrew withdrawn",
    "write wrote written",
    # Irregular plurals.
    "child children",
    "foot feet",
    "goose geese",
    "knife knives",
    "leaf leaves",
    "life lives",
    "man men",
    "mouse mice",
    "person people",
    "tooth teeth",
    "wife wives",
    "wolf wolves",
    "woman women",
    "shelf shelves",
    "half halves",
]

# British and American spellings (each group also stems its regular forms). Porter already
# joins some (travelled/traveled, cancelled/canceled, modelling/modeling): listing those
# would count one word twice in bm25 (tests/engine/test_retrieval.py checks that none is listed).
_SPELLINGS = [
    "favourite favorite",
    "favourites favorites",
    "colour color",
    "coloured colored",
    "colourful colorful",
    "flavour flavor",
    "honour honor",
    "humour humor",
    "labour labor",
    "neighbour neighbor",
    "neighbourhood neighborhood",
    "behaviour behavior",
    "harbour harbor",
    "rumour rumor",
    "savoury savory",
    "centre center",
    "theatre theater",
    "metre meter",
    "litre liter",
    "fibre fiber",
    "jewellery jewelry",
    "organise organize",
    "organised organized",
    "organisation organization",
    "realise realize",
    "realised realized",
    "recognise recognize",
    "recognised recognized",
    "apologise apologize",
    "apologised apologized",
    "practise practice",
    "analyse analyze",
    "defence defense",
    "licence license",
    "offence offense",
    "grey gray",
    "mum mom",
    "mummy mommy",
    "programme program",
    "tyre tire",
    "catalogue catalog",
    "dialogue dialog",
    "aeroplane airplane",
    "pyjamas pajamas",
    "mould mold",
    "plough plow",
    "cosy cozy",
    "sceptical skeptical",
    "aluminium aluminum",
    "moustache mustache",
    "doughnut donut",
    "skilful skillful",
    "cheque check",
    "storey story",
]


def _table(groups: list[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for line in groups:
        forms = tuple(line.split())
        for form in forms:
            # A form in two groups (lay: lie's past and lay itself) joins both.
            out[form] = tuple(dict.fromkeys(out.get(form, ()) + forms))
    return out


def build_table(light_verbs: bool = False) -> dict[str, tuple[str, ...]]:
    """Each listed form -> its group; the light verbs' groups only with `light_verbs`."""
    return _table([g for g in _IRREGULAR if light_verbs or g.split()[0] not in LIGHT_VERBS] + _SPELLINGS)


WORD_FORMS = build_table()


def forms_of(term: str) -> tuple[str, ...]:
    """The term and its other forms (the term first); just the term when it has none."""
    group = WORD_FORMS.get(term)
    if not group:
        return (term,)
    return (term, *(f for f in group if f != term))
