"""The Telegram adapter (python-telegram-bot 22).

- adapter: `TelegramBot`, updates in and answers out; `serve` runs it (polling or webhook)
- chat: Telegram objects to neutral messages, admin rights, one chat's updates in order
- html: the Markdown models write as Telegram's HTML; send: parts, retries, plain-text fallback
- stream: an answer shown while the model writes it; webhook: the webhook server

May import: `bot.adapters`, `bot.chat.types`, `bot.chat.commands.registry`, `bot.chat.retry`,
`bot.chat_keys`, `bot.config` and `bot.errors`; never the memory client, a model or the engine.
"""
