"""The memory API's wire types: every request body, query and answer, as TypedDicts.

The route table (`routes.py`) names one of these per route; the OpenAPI document
(`openapi.py`) is generated from them, the contract tests check every answer against it,
and the bot imports them (`bot/chat/memory/client.py`), so a field is spelled once for both sides.
`NotRequired` marks a key an answer may leave out; `X | None` a key that may be null.
"""

from typing import Literal, NotRequired, TypedDict

from memory_engine.reminders.wire import Reminder

Mode = Literal["auto", "full"]
Role = Literal["user", "assistant", "system"]
FactKind = Literal["fact", "note"]


# -- pieces ---------------------------------------------------------------------------


class Message(TypedDict):
    """One stored message (`id` is the worker's number, `message_id` the caller's key)."""

    id: int
    role: Role
    author: str
    author_id: str
    text: str
    ts: str
    message_id: str | None


class ScoredMessage(Message):
    """A retrieved message with its positive relevance `score` (higher is better)."""

    score: float


class ExportedMessage(Message):
    """A message in an export, with the person it answers."""

    reply_to_author_id: str | None


class Fact(TypedDict):
    """One fact or note about an author (`superseded_at` only in a history view)."""

    id: int
    author: str
    author_id: str
    key: str
    value: str
    kind: FactKind
    updated_at: str
    superseded_at: NotRequired[str | None]


class TierUsage(TypedDict):
    """The model calls of one tier: counts, tokens and cost."""

    calls: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class AuthorUsage(TypedDict):
    """One person's use today (UTC), for the daily caps."""

    day: str
    author_id: str
    messages: int
    calls: int
    errors: int
    cost_usd: float
    chat_messages: int


class UsageRow(TypedDict):
    """One recorded model call."""

    ts: str
    tier: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float | None
    cost_usd: float
    ok: bool
    error: str | None


class DayUsage(TypedDict):
    """One person's model use on one day (exports)."""

    day: str
    calls: int
    errors: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class Usage(TypedDict):
    """`prompt_tokens` and `completion_tokens` of a model call."""

    prompt_tokens: NotRequired[int]
    completion_tokens: NotRequired[int]


class ImportedMessage(TypedDict):
    """One message of a bulk import (`role` defaults to user; `ts` kept; an answer's `reply_to_*`: whose)."""

    text: str
    role: NotRequired[Role | None]
    author: NotRequired[str | None]
    author_id: NotRequired[str | None]
    message_id: NotRequired[str | None]
    ts: NotRequired[str | None]
    reply_to_message_id: NotRequired[str | None]
    reply_to_author_id: NotRequired[str | None]


# -- requests -------------------------------------------------------------------------


class TurnRequest(TypedDict):
    """A user message to record; `message_id` makes a repeat harmless."""

    text: str
    author: NotRequired[str | None]
    author_id: NotRequired[str | None]
    message_id: NotRequired[str | None]
    mode: NotRequired[Mode | None]
    title: NotRequired[str | None]  # the chat's name on its platform (the dashboard shows it)


class ReplyRequest(TypedDict):
    """One model attempt: the assistant's words when `ok`, the usage row either way."""

    tier: str
    model: str
    text: NotRequired[str | None]
    usage: NotRequired[Usage | None]
    latency_ms: NotRequired[float | None]
    cost_usd: NotRequired[float | None]
    ok: NotRequired[bool]
    message_id: NotRequired[str | None]
    error: NotRequired[str | None]
    author_id: NotRequired[str | None]
    reply_to_message_id: NotRequired[str | None]
    reply_to_author_id: NotRequired[str | None]


class SettingsRequest(TypedDict):
    """Give `mode`, `persona` ("" resets it) or both."""

    mode: NotRequired[Mode | None]
    persona: NotRequired[str | None]


class ImportRequest(TypedDict):
    """A batch of an import: `more: true` on all but the last (indexed once, at the end); `remaining`: a hint.

    Without `more` the batch's messages (and those of earlier batches sent with it) are
    indexed before the answer; with it, they are stored and indexed by the last batch, or
    before anything reads the index, whichever comes first. `remaining` (0 to 10^9): how
    many messages of the import follow this batch. A hint the host never relies on: the
    local host then skips writing the rows its retention cap would delete before the import
    ends (their facts are kept), and the chat ends up exactly as without it.
    """

    messages: list[ImportedMessage]
    more: NotRequired[bool]
    remaining: NotRequired[int | None]
    # With `batch` (1 for the first): an import's batches share the id; a later batch is refused
    # (409) once the chat, or someone in it, was forgotten since the first.
    import_id: NotRequired[str]
    batch: NotRequired[int]
    title: NotRequired[str | None]  # the chat's name in the export (the dashboard shows it)


class NoteRequest(TypedDict):
    """A note to keep in every prompt of the chat."""

    text: str
    author: NotRequired[str | None]
    author_id: NotRequired[str | None]


# -- queries (all values arrive as text) ------------------------------------------------


