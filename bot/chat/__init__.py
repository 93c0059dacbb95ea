"""The chat service behind every adapter: one message in, memory and a model, the answer out.

- pipeline: `Pipeline`, the `ChatService`: record, choose a tier, call the model, record
- types: `ChatService` (what adapters may call), the neutral message, reply and command types
- options: `Answering` and `PipelineOptions`, the collaborators the composition root passes in
- chats: per-chat state of this process (the last prompt, confirmations, locks, forced tiers)
- access: who may use the bot; limits: the daily caps; prompt: the model's messages
- media: voice and photos; neutral: other people's text made harmless; logs: request context
- retry: the one back-off schedule and retry loop
- memory/, models/, commands/, proactive/: the sub-packages (their own docstrings say more)

May import: `bot.chat`, `bot.config`, `bot.errors`, `bot.jsonlog`, and of the engine only
`memory_engine.api.wire`, `memory_engine.backoff` and `memory_engine.prompt`; never an
adapter or a platform library (docs/architecture.md, checked by tests/app/test_docs_true.py).
"""
