"""Discord against the fake REST API and gateway."""
