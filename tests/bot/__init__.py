"""The bot's pipeline: access, limits, media, streaming, what reaches the model."""
