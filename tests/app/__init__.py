"""The application as a user starts it: CLI, settings, doctor, shutdown, a newcomer's first hour, the docs."""
