"""Gemini explicit context caches for batch jobs (`cache: {explicit: true}` on a batch-mode step).

A step's system prompt goes into one context cache, made before the step's first job is created
and named by every request line of its jobs (`cachedContent`, the line then carrying no system
instruction: the Developer API's batch converter in google-genai maps an inlined request's
`config.cached_content` to it). The cache lives for a batch's whole window (`BATCH_CACHE_TTL_S`),
and the lane deletes it once the step has no batch left to collect (`release_caches`).

Its display name is the job's and the step's (`display_name`), so a process killed between making
the cache and creating the job finds it again (`caches.list`) instead of paying for a second one;
a later apply deletes it the same way. Each cache made or deleted is reported to the engine's
ledger of cache fees (providers/base.py `CacheFee`). Vertex AI's batch prediction refuses
`cachedContent`, and a cache Gemini refuses to make (4xx) leaves the lines their system prompt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from batchor.errors import ProviderError
from batchor.fingerprint import sha256_hex
from batchor.providers.base import CacheFee, CacheFeeSink, LLMRequest
from batchor.providers.batch import crash_point
from batchor.providers.caching import BATCH_CACHE_TTL_S
from batchor.providers.gemini.context import _RETRIED, _epoch, _expiry

T = TypeVar("T")
CACHE_FIELD = "batchor_cache"  # an inline line's metadata: its step's cache key (taken off before the create)
Call = Callable[..., Awaitable[Any]]
LIST_PAGES = 10  # caches.list pages (100 each) searched for a display name


def display_name(job_id: str, key: str) -> str:
    """The name a job's step cache carries at Gemini: found again by it after a crash."""
    return f"batchor-{sha256_hex(job_id)[:12]}-{key[:16]}"


def marked(request: LLMRequest) -> dict[str, str]:
    """The metadata that marks a request line for the step's explicit cache (none: {})."""
    cache = request.cache
    return {CACHE_FIELD: cache.key} if cache is not None and cache.explicit else {}


class BatchCaches:
    """The context caches a batch adapter made or found, by display name: (name, expiry)."""

    def __init__(self, client: Any, call: Call) -> None:
        self._client, self._call = client, call  # `call`: the adapter's mapped, retried call
        self._held: dict[str, tuple[str, float]] = {}
        self._fees: dict[str, CacheFee] = {}
        self.sink: CacheFeeSink | None = None

    async def apply(self, job_id: str, lines: list[bytes]) -> list[bytes]:
        """`lines` reading their system prompt from the step's cache (made or found first)."""
        items = [json.loads(line) for line in lines]
        keys = {str(item.get("metadata", {}).pop(CACHE_FIELD, "")) for item in items} - {""}
        if not keys:
            return lines
        name = None
        system = items[0]["config"].get("system_instruction")
        if system and not self._client.vertexai:
            name = await self._ensure(job_id, next(iter(keys)), items[0]["model"], system)
            crash_point("after_cache")
        for item in items:
            if name is not None:
                item["config"].pop("system_instruction", None)
                item["config"]["cached_content"] = name
        return [json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode() for item in items]

    async def _ensure(self, job_id: str, key: str, model: str, system: str) -> str | None:
        shown = display_name(job_id, key)
        held = self._held.get(shown)
        if held is None or held[1] - time.time() < BATCH_CACHE_TTL_S / 2:  # a new job outlives what is left
            found = await self._find(shown, fresh=True)
            held = self._adopted(found, key) if found is not None else None
        if held is None:
            made = await self._create(shown, key, model, system)
            if made is None:
                return None
            held = made
        self._held[shown] = held
        return held[0]

    async def _create(self, shown: str, key: str, model: str, system: str) -> tuple[str, float] | None:
        config = {"system_instruction": system, "ttl": f"{BATCH_CACHE_TTL_S}s", "display_name": shown}
        try:
            made = await self._call(
                "gemini.caches.create", lambda: self._client.aio.caches.create(model=model, config=config), creates=True
            )
        except _RETRIED:
            raise
        except ProviderError:  # refused: the lines carry the prompt themselves
            return None
        usage = getattr(made, "usage_metadata", None)
        tokens = int(getattr(usage, "total_token_count", None) or 0)
        created = _epoch(getattr(made, "create_time", None), time.time())
        expiry = _expiry(made, created)
        self._report(CacheFee(key, str(made.name), model, tokens, created, expiry))
        return str(made.name), expiry

    async def _find(self, shown: str, *, fresh: bool = False) -> Any:
        """The live cache of this display name (`fresh`: with half its lifetime left), or None."""
        pager = await self._call("gemini.caches.list", lambda: self._client.aio.caches.list(config={"page_size": 100}))
        seen = 0
        async for cache in pager:
            left = _expiry(cache, 0.0) - time.time()
            if cache.display_name == shown and left > (BATCH_CACHE_TTL_S / 2 if fresh else 0):
                return cache
            seen += 1
            if seen >= LIST_PAGES * 100:
                break
        return None

    async def release(self, job_id: str, key: str) -> None:
        """Delete the step's cache (made here or by an earlier apply): its jobs are all collected."""
        if self._client.vertexai:  # its batch lines never name one (made none)
            return
        shown = display_name(job_id, key)
        held = self._held.pop(shown, None)
        if held is None:
            found = await self._find(shown)
            if found is None:
                return
            held = self._adopted(found, key)
        await self._call("gemini.caches.delete", lambda: self._client.aio.caches.delete(name=held[0]))
        fee = self._fees.get(held[0])
        if fee is not None:  # billed until now, not until its expiry
            self._report(replace(fee, held_until=time.time(), deleted=True))

    def _adopted(self, found: Any, key: str) -> tuple[str, float]:
        """A cache an earlier process made (its fee recorded then), held from now on by this one."""
        created = _epoch(getattr(found, "create_time", None), time.time())
        tokens = int(getattr(getattr(found, "usage_metadata", None), "total_token_count", None) or 0)
        model = str(getattr(found, "model", "") or "").removeprefix("models/")
        expiry = _expiry(found, created)
        self._fees.setdefault(str(found.name), CacheFee(key, str(found.name), model, tokens, created, expiry))
        return str(found.name), expiry

    def _report(self, fee: CacheFee) -> None:
        self._fees[fee.name] = fee
        if self.sink is not None:
            self.sink(fee)
