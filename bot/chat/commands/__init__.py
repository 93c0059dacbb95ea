"""The chat commands: the registry every adapter renders, and their handlers."""
