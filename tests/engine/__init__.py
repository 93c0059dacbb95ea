"""The memory engine on its own: facts, retrieval, compaction, imports, forgetting, export."""
