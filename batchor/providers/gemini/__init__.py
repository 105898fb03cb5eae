"""Google Gemini through google-genai: `realtime` (generate_content) and `batch` (batch jobs)."""
