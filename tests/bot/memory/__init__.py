"""The memory gateway: the client, the outbox, retries, memory faults."""
