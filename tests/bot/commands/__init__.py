"""The chat commands: own data, permissions, persona, notes."""
