"""`/persona`: a chat's own instructions for the model, kept in the chat's settings in the memory worker.

The persona is added to the bot's `system_prompt` (bot.toml) for every answer in the chat,
before the fixed rule that quoted memory is data; `/persona reset` removes it. It survives
restarts (the worker keeps it), and `/why` shows it.
"""

from __future__ import annotations

from bot.chat.commands.registry import CommandContext
from bot.chat.types import CommandResult

MAX_PERSONA_CHARS = 2000  # the memory worker's limit
RESET_WORDS = ("reset", "default", "off", "clear", "none")


async def persona_command(ctx: CommandContext) -> CommandResult:
    """Show, set or reset the chat's persona."""
    if not ctx.args:
        current = str((await ctx.memory.settings(ctx.chat)).get("persona") or "")
        if not current:
            return CommandResult(
                "No persona here: I follow my default instructions. /persona TEXT sets one, "
                "/persona reset removes it."
            )
        return CommandResult(f"Persona of this chat:\n{current}\n\n/persona reset removes it.")
    if ctx.args.lower() in RESET_WORDS:
        await ctx.memory.set_persona(ctx.chat, "")
        return CommandResult("Persona removed: I follow my default instructions again.")
    if len(ctx.args) > MAX_PERSONA_CHARS:
        return CommandResult(f"That persona is {len(ctx.args)} characters; the limit is {MAX_PERSONA_CHARS}.")
    data = await ctx.memory.set_persona(ctx.chat, ctx.args)
    return CommandResult(f"Persona set for this chat:\n{data.get('persona', ctx.args)}")


async def persona_line(ctx: CommandContext, cached: str | None) -> str:
    """The /why line about the persona (`cached`: the one of the last answer, None after a restart)."""
    persona = cached
    if persona is None:
        persona = str((await ctx.memory.settings(ctx.chat)).get("persona") or "")
    return f"Persona: {persona}" if persona else "Persona: none (the default instructions)"
