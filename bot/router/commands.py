"""Chat commands, the same on every platform: text (and a chart) built from the memory worker.

Admin-only commands (`ADMIN_COMMANDS`) refuse a non-admin with `refused(name)`, the same
words on every platform, and reveal nothing of the chat. `/forget` only acts on `/forget yes` sent within a
few minutes of `/forget` in the same chat.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bot.router.memory import MemoryRefused, MemoryUnavailable
from bot.router.prompt import redact
from bot.router.tiers import rank_tiers
from bot.router.types import CommandResult, IncomingMessage

if TYPE_CHECKING:
    from bot.router.pipeline import Router

ADMIN_COMMANDS = frozenset({"facts", "summary", "usage", "memory", "mode", "compact", "forget"})
ALL_COMMANDS = ("help", "why", "tier", "forgetme", *sorted(ADMIN_COMMANDS))
NOT_AVAILABLE = "Unknown command. Send /help for the list."
REFUSED = "Sorry, /{name} is only for admins of this chat."
FORGET_CONFIRM_S = 300.0
ALIASES = {"start": "help", "commands": "help", "stats": "memory"}

HELP = {
    "help": "this list",
    "why": "the memory prompt used for the last answer here",
    "tier": "show the tier, or force one: /tier NAME, back to automatic: /tier auto (or !NAME before one message)",
    "forgetme": "forget everything you said here and every fact about you",
    "facts": "what I know about the people here (admin)",
    "summary": "the rolling summary of this chat (admin)",
    "usage": "model calls, tokens and cost per tier, with a chart (admin)",
    "memory": "memory statistics (admin)",
    "mode": "memory mode: /mode auto (4 recent messages) or /mode full (12) (admin)",
    "compact": "summarize the older messages now (admin)",
    "forget": "forget this whole chat, after confirmation (admin)",
}


async def run_command(router: Router, message: IncomingMessage, name: str, args: str) -> CommandResult:
    """Run one command for one message."""
    name = name.strip().lower().lstrip("/")
    name = name.split("@", 1)[0]  # Telegram: /facts@my_bot
    typed, name = name, ALIASES.get(name, name)
    args = args.strip()
    if name not in HELP:
        return CommandResult(NOT_AVAILABLE)
    if name in ADMIN_COMMANDS and not message.is_admin:
        return CommandResult(refused(typed))
    handler = _HANDLERS[name]
    try:
        return await handler(router, message, args)
    except MemoryUnavailable:
        return CommandResult("My memory is unreachable right now; please try again later.")
    except MemoryRefused as exc:
        return CommandResult(f"The memory refused that: {exc.error}")


def refused(name: str) -> str:
    """What a non-admin reads for an admin command, on every platform: it says no, nothing more."""
    return REFUSED.format(name=name)


async def _help(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    lines = [
        "I'm a chat assistant that remembers this chat: what was said, facts people share "
        "about themselves, and a rolling summary. Commands:"
    ]
    for cmd in ALL_COMMANDS:
        if cmd in ADMIN_COMMANDS and not message.is_admin:
            continue
        lines.append(f"/{cmd} - {HELP[cmd]}")
    return CommandResult("\n".join(lines))


async def _why(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    last = router._last_prompts.get(message.chat_key)
    if last is None:
        # After a restart the cache is empty: the worker keeps the last prompt too.
        stats = await router.memory.stats(message.chat_key)
        prompt = str(stats.get("last_prompt") or "")
        if not prompt:
            return CommandResult("No answer yet in this chat, so no memory prompt to show.")
        return CommandResult("Memory prompt of the last message:\n" + redact(prompt, router.secrets))
    head = f"Memory prompt used for the last answer (tier {last.tier}"
    head += f": {', '.join(last.reasons)})" if last.reasons else ")"
    return CommandResult(head + ":\n" + (last.prompt or "(empty: nothing to remember yet)"))


async def _tier(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    names = rank_tiers(router.tiers)
    if not args:
        forced = router.forced.get(message.chat_key)
        now = f"forced to {forced}" if forced else "automatic"
        return CommandResult(f"Tier choice here: {now}. Tiers, cheapest first: {', '.join(names)}.")
    want = args.split()[0].lower()
    if want in ("auto", "automatic", "off", "reset"):
        router.forced.set(message.chat_key, None)
        return CommandResult("Tier choice is automatic again.")
    match = next((n for n in names if n.lower() == want), None)
    if match is None:
        return CommandResult(f"No tier called {want!r}. Tiers: {', '.join(names)}, or auto.")
    router.forced.set(message.chat_key, match)
    return CommandResult(
        f"Answers here now use the {match} tier (within the daily budget). /tier auto undoes it."
    )


async def _forgetme(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    await router.memory.forget_author(message.chat_key, message.author_id)
    return CommandResult("Done: I forgot your messages and what I knew about you in this chat.")


async def _facts(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    history = args.lower() in ("history", "all", "--history")
    facts = await router.memory.facts(message.chat_key, history=history)
    if not facts:
        return CommandResult("I don't know any facts in this chat yet.")
    by_author: dict[str, list[str]] = {}
    for f in facts:
        who = str(f.get("author") or f.get("author_id") or "someone")
        line = f"{f.get('key')}: {f.get('value')}"
        if f.get("superseded_at"):
            line += f" (until {str(f['superseded_at'])[:10]})"
        by_author.setdefault(who, []).append(line)
    lines = ["Facts:"]
    for who, items in by_author.items():
        lines.append(f"{who}:")
        lines.extend(f"  - {item}" for item in items)
    return CommandResult(redact("\n".join(lines), router.secrets))


async def _summary(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    data = await router.memory.summary(message.chat_key)
    text = str(data.get("summary") or "").strip()
    if not text:
        return CommandResult("No summary yet: the chat is still short.")
    meta = f"(compactions: {data.get('compactions', 0)}, updated {str(data.get('updated_at') or '?')[:19]})"
    return CommandResult(redact(f"{text}\n\n{meta}", router.secrets))


def usage_table(usage: Mapping[str, Any]) -> str:
    """routerUsage totals per tier as a fixed-width text table."""
    tiers: Mapping[str, Mapping[str, Any]] = usage.get("tiers") or {}
    header = f"{'tier':<10} {'calls':>6} {'errors':>6} {'in tok':>9} {'out tok':>9} {'cost $':>10}"
    lines = [header, "-" * len(header)]
    total = {"calls": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    for name, row in tiers.items():
        for key in total:
            total[key] += row.get(key) or 0
        lines.append(
            f"{name[:10]:<10} {int(row.get('calls') or 0):>6} {int(row.get('errors') or 0):>6} "
            f"{int(row.get('prompt_tokens') or 0):>9} {int(row.get('completion_tokens') or 0):>9} "
            f"{float(row.get('cost_usd') or 0):>10.4f}"
        )
    lines.append("-" * len(header))
    lines.append(
        f"{'total':<10} {total['calls']:>6} {total['errors']:>6} {total['prompt_tokens']:>9} "
        f"{total['completion_tokens']:>9} {total['cost_usd']:>10.4f}"
    )
    return "\n".join(lines)


def usage_chart_png(usage: Mapping[str, Any]) -> bytes:
    """A PNG bar chart of calls (ok / errors) and cost per tier (matplotlib, Agg, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    tiers: Mapping[str, Mapping[str, Any]] = usage.get("tiers") or {}
    names = list(tiers) or ["(none)"]
    calls = [int((tiers.get(n) or {}).get("calls") or 0) for n in names]
    errors = [int((tiers.get(n) or {}).get("errors") or 0) for n in names]
    ok = [c - e for c, e in zip(calls, errors)]
    cost = [float((tiers.get(n) or {}).get("cost_usd") or 0.0) for n in names]
    fig = Figure(figsize=(7, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar(names, ok, label="ok", color="#4c9a5b")
    ax1.bar(names, errors, bottom=ok, label="errors", color="#c8553d")
    ax1.set_title("model calls per tier")
    ax1.legend(loc="upper right", fontsize=8)
    ax1.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.set_ylim(0, max(calls + [1]) * 1.2)
    bars = ax2.bar(names, cost, color="#3d6fc8")
    ax2.bar_label(bars, labels=[f"${c:.4f}" for c in cost], fontsize=8)
    ax2.set_ylim(0, max(cost + [0.0]) * 1.25 or 0.01)
    ax2.set_title("cost per tier (USD)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


async def _usage(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    usage = await router.memory.usage(message.chat_key)
    return CommandResult("Model usage in this chat:\n" + usage_table(usage), image_png=usage_chart_png(usage))


async def _memory(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    stats = await router.memory.stats(message.chat_key)
    lines = [
        "Memory of this chat:",
        f"  messages kept: {stats.get('total_messages', 0)}",
        f"  not yet summarized: {stats.get('active_messages', 0)}",
        f"  summarized (still searchable): {stats.get('archived_messages', 0)}",
        f"  facts: {stats.get('facts', 0)}",
        f"  mode: {stats.get('mode', '?')}",
    ]
    pending = router.outbox.pending_for(message.chat_key)
    if pending:
        lines.append(f"  records waiting in the outbox: {pending}")
    return CommandResult("\n".join(lines))


async def _mode(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    want = args.split()[0].lower() if args else ""
    if want not in ("auto", "full"):
        stats = await router.memory.stats(message.chat_key)
        return CommandResult(f"Memory mode is {stats.get('mode', '?')}. Use /mode auto or /mode full.")
    data = await router.memory.set_mode(message.chat_key, want)
    return CommandResult(f"Memory mode is now {data.get('mode', want)}.")


async def _compact(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    try:
        data = await router.memory.compact(message.chat_key)
    except MemoryUnavailable:
        return CommandResult(
            "Compaction failed (the summarizer or the memory is unavailable); nothing was deleted."
        )
    return CommandResult(
        f"Compacted: {data.get('compactions', '?')} compactions so far, "
        f"summary covers messages up to #{data.get('summarized_upto', '?')}."
    )


async def _forget(router: Router, message: IncomingMessage, args: str) -> CommandResult:
    key = message.chat_key
    asked = router._pending_forget.get(key)
    now = time.monotonic()
    if args.lower() in ("yes", "y", "confirm") and asked is not None and now - asked <= FORGET_CONFIRM_S:
        router._pending_forget.pop(key, None)
        await router.memory.forget_chat(key)
        router._last_prompts.pop(key, None)
        return CommandResult("Done: this chat's memory is erased.")
    # Keep the pending map small: drop expired questions.
    for k, t in list(router._pending_forget.items()):
        if now - t > FORGET_CONFIRM_S:
            router._pending_forget.pop(k, None)
    router._pending_forget[key] = now
    return CommandResult(
        "This erases everything I remember about this chat: every message, fact and the summary. "
        "Send /forget yes within 5 minutes to confirm.",
        confirm="/forget yes",
    )


_HANDLERS = {
    "help": _help,
    "why": _why,
    "tier": _tier,
    "forgetme": _forgetme,
    "facts": _facts,
    "summary": _summary,
    "usage": _usage,
    "memory": _memory,
    "mode": _mode,
    "compact": _compact,
    "forget": _forget,
}


def command_names(admin: bool) -> Iterable[str]:
    """The commands a user may see (for platform command menus)."""
    return [c for c in ALL_COMMANDS if admin or c not in ADMIN_COMMANDS]
