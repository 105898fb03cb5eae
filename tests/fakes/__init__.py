"""Local fake of the OpenAI, Anthropic and Gemini APIs for tests and benchmarks."""

from .answers import prompt_key
from .handle import FakeServer, FakeServerError, start_fake_server

__all__ = ["FakeServer", "FakeServerError", "prompt_key", "start_fake_server"]
