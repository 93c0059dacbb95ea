"""The platform adapters: console, message splitting."""