class SearchQuery(TypedDict):
    """`q` the text to search for, `k` how many results (1-50, default 3)."""

    q: NotRequired[str]
    k: NotRequired[int]


class FactsQuery(TypedDict):
    """`history=1` adds superseded values; `kind` keeps only facts or notes."""

    history: NotRequired[str]
    kind: NotRequired[FactKind]


class AuthorQuery(TypedDict):
    """`author_id` narrows the answer to one person (or checks it is theirs)."""

    author_id: NotRequired[str]


class ExportQuery(TypedDict):
    """One person's export with `author_id`; the next page with `after` (and `upto` of the first)."""

    author_id: NotRequired[str]
    after: NotRequired[int]
    upto: NotRequired[int]
    limit: NotRequired[int]


# -- answers --------------------------------------------------------------------------


class Health(TypedDict):
    """`GET /health`: the local host adds its storage state with `?detail=1` or when broken."""

    ok: bool
    version: str


class TurnAnswer(TypedDict):
    """The memory prompt for a message and what it was built from."""

    prompt: str
    recent: list[Message]
    retrieved: list[ScoredMessage]
    facts: list[Fact]
    summary: str
    mode: Mode
    message_id: str
    id: int
    usage_today: dict[str, TierUsage]
    notes: list[Fact]
    persona: str
    topic_started_at: str | None
    usage_today_author: AuthorUsage
    fact_history: list[Fact]  # the newest superseded values of single-valued keys, oldest first


class ReplyAnswer(TypedDict):
    """The recorded reply (`id` null for a failed attempt, which stores no message)."""

    message_id: str | None
    id: int | None
    duplicate: NotRequired[bool]


class SearchAnswer(TypedDict):
    """Older messages ranked as a turn retrieves them."""

    results: list[ScoredMessage]


class FactsAnswer(TypedDict):
    """Facts and notes, oldest first: in the order each value was set (a changed fact comes last)."""

    facts: list[Fact]


class SummaryAnswer(TypedDict):
    """The rolling summary and how far it reaches."""

    summary: str
    compactions: int
    summarized_upto: int
    updated_at: str | None


class CompactAnswer(SummaryAnswer):
    """The summary after `compacted` batches (`error` when the summarizer failed part way)."""

    compacted: int
    error: NotRequired[str]


class UsageAnswer(TypedDict):
    """Totals per tier (all time and today), the recent calls, one person's day with `author_id`."""

    tiers: dict[str, TierUsage]
    today: dict[str, TierUsage]
    recent: list[UsageRow]
    today_author: NotRequired[AuthorUsage]


class StatsAnswer(TypedDict):
    """Counts of messages (kept, un-summarized, summarized) and facts, the mode, the last prompt."""

    total_messages: int
    active_messages: int
    archived_messages: int
    facts: int
    mode: Mode
    last_prompt: NotRequired[str]


class SettingsAnswer(TypedDict):
    """The chat's settings."""

    mode: Mode
    persona: str


class ImportAnswer(TypedDict):
    """How many messages were stored and how many were repeats."""

    imported: int
    skipped: int


class ForgetChatAnswer(TypedDict):
    """`deleted` false when the chat had nothing to forget."""

    deleted: bool


class ForgetAuthorAnswer(TypedDict):
    """What went: their messages, the bot's replies to them, their facts."""

    deleted: bool
    messages: NotRequired[int]
    replies: NotRequired[int]
    facts: NotRequired[int]


class ExportCounts(TypedDict):
    """How much the export holds."""

    messages: int
    facts: int
    notes: int


class ExportInfo(TypedDict):
    """What the export is; `upto` is the newest message it covers (pass it to later pages)."""

    format: str
    chat_key: str
    author_id: str | None
    upto: int
    generated_at: NotRequired[str]
    counts: NotRequired[ExportCounts]


class ExportSettings(SettingsAnswer):
    """The settings as exported, with the start of the current topic."""

    topic_started_at: str | None


class ExportPage(TypedDict):
    """One page of an export: the first holds everything but later messages."""

    export: ExportInfo
    messages: list[ExportedMessage]
    next_after: int | None
    settings: NotRequired[ExportSettings]
    facts: NotRequired[list[Fact]]
    notes: NotRequired[list[Fact]]
    summary: NotRequired[SummaryAnswer]
    usage: NotRequired[dict[str, object]]
    reminders: NotRequired[list[Reminder]]


class NotesAnswer(TypedDict):
    """The chat's current notes, oldest first."""

    notes: list[Fact]


class NoteAnswer(TypedDict):
    """The kept note (`duplicate` when the same note was kept already)."""

    note: Fact
    duplicate: bool


class ForgetFactAnswer(TypedDict):
    """The fact or note as it was superseded."""

    removed: Fact


class TopicAnswer(TypedDict):
    """Where the current topic starts: `recent` holds only messages after `after_id`."""

    topic_started_at: str | None
    after_id: int


class ErrorAnswer(TypedDict):
    """Every refusal: what is wrong."""

    error: str
