"""History importers: Telegram Desktop and DiscordChatExporter JSON into the memory worker.

- telegram, discord: the exports read as records (streamed with ijson)
- common: what both readers share (the error naming the place at fault, records, streamed JSON)
- located: where a file that is not valid JSON breaks
- run: `chatbot import`: check the whole file, then send it through `POST .../import` in batches
- where: each chat key an import wrote to, and the command that chats in it

May import: `bot.chat.memory.client`, `bot.chat.neutral`, `bot.chat.retry`, `bot.chat_keys`,
`bot.config`, `bot.errors`, `memory_engine.api.wire` and `memory_worker.local`; never the
pipeline, a model or an adapter.
"""
