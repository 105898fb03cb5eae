"""Retry timing: exponential backoff with full jitter, never shorter than a Retry-After."""

from __future__ import annotations

import random


def backoff_delay(attempt: int, *, base: float = 0.5, cap: float = 30.0, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `attempt` (1-based)."""
    uniform = rng.uniform if rng is not None else random.uniform
    delay = uniform(0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay
