"""Anthropic: `realtime` (Messages API) and `batch` (Message Batches)."""
