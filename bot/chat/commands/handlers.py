"""The chat commands, the same on every platform: one registry entry and one handler each.

Admin-only commands refuse a non-admin with `refused(name)`, the same words on every
platform, and reveal nothing of the chat. `/forget` only acts on `/forget yes` sent within
a few minutes of `/forget` in the same chat.
"""

from __future__ import annotations

from bot.chat import limits
from bot.chat.commands.dashboard import COMMANDS as DASHBOARD_COMMANDS
from bot.chat.commands.own_data import COMMANDS as OWN_DATA_COMMANDS
from bot.chat.commands.own_data import topic_line
from bot.chat.commands.persona import persona_command, persona_line
from bot.chat.commands.registry import Arg, Command, CommandContext, Registry
from bot.chat.commands.usage_report import usage_chart_png, usage_table
from bot.chat.memory.gateway import ForgetUnfinished
from bot.chat.models.tiers import rank_tiers
from bot.chat.proactive.catchup import COMMANDS as CATCHUP_COMMANDS
from bot.chat.proactive.followups import COMMANDS as FOLLOWUP_COMMANDS
from bot.chat.proactive.remind import COMMANDS as REMINDER_COMMANDS
from bot.chat.types import CommandResult, File

FORGET_CONFIRM_S = 300.0
INTRO = (
    "I'm a chat assistant that remembers this chat: what was said, facts people share "
    "about themselves, and a rolling summary. Commands:"
)
GREETING = (
    "Hi! I'm a chat bot with a memory: I remember what is said here and use it when I answer. "
    "In groups, mention me or reply to me to ask something."
)


def help_text(ctx: CommandContext) -> str:
    """The command list this user may run here, one line each."""
    lines = [INTRO]
    for command in ctx.registry.listed(ctx.message.platform, admin=ctx.message.is_admin):
        lines.append(f"{command.usage()} - {command.help}" + (" (admin)" if command.admin else ""))
    return "\n".join(lines)


async def _help(ctx: CommandContext) -> CommandResult:
    return CommandResult(help_text(ctx))


async def _start(ctx: CommandContext) -> CommandResult:
    return CommandResult(f"{GREETING}\n\n{help_text(ctx)}")


async def _why(ctx: CommandContext) -> CommandResult:
    result = await _why_prompt(ctx)
    # A /new since that prompt: its window shows from the next answer on, so say it here.
    topic = ctx.chats.topic_start(ctx.chat)
    line = topic_line(topic, result.text) if topic else ""
    return CommandResult(f"{result.text}\n\n{line}") if line else result


async def _why_prompt(ctx: CommandContext) -> CommandResult:
    last = ctx.chats.last_prompt(ctx.chat)
    if last is None:
        # After a restart (or a forgetting) the cache is empty: the worker keeps the last prompt too.
        stats = await ctx.memory.stats(ctx.chat)
        prompt = str(stats.get("last_prompt") or "")
        if not prompt:
            return CommandResult("No answer yet in this chat, so no memory prompt to show.")
        persona = ctx.redact(await persona_line(ctx, None))
        return CommandResult("Memory prompt of the last message:\n" + ctx.redact(prompt) + f"\n\n{persona}")
    head = f"Memory prompt used for the last answer (tier {last.tier}"
    head += f": {', '.join(last.reasons)})" if last.reasons else ")"
    persona = ctx.redact(await persona_line(ctx, last.persona))
    return CommandResult(
        f"{head}:\n" + (last.prompt or "(empty: nothing to remember yet)") + f"\n\n{persona}"
    )


async def _tier(ctx: CommandContext) -> CommandResult:
    names = rank_tiers(ctx.tiers)
    if not ctx.args:
        forced = ctx.chats.forced_tier(ctx.chat)
        now = f"forced to {forced}" if forced else "automatic"
        return CommandResult(f"Tier choice here: {now}. Tiers, cheapest first: {', '.join(names)}.")
    want = ctx.args.split()[0].lower()
    if want in ("auto", "automatic", "off", "reset"):
        ctx.chats.force_tier(ctx.chat, None)
        return CommandResult("Tier choice is automatic again.")
    match = next((n for n in names if n.lower() == want), None)
    if match is None:
        return CommandResult(f"No tier called {want!r}. Tiers: {', '.join(names)}, or auto.")
    ctx.chats.force_tier(ctx.chat, match)
    return CommandResult(
        f"Answers here now use the {match} tier (within the daily budget). /tier auto undoes it."
    )


