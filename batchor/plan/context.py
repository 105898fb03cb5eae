"""Context windows: rows whose prompt cannot fit fail alone, before any call, not the run.

A small table of well-known model families (tokens); a spec can set `model.context_window` for
anything else. Unknown models are not checked (the provider's own error then fails the row).
"""

from __future__ import annotations

_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("chatgpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
)


def context_window(model: str, override: int | None = None) -> int | None:
    if override:
        return override
    name = model.lower().split("/")[-1]
    return next((size for prefix, size in _WINDOWS if name.startswith(prefix)), None)


def too_long(input_tokens: int, max_tokens: int, window: int | None) -> bool:
    """True when the prompt plus the reserved answer cannot fit the model's window."""
    return window is not None and input_tokens + max_tokens > window
