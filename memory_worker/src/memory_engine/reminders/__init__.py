"""Reminders and the dispatch queue that hands them to the bot."""
