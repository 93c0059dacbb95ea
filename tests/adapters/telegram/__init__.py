"""Telegram against the fake Bot API."""
