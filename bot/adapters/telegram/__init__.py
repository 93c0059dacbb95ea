"""The Telegram adapter (python-telegram-bot 22)."""
