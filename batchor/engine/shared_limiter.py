"""The rate limit of a run shared by several workers (PostgreSQL state): one bucket row per
provider+model in the database, drawn in small slices, paced by the same loop as a local limiter.

Permits are taken in slices of about `slice_s` seconds of the rate, so the database sees a few
requests per second whatever the call rate. A 429 that shows the limit spent pauses every worker
on the bucket (a random 429 only delays its own request, see engine/limiter.py). Without rpm/tpm
in the spec nothing is paced until the provider advertises its limits in response headers; those
then become the shared bucket's rate, as they would locally.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

from batchor.engine.limiter import ADOPTED_SHARE, Pacer
from batchor.state.leases import LeaseBook


class SharedRateLimiter(Pacer):
    """Same face as `RateLimiter`; permits come from one bucket row that all workers share."""

    def __init__(
        self,
        book: LeaseBook,
        rate_key: str,
        rpm: float | None,
        tpm: float | None,
        *,
        burst_s: float = 1.0,
        slice_s: float = 0.05,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock, sleep)
        self.book, self.rate_key, self.burst_s, self.slice_s = book, rate_key, burst_s, slice_s
        self.rpm: float | None = None
        self.tpm: float | None = None
        self.requests = self.tokens = float("inf")
        self._pace(rpm, tpm)
        self._pause_s = 0.0  # a pause to write to the shared bucket with the next draw

    async def _take(self, tokens: int, now: float) -> float:
        if not self._holds(tokens):
            wait = await self._draw(tokens)
            if not self._holds(tokens):
                return min(max(wait, 0.001), 1.0)
        self.requests -= 1
        self.tokens -= tokens
        return 0.0

    def _holds(self, tokens: int) -> bool:
        return self.requests >= 1 and self.tokens >= tokens

    async def _draw(self, tokens: int) -> float:
        """Draw a slice of permits from the shared bucket; the seconds until more are there."""
        need = max(0.0, tokens - self.tokens) if self.tpm else 0.0
        pause, self._pause_s = self._pause_s, 0.0
        grant = await asyncio.to_thread(
            self.book.take,
            self.rate_key,
            self.rpm,
            self.tpm,
            self.burst_s,
            self.want if self.requests < 1 else 0,
            need * self.want,
            need,
            pause,
        )
        self.requests += grant.requests
        self.tokens += grant.tokens
        return grant.wait_s

    def knows_limits(self) -> bool:
        return bool(self.rpm or self.tpm)

    def _adopt(self, headers: dict[str, float]) -> None:
        advertised = [headers.get("limit-requests"), headers.get("limit-tokens")]
        self._pace(*(v * ADOPTED_SHARE if v else None for v in advertised))

    def _slow_down(self, pause_s: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + pause_s)
        self._pause_s = max(self._pause_s, pause_s)

    def _pace(self, rpm: float | None, tpm: float | None) -> None:
        """Set the rates the spec (or, failing it, the provider) gives; a set rate is kept."""
        if rpm and not self.rpm:
            self.rpm, self.requests = float(rpm), 0.0
        if tpm and not self.tpm:
            self.tpm, self.tokens = float(tpm), 0.0
        self.want = max(1, int((self.rpm or 0) / 60 * self.slice_s))
