"""Chat models: the interface, the OpenAI-compatible client, offline, fallback, tiers."""
