"""Rule-based fact extraction from chat messages."""
