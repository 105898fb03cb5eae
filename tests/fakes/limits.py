"""Rate limits that behave like a provider's: token buckets refilled continuously.

Providers enforce "per minute" limits over much shorter windows (a 60 rpm key cannot send 60
requests in the first second), so each bucket holds only ``burst_s`` seconds' worth of
capacity. Over the limit the caller learns how long until the request would fit: that is the
``retry-after`` a real 429 carries.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class Bucket:
    per_minute: float
    burst_s: float
    level: float = 0.0  # may go negative: a request bigger than the bucket leaves a debt
    stamp: float | None = None  # None until first use: a fresh bucket starts full

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    @property
    def capacity(self) -> float:
        return max(1.0, self.rate * self.burst_s)

    def refill(self, now: float) -> None:
        if self.stamp is None:
            self.level = self.capacity
        else:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` fits (0 when it fits now). A request larger than the whole
        bucket only needs a full bucket, and then leaves it in debt."""
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def reset_s(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


@dataclass(slots=True)
class Snapshot:
    """What the rate-limit headers report after a request was admitted or refused."""

    rpm: int | None = None
    requests_left: int = 0
    requests_reset_s: float = 0.0
    tpm: int | None = None
    tokens_left: int = 0
    tokens_reset_s: float = 0.0
    retry_after_s: float = 0.0  # > 0 when the request was refused
    refused_by: str = ""  # "requests" or "tokens": the bucket that refused it

    @property
    def limited(self) -> bool:
        return self.rpm is not None or self.tpm is not None


class Limiter:
    """One request bucket and one token bucket per (provider, model), like real accounts."""

    def __init__(self, rpm: float | None, tpm: float | None, burst_s: float) -> None:
        self.rpm, self.tpm, self.burst_s = rpm, tpm, burst_s
        self.buckets: dict[tuple[str, str, str], Bucket] = {}

    def admit(self, key: tuple[str, str], tokens: int, now: float | None = None) -> Snapshot:
        """Take one request and ``tokens`` tokens from ``key``'s buckets, or neither."""
        now = time.monotonic() if now is None else now
        req = self._bucket(key, "requests", self.rpm, now)
        tok = self._bucket(key, "tokens", self.tpm, now)
        req_wait = req.wait_for(1) if req else 0.0
        tok_wait = tok.wait_for(tokens) if tok else 0.0
        wait = max(req_wait, tok_wait)
        if wait == 0.0:
            if req:
                req.level -= 1
            if tok:
                tok.level -= tokens
        snap = Snapshot(retry_after_s=wait)
        if wait:
            snap.refused_by = "requests" if req_wait >= tok_wait else "tokens"
        if req:
            snap.rpm = int(self.rpm or 0)
            snap.requests_left, snap.requests_reset_s = max(0, int(req.level)), req.reset_s()
        if tok:
            snap.tpm = int(self.tpm or 0)
            snap.tokens_left, snap.tokens_reset_s = max(0, int(tok.level)), tok.reset_s()
        return snap

    def _bucket(self, key: tuple[str, str], kind: str, per_minute: float | None, now: float) -> Bucket | None:
        if not per_minute:
            return None
        bucket = self.buckets.get((*key, kind))
        if bucket is None:
            bucket = self.buckets[(*key, kind)] = Bucket(per_minute, self.burst_s)
        bucket.refill(now)
        return bucket
