"""The engine's hosts: the HTTP contract on every host, the local host, the Worker on Pyodide, backups."""
