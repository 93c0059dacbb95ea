"""The reminder commands: /remind, /reminders, /unremind, /timezone, and "remind me ..." in words.

A reminder is kept by the chat's memory (the memory worker) and delivered by
`delivery.Courier`; here it is read, confirmed with its exact date and clock time
in the person's time zone (their `/timezone` fact, else the configured default, and the
confirmation says which), listed and cancelled.
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.chat.commands.registry import Arg, Command, CommandContext
from bot.chat.memory.client import MemoryRefused
from bot.chat.proactive.catchup import asks_what_i_missed
from bot.chat.proactive.followups import is_followup
from bot.chat.proactive.reminder_routes import Reminder, ReminderApi
from bot.chat.proactive.when import (
    EXAMPLE,
    ReminderParseError,
    every_of,
    format_every,
    format_when,
    looks_like_request,
    parse_reminder,
    zone,
)
from bot.chat.types import CommandResult
from bot.config import ReminderSettings
from memory_engine.reminders.wire import ReminderRequest
from memory_engine.reminders.zones import known_zone

TIMEZONE_FACT = "timezone"


def _settings(ctx: CommandContext) -> ReminderSettings:
    return ctx.settings.reminders if ctx.settings is not None else ReminderSettings()


async def person_timezone(ctx: CommandContext) -> tuple[str, bool]:
    """(the person's zone, True when it is their own fact rather than the configured default)."""
    facts = await ctx.memory.facts(ctx.chat, kind="fact")
    for fact in facts:
        if fact.get("author_id") == ctx.message.author_id and fact.get("key") == TIMEZONE_FACT:
            known = known_zone(str(fact.get("value")))
            if known is not None:  # one stored before zones were checked is passed over
                return known, True
    return _settings(ctx).default_timezone, False


def _zone_note(tz: str, own: bool) -> str:
    if own:
        return ""
    return f"\n(Time zone {tz} is this bot's default; set yours with /timezone Europe/Lisbon, say.)"


async def remind(ctx: CommandContext) -> CommandResult:
    """`/remind TEXT` and "remind me ...": read, keep, confirm what and exactly when."""
    if not ctx.args.strip():
        return CommandResult(f"Tell me what and when. {EXAMPLE}")
    settings = _settings(ctx)
    tz, own = await person_timezone(ctx)
    try:
        parsed = parse_reminder(ctx.args, ctx.clock(), tz, settings.languages, settings.date_only_time)
    except ReminderParseError as err:
        return CommandResult(str(err))
    body: ReminderRequest = {
        "text": parsed.task,
        "due_at": int(parsed.due.timestamp() * 1000),
        "author": ctx.message.author,
        "author_id": ctx.message.author_id,
        "tz": tz,
        "every": parsed.every,
    }
    try:
        kept = await ReminderApi(ctx.memory.client).add(ctx.chat, body)
    except MemoryRefused as err:
        return CommandResult(f"I couldn't keep that reminder: {err.error}")
    repeat = f", then {format_every(parsed.every)}" if parsed.every else ""
    return CommandResult(
        f"OK, reminder #{kept['id']}: {format_when(parsed.due, tz)}{repeat}: {parsed.task}"
        + _zone_note(tz, own)
    )


def reminder_line(r: Reminder) -> str:
    """`#ID when[, every ...]: text (who)`: one line of /reminders, the number first."""
    due = datetime.fromtimestamp(r["due_at"] / 1000, UTC)
    every = every_of(r)
    repeat = f", {format_every(every)}" if every and not is_followup(every) else ""
    if is_followup(every) and not r["text"].lower().startswith("follow-up"):  # its text says so already
        repeat = " (follow-up)"
    who = f" ({r['author']})" if r.get("author") else ""
    return f"#{r['id']} {format_when(due, r['tz'])}{repeat}: {r['text']}{who}"


async def list_reminders(ctx: CommandContext) -> CommandResult:
    """`/reminders`: the chat's pending reminders, soonest first."""
    pending = await ReminderApi(ctx.memory.client).pending(ctx.chat)
    if not pending:
        return CommandResult(f"No reminders pending here. {EXAMPLE}")
    lines = ["Reminders:", *(reminder_line(r) for r in pending), "/unremind N cancels reminder #N."]
    return CommandResult(ctx.redact("\n".join(lines)))


async def unremind(ctx: CommandContext) -> CommandResult:
    """`/unremind N`: cancel one's own reminder (an admin: anyone's)."""
    number = ctx.args.strip().lstrip("#")
    if not number.isdigit():
        return CommandResult("Which one? /unremind N cancels reminder #N (see /reminders).")
    whose = None if ctx.message.is_admin else ctx.message.author_id
    try:
        gone = await ReminderApi(ctx.memory.client).cancel(ctx.chat, int(number), whose)
    except MemoryRefused as err:
        if err.status == 403:
            return CommandResult(f"Reminder #{number} is someone else's: they or an admin can cancel it.")
        return CommandResult(f"There is no pending reminder #{number} here (see /reminders).")
    return CommandResult(f"Cancelled reminder #{gone['id']}: {gone['text']}")


async def timezone(ctx: CommandContext) -> CommandResult:
    """`/timezone [Area/City]`: show or set one's time zone (kept as a fact)."""
    name = ctx.args.strip()
    if not name:
        tz, own = await person_timezone(ctx)
        whose = "yours" if own else "the default (set yours with /timezone Europe/Lisbon, say)"
        return CommandResult(f"Time zone: {tz}, {whose}.")
    try:
        where = zone(name)
    except ReminderParseError as err:
        return CommandResult(str(err))
    await ReminderApi(ctx.memory.client).set_timezone(
        ctx.chat, ctx.message.author, ctx.message.author_id, where.key
    )
    local = ctx.clock().astimezone(where).strftime("%H:%M")
    return CommandResult(f"Your time zone is now {where.key} (it is {local} there). New reminders use it.")


def command_in_words(text: str) -> str | None:
    """The command a message addressed to the bot asks for in plain words: "remind me ..."
    (remind), "what did I miss?" (catchup); None for anything else."""
    if looks_like_request(text):
        return "remind"
    return "catchup" if asks_what_i_missed(text) else None


COMMANDS = (
    Command(
        "remind",
        "remind you (or the chat) of something at a time: /remind tomorrow at 9 to call the bank",
        remind,
        args=(Arg("text", "when and what, e.g. in 20 minutes to take the bread out", rest=True),),
    ),
    Command("reminders", "the pending reminders of this chat, numbered", list_reminders),
    Command(
        "unremind",
        "cancel reminder #N (your own; admins: anyone's)",
        unremind,
        args=(Arg("number", "the reminder's number in /reminders"),),  # alone: it says how
    ),
    Command(
        "timezone",
        "show or set your time zone for reminders, e.g. /timezone Europe/Lisbon",
        timezone,
        args=(Arg("zone", "an IANA zone name such as Europe/Lisbon"),),
    ),
)
