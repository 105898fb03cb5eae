"""Gemini explicit context caches of a run (`cache: {explicit: true}`, plan/context_cache.py).

A step's system prompt goes into one context cache (`client.aio.caches.create`), made by the
step's first request and shared by the others: each request then names it (`cached_content`)
and carries no system instruction of its own, as the API requires. The cache lives an hour and is
renewed while the run still uses it; the adapter deletes every cache it made when the run closes
it. A cache Gemini refuses to make (a prompt shorter than the model caches, a model without
explicit caching: a 4xx) leaves the step's requests carrying their system prompt, cached
implicitly; a failed call (5xx, unreachable) fails the request, which the engine retries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

from batchor.errors import (
    AuthenticationError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.base import CacheFee, CacheFeeSink
from batchor.providers.caching import EXPLICIT_TTL_S

RENEW_S = 600  # a cache with less left than this is renewed before the next request names it
_RETRIED = (TransientProviderError, RateLimitedError, QuotaExhaustedError, AuthenticationError)


class ContextCaches:
    """The context caches one adapter made: cache key -> (name, or None where refused; expiry).

    Each one made, renewed and deleted is reported to `sink` (the engine's ledger of cache fees):
    made, it is billed its tokens and storage until its expiry (what Gemini bills if the run is
    killed now); renewed, until the new expiry; deleted, until then."""

    def __init__(self, client: Any, mapped: Callable[[], AbstractAsyncContextManager[None]]) -> None:
        self._client = client
        self._mapped = mapped  # the adapter's error mapping
        self._made: dict[str, tuple[str | None, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._fees: dict[str, CacheFee] = {}  # by cache name: what was last reported
        self.sink: CacheFeeSink | None = None

    async def use(self, body: dict[str, Any], key: str) -> None:
        """`body` (generate_content's arguments) reading its system prompt from the step's cache."""
        system = body["config"].get("system_instruction")
        if not system:
            return
        async with self._locks.setdefault(key, asyncio.Lock()):
            found = self._made.get(key)
            if found is None:
                found = await self._create(body["model"], system, key)
            elif found[0] is not None and found[1] - time.monotonic() < RENEW_S:
                found = await self._renew(found[0])
            self._made[key] = found
        if found[0] is not None:
            del body["config"]["system_instruction"]
            body["config"]["cached_content"] = found[0]

    async def _create(self, model: str, system: str, key: str) -> tuple[str | None, float]:
        config = {"system_instruction": system, "ttl": f"{EXPLICIT_TTL_S}s", "display_name": f"batchor-{key[:24]}"}
        try:
            async with self._mapped():
                made = await self._client.aio.caches.create(model=model, config=config)
        except _RETRIED:
            raise
        except ProviderError:  # refused: the requests carry the prompt themselves
            return None, float("inf")
        usage = getattr(made, "usage_metadata", None)
        tokens = int(getattr(usage, "total_token_count", None) or 0)
        created = _epoch(getattr(made, "create_time", None), time.time())
        self._report(CacheFee(key, str(made.name), model, tokens, created, _expiry(made, created)))
        return str(made.name), time.monotonic() + EXPLICIT_TTL_S

    async def _renew(self, name: str) -> tuple[str | None, float]:
        async with self._mapped():
            renewed = await self._client.aio.caches.update(name=name, config={"ttl": f"{EXPLICIT_TTL_S}s"})
        if name in self._fees:
            self._report(replace(self._fees[name], held_until=_expiry(renewed, time.time())))
        return name, time.monotonic() + EXPLICIT_TTL_S

    def _report(self, fee: CacheFee) -> None:
        self._fees[fee.name] = fee
        if self.sink is not None:
            self.sink(fee)

    async def delete_all(self) -> None:
        """Delete every cache made (one that fails to go expires within its hour)."""
        names = [name for name, _ in self._made.values() if name is not None]
        self._made.clear()
        for name in names:
            try:
                async with self._mapped():
                    await self._client.aio.caches.delete(name=name)
            except ProviderError:
                continue
            if name in self._fees:  # billed until now, not until its expiry
                fee = self._fees[name]
                self._report(replace(fee, held_until=min(fee.held_until, time.time()), deleted=True))


def _epoch(moment: Any, default: float) -> float:
    """A provider timestamp (datetime) in epoch seconds, `default` without one."""
    return moment.timestamp() if isinstance(moment, datetime) else default


def _expiry(cache: Any, default_start: float) -> float:
    """When a cache the provider answered with expires (its `expire_time`, else a ttl from now)."""
    return _epoch(getattr(cache, "expire_time", None), default_start + EXPLICIT_TTL_S)
