"""The chat commands, the same on every platform.

- registry: `Command` and `Registry`, the commands as data every adapter renders
- handlers: the commands and `/help`; own_data: /export, /remember, /forgetfact, /new
- persona: /persona; usage_report: /usage's table and chart
- docs: the docs' command tables, rendered from the registry

May import: `bot.chat`, `bot.config`, `bot.errors` and `memory_engine.api.wire`; never an adapter.
"""
