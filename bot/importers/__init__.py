"""History importers: Telegram Desktop and DiscordChatExporter JSON into the memory worker.

`telegram` and `discord` read the exports (streamed with ijson), `run` validates a whole
file, then sends its messages through `POST /v1/chats/{chat}/import` in batches under the
chat keys the live adapters use (`bot.chat_keys`).
"""
