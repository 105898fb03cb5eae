"""Pacing: requests-per-minute and tokens-per-minute buckets, and what a 429 changes.

One pacing loop (`Pacer.acquire`) serves this process's `RateLimiter` and the `SharedRateLimiter`
of several workers (engine/shared_limiter.py): waiters queue behind one lock (FIFO, so a burst
cannot stampede the provider), honour a pause of the whole pool, then take permits from buckets.

A 429 is judged by what it says, so random ones do not slow every worker down:
- it shows the account's limit spent (a `remaining-*` header at 0), or most recent answers are
  429s: the pool pauses for Retry-After and, once per pace, the pace drops by a fifth
  (successes raise it again). 429s of requests sent before that cut do not cut again;
- otherwise (an overloaded backend, a gateway hiccup, no limit information) only that request
  waits for its Retry-After; the caller sends other requests meanwhile.
Until the limits are known (none in the spec, no headers seen yet), one request goes alone, so
its answer's headers set the pace before `concurrency` requests meet the provider at once.
Clock and sleep are injectable.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Awaitable, Callable, Protocol

from batchor.errors import RateLimitedError

ADOPTED_SHARE = 0.97  # of a provider's advertised limits: the pace it gets when the spec sets none
CUT = 0.8  # pace multiplier after a 429 that shows the limit is spent
RECOVERY = 0.02  # pace added back per success
WINDOW = 32  # answers remembered to tell a rate limit from random 429s
POOL_SHARE = 0.5  # this share of 429s in the window: the pool is too fast, whatever the headers say
DEFAULT_WAIT_S = 1.0  # a 429 without Retry-After


class Limiter(Protocol):
    """What the executors pace through: `RateLimiter` here, `SharedRateLimiter` across workers."""

    async def acquire(self, tokens: int = 0) -> float:
        """Wait until one request of `tokens` tokens may be sent; the limiter's clock at release."""

    def on_success(self, headers: dict[str, float] | None = None) -> None:
        """An answer came back, with the provider's rate-limit headers when it sent them."""

    def on_rate_limited(self, error: RateLimitedError, sent_at: float) -> float:
        """A 429 for the request released at `sent_at`: seconds that request waits before it is
        sent again (0: the pool is paused, `acquire` waits)."""

    def on_failure(self) -> None:
        """Another error came back (it carries no limit information)."""


class Pacer:
    """The pacing loop and the 429 judgement every limiter shares; subclasses hold the buckets."""

    def __init__(self, clock: Callable[[], float], sleep: Callable[[float], Awaitable[None]]) -> None:
        self.clock, self.sleep = clock, sleep
        self.paused_until = 0.0
        self.cut_at = float("-inf")  # when the pace was last cut
        self.recent: deque[bool] = deque(maxlen=WINDOW)  # True: a 429
        self._lock = asyncio.Lock()
        self._answered = asyncio.Event()
        self._probe_sent = False

    async def acquire(self, tokens: int = 0) -> float:
        await self._after_probe()
        async with self._lock:
            while True:
                now = self.clock()
                if now < self.paused_until:
                    await self.sleep(self.paused_until - now)
                    continue
                wait = await self._take(tokens, now)
                if wait <= 0:
                    return now
                await self.sleep(wait)

    async def _after_probe(self) -> None:
        """Until the limits are known, the first request goes alone and the rest await its answer."""
        if self._answered.is_set() or self.knows_limits():
            return
        if not self._probe_sent:
            self._probe_sent = True
            return
        await self._answered.wait()

    def on_success(self, headers: dict[str, float] | None = None) -> None:
        self._answered.set()
        self.recent.append(False)
        self._recover()
        if headers:
            self._adopt(headers)

    def on_failure(self) -> None:
        self._answered.set()

    def on_rate_limited(self, error: RateLimitedError, sent_at: float) -> float:
        self._answered.set()
        self.recent.append(True)
        limits = error.rate_limits
        if limits:
            self._adopt(limits)
        wait = error.retry_after if error.retry_after is not None else DEFAULT_WAIT_S
        if not self._pool_limited(limits):
            return wait  # this request backs off; the others keep their pace
        if sent_at >= self.cut_at:  # sent at the current pace: it is too fast
            self.cut_at = self.clock()
            self._slow_down(wait)
        return 0.0

    def _pool_limited(self, limits: dict[str, float]) -> bool:
        spent = any(value == 0 for name, value in limits.items() if name.startswith("remaining-"))
        return spent or sum(self.recent) >= POOL_SHARE * WINDOW

    # --- what subclasses provide ---------------------------------------------------------------

    async def _take(self, tokens: int, now: float) -> float:
        """Take one request's permits now (0), or the seconds until they may be there."""
        raise NotImplementedError

    def knows_limits(self) -> bool:
        raise NotImplementedError

    def _adopt(self, headers: dict[str, float]) -> None:
        """Pace by the provider's advertised limits where the spec set none."""
        raise NotImplementedError

    def _slow_down(self, pause_s: float) -> None:
        raise NotImplementedError

    def _recover(self) -> None:
        """A success: undo a little of the last cut."""


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
        if self.level >= amount - 1e-9:  # clock rounding must not leave a wait too small to pass
            self.level -= amount
            return 0.0
        return (amount - self.level) / rate


class RateLimiter(Pacer):
    """This process's buckets, paced at `factor` times the configured (or advertised) rates."""

    def __init__(
        self,
        rpm: float | None,
        tpm: float | None,
        *,
        burst_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(clock, sleep)
        self.burst_s = burst_s
        self.requests = _Bucket(rpm, burst_s) if rpm else None
        self.tokens = _Bucket(tpm, burst_s) if tpm else None
        self.factor = 1.0  # multiplier on the pace: cut by limit-spent 429s, raised by successes

    async def _take(self, tokens: int, now: float) -> float:
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

    def knows_limits(self) -> bool:
        return self.requests is not None or self.tokens is not None

    def _adopt(self, headers: dict[str, float]) -> None:
        if self.requests is None and headers.get("limit-requests"):
            self.requests = _Bucket(headers["limit-requests"] * ADOPTED_SHARE, self.burst_s)
        if self.tokens is None and headers.get("limit-tokens"):
            self.tokens = _Bucket(headers["limit-tokens"] * ADOPTED_SHARE, self.burst_s)

    def _slow_down(self, pause_s: float) -> None:
        self.factor = max(0.05, self.factor * CUT)
        self.paused_until = max(self.paused_until, self.clock() + pause_s)

    def _recover(self) -> None:
        if self.factor < 1.0:
            self.factor = min(1.0, self.factor + RECOVERY)
