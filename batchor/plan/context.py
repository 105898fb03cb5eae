"""Context windows: rows whose prompt cannot fit fail alone, before any call, not the run.

A small table of well-known model families (tokens), each provider's in its facts
(`providers/<name>/facts.py`); a spec can set `model.context_window` for anything else. Unknown
models are not checked (the provider's own error then fails the row).
"""

from __future__ import annotations

from functools import cache

from batchor.providers.facts import all_facts


@cache
def _windows() -> tuple[tuple[str, int], ...]:
    """Model-name prefixes and their windows, each provider's from its facts, in registry order."""
    return tuple(window for facts in all_facts() for window in facts.context_windows)


def context_window(model: str, override: int | None = None) -> int | None:
    if override:
        return override
    name = model.lower().split("/")[-1]
    return next((size for prefix, size in _windows() if name.startswith(prefix)), None)


def too_long(input_tokens: int, max_tokens: int, window: int | None) -> bool:
    """True when the prompt plus the reserved answer cannot fit the model's window."""
    return window is not None and input_tokens + max_tokens > window
