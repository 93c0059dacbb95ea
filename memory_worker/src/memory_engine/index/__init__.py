"""The search index: tokens, word forms, FTS5 indexing and BM25 retrieval."""
