"""Pacing: requests-per-minute and tokens-per-minute buckets with AIMD back-off.

Waiters queue behind one lock, so pacing is FIFO and a burst of workers cannot stampede the
provider. A 429 halves the pace (multiplicative decrease) and pauses everyone for Retry-After;
successes raise the pace again slowly (additive increase). Clock and sleep are injectable.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Protocol


class Limiter(Protocol):
    """What the executors pace through: `RateLimiter` here, `SharedRateLimiter` across workers."""

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of `tokens` tokens may be sent."""

    def on_rate_limited(self, retry_after: float | None) -> None:
        """A 429 came back: slow down and pause for Retry-After."""

    def on_success(self, headers: dict[str, float] | None = None) -> None:
        """An answer came back, with the provider's rate-limit headers when it sent them."""


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.updated: float | None = None

    def wait_for(self, amount: float, now: float, factor: float) -> float:
        """Seconds until `amount` is available at the current pace (0: take it now)."""
        rate = self.rate * factor
        if self.updated is not None:
            self.level = min(self.capacity, self.level + (now - self.updated) * rate)
        self.updated = now
        amount = min(amount, self.capacity)
        if self.level >= amount:
            self.level -= amount
            return 0.0
        return (amount - self.level) / rate


class RateLimiter:
    def __init__(self, rpm: int | None, tpm: int | None, *, burst_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.requests = _Bucket(rpm, burst_s) if rpm else None
        self.tokens = _Bucket(tpm, burst_s) if tpm else None
        self.clock, self.sleep = clock, sleep
        self.factor = 1.0  # AIMD multiplier on the configured pace
        self.paused_until = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int = 0) -> None:
        async with self._lock:
            while True:
                now = self.clock()
                if now < self.paused_until:
                    await self.sleep(self.paused_until - now)
                    continue
                wait = self._wait(tokens, now)
                if wait <= 0:
                    return
                await self.sleep(wait)

    def _wait(self, tokens: int, now: float) -> float:
        wait = 0.0
        if self.requests is not None:
            wait = self.requests.wait_for(1, now, self.factor)
            if wait > 0:
                return wait
        if self.tokens is not None and tokens:
            wait = self.tokens.wait_for(tokens, now, self.factor)
            if wait > 0 and self.requests is not None:
                self.requests.level += 1  # give the request slot back while waiting for tokens
        return wait

    def on_rate_limited(self, retry_after: float | None) -> None:
        self.factor = max(0.05, self.factor * 0.5)
        pause = retry_after if retry_after is not None else 1.0
        self.paused_until = max(self.paused_until, self.clock() + pause)

    def on_success(self, headers: dict[str, float] | None = None) -> None:
        if self.factor < 1.0:
            self.factor = min(1.0, self.factor + 0.02)
        if headers:
            self._observe(headers)

    def _observe(self, headers: dict[str, float]) -> None:
        """Adopt the provider's advertised limits when the spec set none; pause when exhausted."""
        if self.requests is None and headers.get("limit-requests"):
            self.requests = _Bucket(headers["limit-requests"] * 0.95, 1.0)
        if self.tokens is None and headers.get("limit-tokens"):
            self.tokens = _Bucket(headers["limit-tokens"] * 0.95, 1.0)
        if headers.get("remaining-requests") == 0 or headers.get("remaining-tokens") == 0:
            self.paused_until = max(self.paused_until, self.clock() + 1.0)
