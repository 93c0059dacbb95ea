"""The memory worker: the Cloudflare Worker (`src/`) and the local host running the same engine (`local/`)."""
