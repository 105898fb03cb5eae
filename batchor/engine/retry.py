"""Retry timing: exponential backoff with full jitter, never shorter than a Retry-After."""

from __future__ import annotations

import random

from batchor.errors import ProviderError, ProviderUnreachableError, RateLimitedError, TransientProviderError


def backoff_delay(
    attempt: int,
    *,
    base: float = 0.5,
    cap: float = 30.0,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before retry number `attempt` (1-based)."""
    uniform = rng.uniform if rng is not None else random.uniform
    delay = uniform(0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def maybe_billed(exc: ProviderError) -> bool:
    """A call that was sent and got no answer (a timeout, a connection dropped after sending): the
    provider may have run and billed it. An HTTP error, a 429 or a connection never made was not."""
    return (
        isinstance(exc, TransientProviderError)
        and exc.status is None
        and not isinstance(exc, (RateLimitedError, ProviderUnreachableError))
    )
