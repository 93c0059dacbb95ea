"""The pipeline between the adapters and the outside services: memory, tiers, models."""
