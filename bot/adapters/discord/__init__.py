"""The Discord adapter (discord.py 2.7).

- adapter: `DiscordBot`, messages and slash commands in, answers out; `serve` runs it
- send: parts of at most 2,000 characters, retried through outages, the typing indicator

May import: `bot.adapters`, `bot.chat.types`, `bot.chat.commands.registry`, `bot.chat.retry`,
`bot.chat_keys`, `bot.config` and `bot.errors`; never the memory client, a model or the engine.
"""
