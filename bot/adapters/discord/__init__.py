"""The Discord adapter (discord.py 2.7)."""
