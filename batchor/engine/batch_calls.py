"""Retries for the calls a Batch API needs besides generation: upload, create, poll, list,
download, cancel, delete.

Each call is classified like a realtime request (providers/errors_map.py, through the adapter's
error mapping): rate limits, 5xx, timeouts and dropped connections are tried again on that call
with exponential backoff and full jitter, never sooner than the provider's Retry-After (or
Gemini's RetryInfo delay); anything else is raised at once, its message naming the endpoint. A
call that creates something remotely is repeated only after a 429, a definite refusal: after a
timeout or a 5xx the batch may exist, so the adapter raises BatchCreateUnknownError and the
engine reconciles through `find` instead (an automatic retry could pay for a batch twice).
A provider that could not be reached at all (connection refused, unknown host) and has not
answered any call yet gets a few quick tries, not the full backoff: the run then stops with
that error (engine/reachability.py) instead of waiting half a minute on a dead endpoint.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from batchor.engine.events import Event, EventSink
from batchor.engine.reachability import STOP_AFTER
from batchor.engine.retry import backoff_delay
from batchor.errors import (
    BatchCreateUnknownError,
    ProviderError,
    ProviderUnreachableError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.batch import failed_call

T = TypeVar("T")
CALL_TRIES = 6  # tries of one call before its failure is the engine's to handle
BASE_DELAY_S = 1.0
MAX_DELAY_S = 60.0
UNREACHABLE_DELAY_S = 0.5  # backoff base between the few tries of a provider never reached

Sleep = Callable[[float], Awaitable[None]]


async def default_sleep(delay: float) -> None:
    await asyncio.sleep(delay)


class RetryingCalls:
    """The engine's `CallRunner`: retries transient failures of one call, emits each retry."""

    def __init__(
        self,
        sleep: Sleep | None = None,
        emit: EventSink | None = None,
        *,
        tries: int = CALL_TRIES,
        base_s: float = BASE_DELAY_S,
        cap_s: float = MAX_DELAY_S,
        rng: random.Random | None = None,
    ) -> None:
        self.sleep = sleep
        self.emit = emit
        self.tries, self.base_s, self.cap_s = tries, base_s, cap_s
        self.rng = rng or random.Random()
        self.answered = False  # any call of this provider got an HTTP answer

    async def __call__(self, endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await fn()
            except ProviderError as exc:
                dead = isinstance(exc, ProviderUnreachableError) and not self.answered
                if not _worth_repeating(exc, creates) or attempt >= (STOP_AFTER if dead else self.tries):
                    raise failed_call(endpoint, exc, creates=creates) from None
                if exc.status is not None:
                    self.answered = True
                delay = backoff_delay(
                    attempt,
                    base=UNREACHABLE_DELAY_S if dead else self.base_s,
                    cap=self.cap_s,
                    retry_after=exc.retry_after,
                    rng=self.rng,
                )
                if self.emit is not None:
                    self.emit(
                        Event(
                            "provider_call_retry",
                            {"endpoint": endpoint, "attempt": attempt, "error": exc.message, "wait_s": round(delay, 3)},
                        )
                    )
                await (self.sleep or default_sleep)(delay)
                continue
            self.answered = True
            return result


def _worth_repeating(exc: ProviderError, creates: bool) -> bool:
    if isinstance(exc, RateLimitedError):
        return True
    if isinstance(exc, BatchCreateUnknownError):
        return False
    if isinstance(exc, ProviderUnreachableError):  # nothing was sent, so nothing was created
        return True
    return isinstance(exc, TransientProviderError) and not creates
