"""The adapters, which only translate between a platform and the `ChatService`.

- console: `chatbot chat`, the console adapter
- split: long answers in parts a platform accepts; streaming: an answer that grows in place
- reminder_sends: how each platform sends a due reminder
- telegram/, discord/: the platform adapters

May import: `bot.chat.types` (the service protocol and the neutral types), `bot.chat.neutral`,
`bot.errors` and the platforms' `send` modules; never the memory client, a model or the
engine: an adapter reaches the rest only through the `ChatService` it is given.
"""
