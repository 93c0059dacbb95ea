"""What the dashboard's API routes take and answer (TypedDicts, checked by mypy and the OpenAPI document)."""

from typing import NotRequired, TypedDict


class Person(TypedDict):
    """One person of a chat: their newest name, every other name they used, their messages."""

    author_id: str
    author: str
    aliases: list[str]
    messages: int
    last_seen: str


class PeopleAnswer(TypedDict):
    """The people of a chat (most messages first) and where each fact came from (fact id -> message id)."""

    people: list[Person]
    sources: dict[str, int]


class ContextMessage(TypedDict):
    """One message shown around another."""

    id: int
    role: str
    author: str
    author_id: str
    text: str
    ts: str
    message_id: str | None  # the platform's id (its own link to the message is made from it)


class AroundQuery(TypedDict):
    """How many messages before and after (0 to 20; 3 unless given)."""

    n: NotRequired[int]


class AroundAnswer(TypedDict):
    """A message (`target`, 0 when it is gone) and the messages around it, oldest first."""

    target: int
    messages: list[ContextMessage]


class UsageDay(TypedDict):
    """One tier's model calls on one UTC day."""

    day: str
    tier: str
    calls: int
    errors: int
    cost_usd: float


class ChatReport(TypedDict):
    """What a chat tells the directory after a write (absolute values: a repeat is harmless).

    `people`: the number of people, when the chat counted them (an import, a forgetting);
    `authors`: people seen by this write (added when new); `usage`: whole days' totals.
    """

    chat_key: str
    title: NotRequired[str]
    messages: NotRequired[int]
    last_ts: NotRequired[str]
    authors: NotRequired[list[str]]
    people: NotRequired[int | None]
    usage: NotRequired[list[UsageDay]]
    erased: NotRequired[bool]


class ReportAnswer(TypedDict):
    """The directory took the report."""

    ok: bool


class DirectoryEntry(TypedDict):
    """One chat in the directory: what the overview lists."""

    chat_key: str
    title: str
    platform: str
    messages: int
    people: int
    last_ts: str
    calls_month: int
    cost_month: float


class DirectoryQuery(TypedDict):
    """Which chats (`chats`: only these keys; absent: all) and from which day the usage."""

    chats: NotRequired[list[str] | None]
    since: NotRequired[str | None]
    month: NotRequired[str | None]


class DirectoryAnswer(TypedDict):
    """Every chat of the directory (newest activity first) and their usage per day and tier."""

    chats: list[DirectoryEntry]
    days: list[UsageDay]


class AuthRequest(TypedDict):
    """One step of the dashboard's login state in the directory object.

    `action`: `attempt` (count a login attempt of `key`, a client; ok while under `limit`
    in the window ending `until`), `redeem` (use a one-time link's nonce once), `start` /
    `check` / `end` (a session id, valid until `until`). `now`: the caller's clock, in ms.
    """

    action: str
    key: str
    until: NotRequired[int]
    now: int
    limit: NotRequired[int]


class AuthAnswer(TypedDict):
    """Allowed (`attempt`), first use (`redeem`), valid (`check`), done (`start`, `end`)."""

    ok: bool
