"""Compaction: the rolling summary, by a model or by the offline summarizer."""
