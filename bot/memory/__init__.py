"""Long-term memory around the store: recall for a turn, and what a person's departure forgets."""