async def _forgetme(ctx: CommandContext) -> CommandResult:
    # What this process holds of them goes first (even if the worker fails), so an answer
    # being made now is not recorded with its words; the chat's lock lets a message of theirs
    # that is being recorded land first, so the forget covers it.
    ctx.chats.forget_author(ctx.chat, ctx.message.author_id)
    try:
        async with ctx.chats.lock(ctx.chat):
            await ctx.memory.forget_author(ctx.chat, ctx.message.author_id)
    except ForgetUnfinished as exc:
        return CommandResult(
            _unfinished(exc.dropped, "what my memory holds of you is not forgotten yet", "/forgetme")
        )
    return CommandResult("Done: I forgot your messages and what I knew about you in this chat.")


def _unfinished(dropped: int, left: str, again: str) -> str:
    """What a forget did while the memory was unreachable: what went, what is left, what to do."""
    went = (
        f"I dropped the {dropped} records (messages and my answers to them) that were waiting to be "
        "saved, so they will never be stored, but "
        if dropped
        else ""
    )
    return f"My memory is unreachable right now: {went}{left}. Send {again} again in a little while."


async def _facts(ctx: CommandContext) -> CommandResult:
    history = ctx.args.lower() in ("history", "all", "--history")
    facts = await ctx.memory.facts(ctx.chat, history=history, kind="fact")  # notes: /remember
    if not facts:
        return CommandResult("I don't know any facts in this chat yet.")
    by_author: dict[str, list[str]] = {}
    for f in facts:
        who = str(f.get("author") or f.get("author_id") or "someone")
        line = f"{f.get('key')}: {f.get('value')}"
        if f.get("superseded_at"):  # no number: only current facts can be removed
            line = f"{line} (until {str(f['superseded_at'])[:10]})"
        else:
            line = f"#{f.get('id')} {line}"
        by_author.setdefault(who, []).append(line)
    lines = ["Facts:"]
    for who, items in by_author.items():
        lines.append(f"{who}:")
        lines.extend(f"  - {item}" for item in items)
    lines.append("/forgetfact N removes fact #N.")
    return CommandResult(ctx.redact("\n".join(lines)))


def _compactions(n: object) -> str:
    """ "1 compaction", "3 compactions": how many summaries the chat's memory has written."""
    return f"{n} compaction{'' if n == 1 else 's'}"


async def _summary(ctx: CommandContext) -> CommandResult:
    data = await ctx.memory.summary(ctx.chat)
    text = str(data.get("summary") or "").strip()
    if not text:
        return CommandResult("No summary yet: the chat is still short.")
    meta = f"({_compactions(data.get('compactions', 0))}, updated {str(data.get('updated_at') or '?')[:19]})"
    return CommandResult(ctx.redact(f"{text}\n\n{meta}"))


async def _usage(ctx: CommandContext) -> CommandResult:
    usage = await ctx.memory.usage(ctx.chat, ctx.message.author_id)
    chart = File("usage.png", usage_chart_png(usage), "image/png")
    text = "Model usage in this chat:"
    if ctx.settings is not None:  # what the daily caps leave ([limits]), counted by the worker
        today, mine = usage.get("today"), usage.get("today_author")
        left = limits.left_lines(ctx.settings.limits, today, mine, ctx.clock())
        text = "\n".join([*left, text])
    return CommandResult(text, table=usage_table(usage), files=(chart,))


async def _memory(ctx: CommandContext) -> CommandResult:
    stats = await ctx.memory.stats(ctx.chat)
    lines = [
        "Memory of this chat:",
        f"  messages kept: {stats.get('total_messages', 0)}",
        f"  not yet summarized: {stats.get('active_messages', 0)}",
        f"  summarized (still searchable): {stats.get('archived_messages', 0)}",
        f"  facts: {stats.get('facts', 0)}",
        f"  mode: {stats.get('mode', '?')}",
    ]
    pending = ctx.memory.pending_for(ctx.chat)
    if pending:
        lines.append(f"  records waiting in the outbox: {pending}")
    return CommandResult("\n".join(lines))


