"""The shipped defaults: bot.toml, installed as the package `bot.defaults` (see pyproject.toml)."""
