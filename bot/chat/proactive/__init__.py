"""What the bot does on its own: reminders, follow-ups, catch-up digests."""
