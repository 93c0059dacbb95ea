"""Follow-ups, opt in: the day after a plan someone mentioned, the bot asks once how it went.

`/followups on|off` keeps the person's choice as their fact `followups` in this chat's memory
(default off; a group counts only if they opted in in that group). `notice` reads every
message of someone who opted in for a dated plan of their own (`plans.py`, no model)
and keeps it as a reminder of another kind (its `every` is `{"followup": EVENT}`, no
recurrence), so storage, export, /forgetme, the chat's alarm and exactly-once delivery are the
reminders' own. The check-in is the day after, at `[followups] checkin_time` local, moved out
of quiet hours; at most one a day per person in a chat (the code decides: a second plan on a
day already taken is not kept). The courier checks the daily caps before asking.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, time, timedelta
from typing import Any, Final

from bot.chat.commands.registry import Arg, Command, CommandContext
from bot.chat.memory.gateway import MemoryGateway
from bot.chat.proactive.plans import candidate, detect_plan
from bot.chat.proactive.reminder_routes import Reminder, ReminderApi
from bot.chat.proactive.when import Every, every_of, zone
from bot.chat.types import CommandResult, IncomingMessage
from bot.config import FollowupSettings, ReminderSettings, Settings
from memory_engine.reminders.wire import ReminderRequest

log = logging.getLogger(__name__)

FOLLOWUPS_FACT = "followups"
MARK: Final = "followup"


def is_followup(every: Every | None) -> bool:
    """True for a follow-up kept as a reminder (its `every` names the event, not a recurrence)."""
    return bool(every) and MARK in (every or {})


def followup_text(r: Reminder) -> str:
    """What the chat reads: the person, and how their event went."""
    event = str((every_of(r) or {}).get(MARK) or "plan")
    who = f"{r['author']}, how" if r.get("author") else "How"
    return f"{who} did your {event} go?"


def _hm(value: str) -> time:
    hour, minute = (int(x) for x in value.split(":"))
    return time(hour, minute)


def _quiet(at: time, settings: FollowupSettings) -> bool:
    start, end = _hm(settings.quiet_start), _hm(settings.quiet_end)
    if start <= end:
        return start <= at < end
    return at >= start or at < end  # across midnight


def checkin_at(event_day: Any, tz: str, settings: FollowupSettings) -> datetime:
    """The check-in (UTC): the day after `event_day` at the check-in time local, out of quiet hours."""
    at = _hm(settings.checkin_time)
    if _quiet(at, settings):
        at = _hm(settings.quiet_end)
    local = datetime.combine(event_day + timedelta(days=1), at).replace(tzinfo=zone(tz))
    return local.astimezone(UTC).astimezone(zone(tz)).astimezone(UTC)  # a DST gap moves it on


async def person_choices(memory: MemoryGateway, chat: str, author_id: str) -> dict[str, str]:
    """The person's `timezone` and `followups` facts in this chat (absent ones left out)."""
    out: dict[str, str] = {}
    for fact in await memory.facts(chat, kind="fact"):
        if fact.get("author_id") == author_id and fact.get("key") in (FOLLOWUPS_FACT, "timezone"):
            out[str(fact.get("key"))] = str(fact.get("value"))
    return out


async def notice(
    memory: MemoryGateway,
    message: IncomingMessage,
    reminders: ReminderSettings,
    settings: FollowupSettings,
    now: datetime,
) -> Reminder | None:
    """Keep a follow-up when an opted-in person mentions a dated plan of theirs; the kept one, or None."""
    if not message.text or candidate(message.text) is None:  # most messages stop here, no I/O
        return None
    chat = message.chat_key
    choices = await person_choices(memory, chat, message.author_id)
    if choices.get(FOLLOWUPS_FACT) != "on":
        return None
    tz = choices.get("timezone") or reminders.default_timezone
    plan = detect_plan(message.text, now, tz, reminders.languages)
    if plan is None:
        return None
    due = checkin_at(plan.day, tz, settings)
    api = ReminderApi(memory.client)
    day = due.astimezone(zone(tz)).date()
    for r in await api.pending(chat, message.author_id):
        taken = datetime.fromtimestamp(r["due_at"] / 1000, UTC).astimezone(zone(tz)).date()
        if is_followup(every_of(r)) and taken == day:
            return None  # at most one follow-up a day per person
    body: ReminderRequest = {
        "text": f"follow-up: your {plan.event} on {plan.day.isoformat()}",
        "due_at": int(due.timestamp() * 1000),
        "author": message.author,
        "author_id": message.author_id,
        "tz": tz,
        "every": {MARK: plan.event},
    }
    return await api.add(chat, body)


async def hook(
    memory: MemoryGateway, message: IncomingMessage, settings: Settings, now: datetime
) -> Reminder | None:
    """The pipeline's one hook: `notice`, whose failure never costs the message its answer."""
    try:
        return await notice(memory, message, settings.reminders, settings.followups, now)
    except Exception as err:
        log.warning("follow-up not kept (%s)", err)
        return None


def confirmation(r: Reminder) -> str:
    """What the person reads when a plan of theirs was kept: the plan, and when they will be asked."""
    event = str((r.get("every") or {}).get(MARK) or "plan")
    local = datetime.fromtimestamp(r["due_at"] / 1000, UTC).astimezone(zone(r["tz"]))
    when = f"{local:%A} {local.day} {local:%B} at {local:%H:%M}"
    return f"(I'll ask you how your {event} went on {when}; /followups off stops that.)"


async def cancel_pending(api: ReminderApi, chat: str, author_id: str) -> int:
    """Cancel the person's pending follow-ups in this chat; how many."""
    gone = 0
    for r in await api.pending(chat, author_id):
        if is_followup(every_of(r)):
            await api.cancel(chat, r["id"], author_id)
            gone += 1
    return gone


async def followups(ctx: CommandContext) -> CommandResult:
    """`/followups on|off`: opt in or out of day-after check-ins in this chat."""
    choice = ctx.args.strip().lower()
    api = ReminderApi(ctx.memory.client)
    chat, who = ctx.chat, ctx.message.author_id
    if choice not in ("on", "off"):
        state = (await person_choices(ctx.memory, chat, who)).get(FOLLOWUPS_FACT, "off")
        return CommandResult(f"Follow-ups are {state} for you here. /followups on or /followups off.")
    await api.set_followups(chat, ctx.message.author, who, choice == "on")
    if choice == "on":
        return CommandResult(
            'Follow-ups on: when you mention a plan with a date here ("my interview is on Thursday"), '
            "I'll ask the day after how it went. /followups off stops them."
        )
    gone = await cancel_pending(api, chat, who)
    return CommandResult(f"Follow-ups off here; {gone} pending check-in(s) cancelled.")


COMMANDS = (
    Command(
        "followups",
        "on|off: the day after a plan you mention, I ask how it went (off by default)",
        followups,
        args=(Arg("choice", "on or off"),),
    ),
)
