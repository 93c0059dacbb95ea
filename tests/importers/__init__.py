"""History imports: Telegram Desktop and DiscordChatExporter files."""
