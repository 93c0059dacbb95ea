"""The memory worker as the bot sees it: the HTTP client, the gateway, the outbox."""
