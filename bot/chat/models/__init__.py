"""Chat models and how a tier is chosen and falls back.

- base: the `ChatModel` interface, `ModelRequest`, `ModelAnswer`, `Attempt`, `ModelFailure`
- openai_compat: `OpenAICompatModel`, a model on an OpenAI-compatible endpoint
- fallback: `FallbackModel`, the tiers as one model (retries, then the next tier)
- tiers: the tier router (a tier per message); failures: what to fix when a tier is misconfigured
- offline, offline_people: the model that answers from memory alone, without a language model
- light: one recorded call to the cheapest tier, for commands

May import: `bot.chat.types`, `bot.chat.prompt`, `bot.chat.limits`, `bot.chat.retry`,
`bot.chat.memory.gateway`, `bot.config`, `bot.errors`, and `memory_engine.api.wire`,
`memory_engine.backoff`, `memory_engine.notes`; never an adapter.
"""
