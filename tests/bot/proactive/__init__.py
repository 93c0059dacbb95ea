"""Reminders, follow-ups and catch-up digests."""