async def _mode(ctx: CommandContext) -> CommandResult:
    want = ctx.args.split()[0].lower() if ctx.args else ""
    if want not in ("auto", "full"):
        stats = await ctx.memory.stats(ctx.chat)
        now = f"Memory mode is {stats.get('mode', '?')}. Use /mode auto or /mode full."
        if want:  # a typo must not look like it was taken
            return CommandResult(f"There is no memory mode {want[:40]!r}; nothing changed. {now}")
        return CommandResult(now)
    data = await ctx.memory.set_mode(ctx.chat, "auto" if want == "auto" else "full")
    return CommandResult(f"Memory mode is now {data.get('mode', want)}.")


async def _compact(ctx: CommandContext) -> CommandResult:
    from bot.chat.memory.client import MemoryUnavailable

    try:
        data = await ctx.memory.compact(ctx.chat)
    except MemoryUnavailable:
        return CommandResult(
            "Compaction failed (the summarizer or the memory is unavailable); nothing was deleted."
        )
    if data.get("compacted") == 0:  # the worker counts the summaries it wrote
        return CommandResult(
            "Nothing to compact: only the most recent messages are unsummarized, and they stay "
            f"as they are ({_compactions(data.get('compactions', 0))} so far)."
        )
    return CommandResult(
        f"Compacted: {_compactions(data.get('compactions', 0))} so far, "
        f"summary covers messages up to #{data.get('summarized_upto', '?')}."
    )


async def _forget(ctx: CommandContext) -> CommandResult:
    if ctx.args.lower() in ("yes", "y", "confirm") and ctx.chats.confirm(
        ctx.chat, "forget", FORGET_CONFIRM_S
    ):
        ctx.chats.forget_chat(ctx.chat)  # first, as in /forgetme
        try:
            async with ctx.chats.lock(ctx.chat):
                await ctx.memory.forget_chat(ctx.chat)
        except ForgetUnfinished as exc:
            return CommandResult(_unfinished(exc.dropped, "this chat's memory is not erased yet", "/forget"))
        return CommandResult("Done: this chat's memory is erased.")
    ctx.chats.ask(ctx.chat, "forget")
    return CommandResult(
        "This erases everything I remember about this chat: every message, fact and the summary. "
        "Send /forget yes within 5 minutes to confirm.",
        confirm="/forget yes",
    )


COMMANDS = Registry(
    [
        Command(
            "start",
            "what I am and how to talk to me",
            _start,
            platforms=frozenset({"telegram"}),  # Telegram clients send it when a chat opens
        ),
        Command("help", "the commands", _help, aliases=("commands",)),
        Command("why", "the memory prompt used for my last answer here", _why),
        Command(
            "tier",
            "show the model tier, or force one for this chat (!NAME before one message)",
            _tier,
            args=(Arg("name", "a tier name, or auto to choose automatically again"),),
        ),
        Command("forgetme", "forget what you said here and what I know about you", _forgetme),
        *OWN_DATA_COMMANDS,
        Command(
            "facts",
            "what I know about the people here",
            _facts,
            who="admin",
            args=(Arg("history", "history: superseded values too", choices=("history",)),),
        ),
        Command("summary", "the rolling summary of this chat", _summary, who="admin"),
        Command(
            "usage", "model calls, tokens and cost per tier, with a chart", _usage, who="admin", slow=True
        ),
        Command("memory", "memory statistics", _memory, who="admin", aliases=("stats",)),
        *DASHBOARD_COMMANDS,
        Command(
            "mode",
            "memory mode: auto (4 recent messages) or full (12)",
            _mode,
            who="admin",
            args=(Arg("mode", "auto: a few recent messages; full: up to twelve", choices=("auto", "full")),),
        ),
        Command("compact", "summarize the older messages now", _compact, who="admin", slow=True),
        Command(
            "persona",
            "show or set this chat's persona: my instructions here (reset: the default)",
            persona_command,
            who="admin",
            args=(Arg("text", "the persona (how I should behave here), or reset", rest=True),),
        ),
        Command(
            "forget",
            "forget this whole chat, after confirmation",
            _forget,
            who="admin",
            args=(
                Arg("confirm", "yes: confirm a /forget asked within the last 5 minutes", choices=("yes",)),
            ),
        ),
        *REMINDER_COMMANDS,
        *FOLLOWUP_COMMANDS,
        *CATCHUP_COMMANDS,
    ]
)
