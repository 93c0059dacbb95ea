"""Commands that put people's memory in their hands: /export, /remember, /unremember,
/forgetfact and /new (alias /reset).

Numbers are the memory worker's fact ids, not positions in a list: a fact learnt (or removed)
between `/facts` and `/forgetfact N` in a busy group cannot shift them onto someone else's.
Anyone may remove their own facts and notes; other people's need an admin, which the bot
checks (the worker checks it again when the caller is not an admin).
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import AsyncIterable, Mapping, Sequence

from bot.chat.commands.registry import Arg, Command, CommandContext
from bot.chat.memory.client import MemoryRefused
from bot.chat.types import CommandResult, File
from memory_engine.api import wire

# What each platform lets a bot upload; a bigger export goes gzipped (JSON shrinks ~5-10x).
UPLOAD_LIMIT = {"telegram": 50 * 1000 * 1000, "discord": 8 * 1024 * 1024}  # Discord: 8-10 MiB, plan-dependent
EXPORT_USAGE = "Send /export for your own data here, or /export all (admins) for the whole chat."
EXPORT_TEXT = "Your data in this chat: {what}, with their history (messages: yours and my replies)."
NOTHING_OF_YOURS = "I keep nothing of yours in this chat: the export is empty."
NOTE_USAGE = "/remember TEXT keeps a note; /remember alone lists them; /unremember N removes one."


def _number(args: str) -> int | None:
    """The N of `/forgetfact N` ("7" or "#7"), or None when it is not a positive whole number."""
    word = args.split()[0].lstrip("#") if args.split() else ""
    return int(word) if word.isascii() and word.isdigit() and 0 < int(word) < 2**63 else None


def _who(item: wire.Fact) -> str:
    return str(item.get("author") or item.get("author_id") or "someone")


def _fact_line(fact: wire.Fact) -> str:
    return f"#{fact['id']} {fact.get('key')}: {fact.get('value')}"


def _note_line(note: wire.Fact) -> str:
    return f"#{note['id']} {note.get('value')} (from {_who(note)})"


# -- /export ---------------------------------------------------------------------------


async def export_json(pages: AsyncIterable[wire.ExportPage]) -> tuple[bytes, dict[str, object]]:
    """One JSON document from the export's pages, and its header (the first page but its messages).

    Written page by page as they arrive, one message per line: only the document being built
    and one page are in memory at a time, never the whole chat as Python objects.
    """
    out = io.StringIO()
    header: dict[str, object] | None = None
    written = 0
    async for page in pages:
        if header is None:
            header = {k: v for k, v in page.items() if k not in ("messages", "next_after")}
            out.write("{\n" + "".join(f"{json.dumps(k)}: {_dump(v)},\n" for k, v in header.items()))
            out.write('"messages": [')
        for message in page.get("messages") or ():
            out.write(("\n" if not written else ",\n") + json.dumps(message, ensure_ascii=False))
            written += 1
    if header is None:  # the worker sent no page at all
        header = {}
        out.write('{\n"messages": [')
    out.write("\n]\n}\n")
    return out.getvalue().encode("utf-8"), header


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _export_file(data: bytes, platform: str, whole: bool = False) -> File:
    # The whole chat's export has a name of its own: saved beside yours (console), it never replaces it.
    stem = "export-all" if whole else "export"
    limit = UPLOAD_LIMIT.get(platform)
    if limit is not None and len(data) > limit:
        return File(f"{stem}.json.gz", gzip.compress(data, 6), "application/gzip")
    return File(f"{stem}.json", data, "application/json")


async def _export(ctx: CommandContext) -> CommandResult:
    scope = ctx.args.lower()
    if scope not in ("", "all", "me", "mine"):
        return CommandResult(f"I don't know /export {ctx.args[:40]}. {EXPORT_USAGE}")
    whole = scope == "all"
    if whole and not ctx.message.is_admin:
        return CommandResult("Sorry, /export all is only for admins of this chat; /export gives yours.")
    author_id = None if whole else ctx.message.author_id
    if not whole and not author_id:
        return CommandResult("I can't tell who you are here, so I can't export your data.")
    data, header = await export_json(ctx.memory.export(ctx.chat, author_id))
    info = header.get("export")  # the worker's wire.ExportInfo
    counts: Mapping[str, int] = (info.get("counts") or {}) if isinstance(info, dict) else {}
    what = ", ".join(_count(int(counts.get(k) or 0), k[:-1]) for k in ("messages", "facts", "notes"))
    if whole:
        text = f"This chat's whole memory: {what}, with their history, and the settings, summary, usage."
    elif not counts.get("messages") and not counts.get("facts") and not counts.get("notes"):
        text = NOTHING_OF_YOURS
    else:
        text = EXPORT_TEXT.format(what=what)
    pending = ctx.memory.pending_for(ctx.chat)
    if pending:
        text += f" ({pending} records still wait in the outbox and are not in it.)"
    file = _export_file(data, ctx.message.platform, whole)
    limit = UPLOAD_LIMIT.get(ctx.message.platform)
    if limit is not None and len(file.data) > limit:
        return CommandResult(
            f"The export is too big to send here ({len(file.data) / 1e6:.1f} MB compressed); "
            "the bot's operator can take it from the memory worker."
        )
    return CommandResult(text, files=(file,), private=True)


# -- /remember, /unremember ------------------------------------------------------------


async def _remember(ctx: CommandContext) -> CommandResult:
    if not ctx.args:
        notes = await ctx.memory.notes(ctx.chat)
        if not notes:
            return CommandResult(f"No notes in this chat yet. {NOTE_USAGE}")
        lines = ["Notes I keep in every answer here:", *(_note_line(n) for n in notes)]
        lines.append("/unremember N removes one.")
        return CommandResult(ctx.redact("\n".join(lines)))
    try:
        data = await ctx.memory.add_note(ctx.chat, ctx.args, ctx.message.author, ctx.message.author_id)
    except MemoryRefused as exc:  # too long, or too many notes: the worker says which
        return CommandResult(f"I can't keep that note: {exc.error}.")
    note = data.get("note") or {}
    if data.get("duplicate"):
        return CommandResult(f"I already keep that note (#{note.get('id')}).")
    return CommandResult(
        f"Noted (#{note.get('id')}): I'll keep it in mind in every answer here. "
        "/remember lists the notes; /unremember N removes one."
    )


async def _remove(ctx: CommandContext, kind: str, items: Sequence[wire.Fact], n: int) -> CommandResult:
    """Remove fact or note `n` of `items` (the chat's current ones of `kind`), if the asker may."""
    item = next((i for i in items if int(i.get("id") or 0) == n), None)
    lister = "/remember" if kind == "note" else "/forgetfact (yours) or /facts (admins)"
    if item is None:
        return CommandResult(f"There is no {kind} #{n} here. {lister} lists them with their numbers.")
    not_yours = CommandResult(f"Sorry, only admins can remove a {kind} of someone else; #{n} is not yours.")
    mine = str(item.get("author_id") or "") == ctx.message.author_id
    if not mine and not ctx.message.is_admin:
        return not_yours
    try:
        await ctx.memory.forget_fact(ctx.chat, n, None if ctx.message.is_admin else ctx.message.author_id)
    except MemoryRefused as exc:
        if exc.status == 404:  # removed by someone else a moment ago
            return CommandResult(f"There is no {kind} #{n} any more. {lister} lists them.")
        if exc.status == 403:
            return not_yours
        raise
    shown = _note_line(item) if kind == "note" else _fact_line(item)
    return CommandResult(
        ctx.redact(f"Removed {shown}. I no longer use it; it stays in the history (/export).")
    )


async def _unremember(ctx: CommandContext) -> CommandResult:
    n = _number(ctx.args)
    if n is None:
        return CommandResult("Which note? Send /unremember N, with N a number from /remember.")
    return await _remove(ctx, "note", await ctx.memory.notes(ctx.chat), n)


# -- /forgetfact -----------------------------------------------------------------------


async def _forgetfact(ctx: CommandContext) -> CommandResult:
    facts = await ctx.memory.facts(ctx.chat, kind="fact")
    if not ctx.args:
        mine = [f for f in facts if str(f.get("author_id") or "") == ctx.message.author_id]
        if not mine:
            return CommandResult("I know no facts about you in this chat.")
        lines = ["What I know about you here:", *(_fact_line(f) for f in mine)]
        lines.append("/forgetfact N removes one.")
        return CommandResult(ctx.redact("\n".join(lines)))
    n = _number(ctx.args)
    if n is None:
        return CommandResult(
            "Which fact? Send /forgetfact N, with N a number from /forgetfact (yours) or /facts (admins)."
        )
    if any(int(f.get("id") or 0) == n for f in facts):
        return await _remove(ctx, "fact", facts, n)
    notes = await ctx.memory.notes(ctx.chat)
    if any(int(note.get("id") or 0) == n for note in notes):
        return CommandResult(f"#{n} is a note, not a fact: /unremember {n} removes it.")
    return await _remove(ctx, "fact", facts, n)


# -- /new ------------------------------------------------------------------------------


async def _new(ctx: CommandContext) -> CommandResult:
    data = await ctx.memory.start_topic(ctx.chat)
    at = str(data.get("topic_started_at") or "")
    if at:
        ctx.chats.topic_started(ctx.chat, at)
    return CommandResult(
        "New topic: my next answers see only the messages from now on as recent. "
        "Search of older messages, facts, notes and the summary stay. /why shows where it began."
    )


def topic_line(at: str, shown: str = "") -> str:
    """How /why says where the current topic began ("" when `shown`, the prompt, says it already)."""
    when = at[:16].replace("T", " ")  # as the memory prompt writes it
    if f"new topic started {when}" in shown:
        return ""
    return f"New topic since {when} UTC (/new): recent messages begin there from the next answer."


COMMANDS = (
    Command(
        "export",
        "your data in this chat as a JSON file (admins: /export all for the whole chat)",
        _export,
        args=(Arg("scope", "all: the whole chat's memory (admins only)", choices=("all",)),),
        slow=True,
    ),
    Command(
        "remember",
        "keep a note in mind in every answer here; alone: list the notes",
        _remember,
        args=(Arg("text", "what to keep in mind in this chat", rest=True),),
    ),
    Command(
        "unremember",
        "remove note N (numbers from /remember)",
        _unremember,
        args=(Arg("number", "the note's number, from /remember"),),  # missing: answered, not refused
    ),
    Command(
        "forgetfact",
        "remove fact N; alone: the facts I know about you, numbered",
        _forgetfact,
        args=(Arg("number", "the fact's number (/forgetfact alone lists yours)"),),
    ),
    Command("new", "start a new topic: earlier messages leave the recent window", _new, aliases=("reset",)),
)
