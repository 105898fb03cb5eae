"""OpenAI and OpenAI-compatible endpoints: `realtime` (Chat Completions, Responses) and `batch` (Batch API)."""
