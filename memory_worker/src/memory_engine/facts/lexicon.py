"""Word lists for the rule-based fact extractor (general English, not tuned to any test set)."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words before the trigger in the same clause that make the statement not a current fact about
# the speaker: negation, modality and hypotheticals, past states, hedges and reported speech.
NEGATION = _words("not n't never no nobody nothing neither nor hardly barely without none")
MODAL = _words(
    "would 'd could might may should shall will 'll gonna wanna want wants wanted wish wished "
    "hope hoping plan planning if unless whether suppose supposing imagine pretend someday "
    "maybe perhaps dream dreaming considering consider thinking rather"
)
PAST = _words("used was were had ago formerly previously once when whenever until before after")
HEDGE = _words("wonder wondering guess unsure apparently seems seemed")
REPORT = _words(
    "think thinks thought believe believes believed say says said tell tells told claim claims "
    "claimed assume assumes assumed know knows knew heard reckon reckons suspect"
)
OWN_REPORT = _words("said say told mentioned")
GUARD_WORDS = NEGATION | MODAL | PAST | HEDGE | REPORT
GUARD_BIGRAMS = frozenset(
    {
        ("used", "to"),
        ("going", "to"),
        ("about", "to"),
        ("no", "longer"),
        ("not", "sure"),
        ("back", "in"),
        ("one", "day"),
        ("some", "day"),
        ("as", "if"),
        ("even", "if"),
    }
)

# Adverbs and emphasis allowed between "I" and the verb ("I really dislike", "I do love").
ADVERBS = _words(
    "really absolutely totally truly genuinely honestly just also still actually now currently "
    "definitely seriously do so quite kinda deeply madly simply mostly mainly always both all "
    "personally recently finally already officially happily proudly secretly sincerely positively "
    "utterly completely certainly especially particularly"
)

# Fillers that open or close a value without belonging to it.
LEAD_FILLERS = _words(
    "actually really also just now currently honestly basically still probably definitely "
    "especially particularly both mostly mainly and or plus even"
)
TIME_WORDS = _words(
    "now today tonight yesterday currently nowadays anymore lately recently again already "
    "too also though tbh lol haha btw tho permanently finally sometimes often occasionally etc"
)
TIME_HEADS = _words("last this next every each past")
TIME_UNITS = _words(
    "week month year night morning evening weekend summer winter spring autumn fall time day "
    "weeks months years days decade monday tuesday wednesday thursday friday saturday sunday"
)

# Words that cannot be a stored preference on their own or at the start of one.
VAGUE_START = _words(
    "it that this these those them you him her me us everything nothing anything something "
    "everyone everybody anyone anybody someone somebody how when what where why who whatever "
    "whenever if whether my your his their our its to so too very much lots a-lot such which "
    "in on at during for with from after before by about of than like as because but not no "
    "neither nor none etc"
)
PRONOUN_TOKENS = _words("you me him her them us it i i'm myself yourself")
VAGUE_VALUES = frozenset(
    {
        "a lot",
        "the idea",
        "the way",
        "the fact",
        "the thought",
        "the feeling",
        "the most",
        "the best",
        "most",
        "best",
        "more",
        "less",
        "one",
        "some",
        "all",
        "both",
        "either",
        "any",
        "people",
        "stuff",
        "things",
        "life",
        "etc",
        "so on",
        "whatever",
    }
)

# Infinitives after "I like to" that are about speaking or thinking, not an activity.
COGNITIVE_VERBS = _words(
    "think believe know say tell imagine pretend see hear ask point make keep remind let be have "
    "get mention admit break interrupt bother disappoint complain hate call assume guess add note "
    "clarify stress emphasize emphasise start begin thank apologize apologise remember"
)

# "rock and roll" is one thing; a list splitter must not cut it.
BINOMIALS = (
    "rock and roll",
    "fish and chips",
    "mac and cheese",
    "macaroni and cheese",
    "salt and pepper",
    "drum and bass",
    "black and white",
    "peanut butter and jelly",
    "bread and butter",
    "pen and paper",
    "dungeons and dragons",
    "law and order",
    "rhythm and blues",
    "sweet and sour",
    "hide and seek",
    "trial and error",
    "cheese and crackers",
    "gin and tonic",
    "strawberries and cream",
    "bacon and eggs",
    "ham and cheese",
    "tom and jerry",
    "pride and prejudice",
    "arts and crafts",
    "rice and beans",
    "chips and salsa",
    "cookies and cream",
    "green eggs and ham",
    "pork and beans",
    "surf and turf",
    "bed and breakfast",
    "sweet and salty",
)

# Not a place: "I live in fear", "I live in the moment".
ABSTRACT = _words(
    "fear fears hope hopes denial sin poverty luxury peace harmony terror dread misery comfort "
    "style chaos moment past present future dreams dream head world bubble shadow shadows hell "
    "heaven paradise sweatpants pajamas pyjamas debt anxiety hiding shame silence squalor "
    "ignorance limbo awe wonder fantasy love panic secret solitude seclusion isolation hopes "
    "constant perpetual eternal here there abroad nearby downtown town city countryside area "
    "suburbs house flat apartment home place village neighbourhood neighborhood"
)
DETERMINERS = _words("a an my your his her our their this that these those some any every each no one")

# Capitalised words that are not a name ("I'm Sorry", "My dog Is...").
NOT_NAMES = _words(
    "i i'm the a an and but or so is was has had just also really very today tomorrow yesterday "
    "tonight monday tuesday wednesday thursday friday saturday sunday sorry back here there home "
    "fine good great ok okay yes no not please thanks thank hi hello hey lol haha ready done busy "
    "free new tired happy sad late sure going in on out off at from with who what where when why "
    "how which crazy old it its this that my your his her our their we you he she they me him "
    "them us if then than as be am are been being do does did can could would should will shall "
    "may might must never always maybe soon later now well oh ah um uh mr mrs ms dr st "
    "english british french german spanish italian american canadian brazilian portuguese dutch "
    "polish russian chinese japanese korean indian irish scottish welsh mexican swedish norwegian "
    "danish finnish greek turkish australian african european asian swiss austrian belgian "
    "ukrainian czech hungarian romanian argentinian colombian chilean peruvian israeli egyptian "
    "catholic christian muslim jewish buddhist hindu atheist vegan vegetarian gay straight "
    "bi single married divorced retired unemployed important weird strange long short difficult "
    "hard easy unusual common boring nice pretty special cool famous normal different same "
    "names name sick ill hungry thirsty bored angry upset excited confused lost stuck glad proud "
    "alone awake asleep online offline available nobody everyone everybody anyone anybody someone "
    "somebody none all same also nothing something everything"
)


def _seq(text: str) -> tuple[str, ...]:
    return tuple(text.split())


NUMBER_WORDS = _seq(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
)
TENS_WORDS = _seq("twenty thirty forty fifty sixty seventy eighty ninety")  # from 20 up
# Words that end a place or a job phrase typed in lower case ("berlin with my wife").
PLACE_STOP = _words(
    "with near for since at on by and but because in from to of as so until where which who that "
    "when while right close next outside around about like"
)
JOB_STOP = _words(
    "at for from in with and but who which that by on since because of as to or so near "
    "lol haha lmao btw tbh tho rn atm now too there here these actually technically anyway really "
    "obviously though"
)

# Capitalised words that cannot open a place or an organisation ("I live in Here").
NOT_PROPER = _words(
    "i i'm the a an and but or so is was it its this that my your his her our their we you he she "
    "they me him them us here there home now then today tomorrow yesterday tonight not no yes if "
    "what when where which who why how fear hope denial"
)

# Heads of "I'm a ..." that make it an occupation.
JOBS = _words(
    "accountant actor actress administrator analyst animator announcer anthropologist archaeologist "
    "architect archivist artist assistant astronaut astronomer athlete attorney auditor author "
    "baker banker barber barista bartender biologist blacksmith blogger bookkeeper botanist "
    "builder butcher butler buyer captain carpenter cashier caterer ceo cfo cto chef chemist "
    "chiropractor cleaner clerk coach composer consultant contractor cook coordinator "
    "copywriter counselor counsellor courier curator dancer dentist designer detective dev developer "
    "dietitian diplomat director dispatcher doctor driver drummer ecologist economist editor "
    "educator electrician engineer entrepreneur farmer firefighter fisherman florist "
    "founder freelancer gardener geologist guard guide hairdresser historian housekeeper "
    "illustrator instructor intern interpreter investigator janitor jeweler jeweller journalist "
    "judge labourer laborer lawyer lecturer librarian lifeguard linguist locksmith machinist "
    "manager marketer mathematician mechanic midwife miner musician nanny navigator neurologist "
    "nurse nutritionist officer operator optician optometrist painter paralegal paramedic "
    "pharmacist philosopher photographer physician physicist physiotherapist pianist pilot plumber "
    "podcaster poet policeman policewoman politician porter postman potter principal producer "
    "professor programmer psychiatrist psychologist publisher radiologist receptionist recruiter "
    "realtor referee reporter researcher roofer sailor salesman saleswoman salesperson scientist "
    "sculptor secretary singer sociologist soldier solicitor songwriter specialist statistician "
    "steward stewardess student supervisor surgeon surveyor tailor teacher technician therapist "
    "trader trainer translator tutor typist undertaker veterinarian vet waiter waitress welder "
    "writer youtuber zoologist"
)
JOB_BAD_MODIFIERS = _words(
    "former ex retired future aspiring wannabe would-be failed frustrated wanna-be budding "
    "big huge massive bad terrible awful good great"
)
NOT_JOB_HEADS = _words("team whole unit group family favour favor hobby joke")
ING_ADJECTIVES = _words(
    "boring exhausting amazing interesting demanding rewarding stressing tiring killing draining "
    "frustrating annoying challenging depressing fulfilling satisfying overwhelming confusing "
    "exciting stressful hard easy fun great awful terrible fine ok okay good bad"
)

# Pets and family, singular form of each spelling.
SPECIES = {
    **{
        w: w
        for w in _words(
            "dog cat puppy kitten hamster rabbit bunny parrot bird budgie canary goldfish fish turtle "
            "tortoise horse pony snake lizard gecko iguana ferret rat mouse hedgehog chinchilla "
            "chicken hen duck goat pig cockatiel cockatoo axolotl frog"
        )
    },
    "dogs": "dog",
    "cats": "cat",
    "puppies": "puppy",
    "kittens": "kitten",
    "hamsters": "hamster",
    "rabbits": "rabbit",
    "bunnies": "bunny",
    "parrots": "parrot",
    "birds": "bird",
    "budgies": "budgie",
    "turtles": "turtle",
    "tortoises": "tortoise",
    "horses": "horse",
    "ponies": "pony",
    "snakes": "snake",
    "lizards": "lizard",
    "geckos": "gecko",
    "ferrets": "ferret",
    "rats": "rat",
    "mice": "mouse",
    "hedgehogs": "hedgehog",
    "chickens": "chicken",
    "hens": "hen",
    "ducks": "duck",
    "goats": "goat",
    "pigs": "pig",
    **{
        w: w
        for w in _words(
            "retriever labrador lab poodle terrier beagle husky spaniel collie bulldog dachshund "
            "chihuahua pug corgi greyhound whippet schnauzer rottweiler doberman boxer dalmatian"
        )
    },
    "golden retriever": "golden retriever",
    "labrador retriever": "labrador retriever",
    "german shepherd": "german shepherd",
    "border collie": "border collie",
    "jack russell": "jack russell",
    "guinea pig": "guinea pig",
    "guinea pigs": "guinea pig",
}
_RELATIONS = (
    "mother mom mum mama mommy mummy father dad daddy papa parent brother sister sibling son "
    "daughter child kid baby wife husband spouse partner boyfriend girlfriend fiancé fiance "
    "fiancée fiancee grandmother grandma granny nan nana grandfather grandpa granddad grandad "
    "grandson granddaughter grandchild aunt auntie aunty uncle cousin niece nephew stepmother "
    "stepmom stepmum stepfather stepdad stepson stepdaughter stepbrother stepsister half-brother "
    "half-sister twin mother-in-law father-in-law brother-in-law sister-in-law son-in-law "
    "daughter-in-law"
)
RELATIONS = {
    **{w: w for w in _RELATIONS.split()},
    **{w + "s": w for w in _RELATIONS.split() if not w.endswith("-in-law") and w != "child"},
    "children": "child",
    "kids": "kid",
    "babies": "baby",
    "grandchildren": "grandchild",
}
# Before a pet or relative: this one is no longer there, or is someone else's.
GONE_WORDS = _words("late deceased dead died passed rip lost former ex estranged departed")
KIN_ADJECTIVES = _words(
    "little big older younger elder eldest youngest oldest baby twin new lovely beautiful sweet "
    "amazing wonderful adorable cute fluffy old tiny rescue adopted two three four five"
)

GREETINGS = _words(
    "hi hello hey hiya howdy greetings yo oh well ok okay so and also btw sorry actually there "
    "all everyone everybody guys folks y'all good morning afternoon evening"
)
