"""The batch seam: what the engine needs from a provider's Batch API, and nothing more.

A batch adapter turns `LLMRequest`s into the provider's request lines (pure), submits a chunk
tagged with batchor's local batch id, finds a batch again by that tag (to reconcile a create
whose outcome is unknown), polls it, reads its per-row results back and cancels it. Each
adapter reuses its realtime module's pure `to_body`/`parse_result`, so a row costs the same
request whether it goes realtime or in a batch.
"""

from __future__ import annotations

import importlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from batchor.errors import ProviderError
from batchor.providers import provider_info
from batchor.providers.base import Completion, LLMRequest, ProviderConfig

# Normalised batch states (the provider's own word is kept in RemoteBatch.status).
RUNNING, COMPLETED, FAILED, EXPIRED, CANCELLED = "submitted", "completed", "failed", "expired", "cancelled"
ENDED = (COMPLETED, FAILED, EXPIRED, CANCELLED)
CRASH_ENV = "BATCHOR_TEST_CRASH_AT"  # tests: die (SIGKILL) at a named point, e.g. after_create


def crash_point(name: str) -> None:
    """Crash tests kill the process here when CRASH_ENV names this point (engine and adapters)."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class BatchLimits:
    max_requests: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class BatchTag:
    """What identifies a batch at the provider as ours: the local id, plus context for humans."""

    batch_id: str
    job_id: str
    step: str
    chunk: int
    requests: int
    created_at: float  # epoch seconds of the intent: reconciliation only looks at later batches


@dataclass(slots=True)
class RemoteBatch:
    remote_id: str
    status: str  # the provider's word
    state: str  # RUNNING or one of ENDED
    tag: str | None = None
    created_at: float | None = None
    requests: int | None = None
    error: ProviderError | None = None  # batch-level failure (e.g. quota), if any
    handle: Any = None  # what the adapter needs to read results (file ids, result URL)

    @property
    def ended(self) -> bool:
        return self.state in ENDED


@dataclass(slots=True)
class RowResult:
    """One row's answer in a finished batch: a completion, an error, or nothing (`missing`)."""

    key: str
    completion: Completion | None = None
    error: ProviderError | None = None
    missing: bool = False  # the batch ended (expired, cancelled) before this row ran
    raw: bytes | None = None  # the result line as received, kept for audit when at hand


@runtime_checkable
class BatchProvider(Protocol):
    name: str
    limits: BatchLimits

    def encode(self, request: LLMRequest) -> bytes:
        """The request as the provider will receive it (its size counts against the limits)."""
        ...

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        """Create the batch. Raise BatchCreateUnknownError when it may exist despite an error."""
        ...

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        """The remote batch created for `tag`, if any (ids in `claimed` belong to other batches)."""
        ...

    async def poll(self, remote_id: str) -> RemoteBatch: ...

    def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]: ...

    async def cancel(self, remote_id: str) -> RemoteBatch: ...

    async def aclose(self) -> None: ...


def create_batch_provider(config: ProviderConfig) -> BatchProvider:
    """The batch adapter of a provider (`batchor.providers.<adapter>_batch`), SDK imported now."""
    info = provider_info(config.provider)
    module = importlib.import_module(f"batchor.providers.{info.adapter}_batch")
    provider: BatchProvider = module.create(config, info)
    return provider


def capped(limits: BatchLimits, max_requests: int | None, max_bytes: int | None) -> BatchLimits:
    """Spec limits can only lower the provider's."""
    return BatchLimits(min(limits.max_requests, max_requests or limits.max_requests),
                       min(limits.max_bytes, max_bytes or limits.max_bytes))
