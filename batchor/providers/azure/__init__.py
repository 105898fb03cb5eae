"""Azure OpenAI: `realtime` and `batch`, the OpenAI adapters over the openai SDK's Azure client."""
