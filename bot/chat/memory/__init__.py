"""The memory worker as the bot sees it.

- client: `MemoryClient`, every route of the memory API v1 as a typed call; `HttpMemoryClient`
- gateway: `MemoryGateway`, the client, the outbox and the retries behind one surface
- outbox: records the worker could not take yet, kept in SQLite until replayed

May import: `bot.chat.types`, `bot.chat.models.base`, `bot.config`, `bot.errors`,
`memory_engine.api` and `memory_engine.backoff`; never a model client, an adapter or the rest
of the engine.
"""
