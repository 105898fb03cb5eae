"""The batch seam: what the engine needs from a provider's Batch API, and nothing more.

A batch adapter turns `LLMRequest`s into the provider's request lines (pure), submits a chunk
tagged with batchor's local batch id, finds a batch again by that tag (to reconcile a create
whose outcome is unknown), polls it, reads its per-row results back and cancels it. Each
adapter reuses its realtime module's pure `to_body`/`parse_result`, so a row costs the same
request whether it goes realtime or in a batch.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import re
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, TypeVar, runtime_checkable

from batchor.errors import (
    BatchCreateUnknownError,
    BatchResultUnreadableError,
    ProviderError,
    ProviderUnreachableError,
    TransientProviderError,
)
from batchor.providers import provider_info
from batchor.providers.base import Completion, LLMRequest, ProviderConfig

# Normalised batch states (the provider's own word is kept in RemoteBatch.status).
RUNNING, COMPLETED, FAILED, EXPIRED, CANCELLED = "submitted", "completed", "failed", "expired", "cancelled"
ENDED = (COMPLETED, FAILED, EXPIRED, CANCELLED)
CRASH_ENV = "BATCHOR_TEST_CRASH_AT"  # tests: die (SIGKILL) at a named point, e.g. after_create


@contextmanager
def spooled(lines: list[bytes]) -> Iterator[BinaryIO]:
    """A chunk's lines as one file on disk, for an upload: the SDKs stream a file object from disk
    (and rewind it for a retry), where joined bytes would hold a second copy of the whole batch
    (up to hundreds of MB of base64 attachments) in memory while it is sent."""
    with tempfile.TemporaryFile(prefix="batchor-batch-") as spool:
        spool.writelines(lines)
        spool.flush()
        spool.seek(0)
        yield spool


def from_start(spool: BinaryIO) -> BinaryIO:
    """`spool` rewound: our own retry of an upload hands the SDK the same file object, which the
    failed attempt read to its end, and would send an empty file (a batch of no requests)."""
    spool.seek(0)
    return spool


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
    done: int | None = None  # rows finished so far, when the provider reports it (paces the polls)
    error: ProviderError | None = None  # batch-level failure (e.g. quota), if any
    handle: Any = None  # what the adapter needs to read results (file ids, result URL)
    files: tuple[str, ...] = ()  # provider files (input, output) to delete once results are stored
    # found by elimination (size and time, no tag of ours to match: Anthropic), not by its tag: it may be
    # another job's until its results carry the intent's request keys (engine/batch_collect.py)
    guessed: bool = False

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


def result_line(raw: bytes, key_field: str) -> dict[str, Any] | RowResult:
    """A results line as JSON; a line that is not JSON as its row's failure, keyed by whatever
    survives of `key_field` ("" when nothing tells whose it was: see engine/batch_collect.py)."""
    try:
        line = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        line = None
    if isinstance(line, dict):
        return line
    text = raw.decode("utf-8", "replace")
    found = re.search(rf'"{re.escape(key_field)}"\s*:\s*"([^"\\]+)"', text)
    error = BatchResultUnreadableError(
        f"the batch's result line for this row is not JSON ({len(raw):,} bytes: "
        f"{text[:60]!r}...); the row ran and may have been billed, so it is not "
        "sent again by itself (`--retry-failed` sends it)"
    )
    return RowResult(found.group(1) if found else "", error=error, raw=raw)


T = TypeVar("T")


class CallRunner(Protocol):
    """Runs one provider call named `endpoint` (e.g. "openai.batches.retrieve").

    `fn` makes the SDK call inside the adapter's error mapping, so it raises batchor errors only.
    The engine installs a runner that retries (engine/batch_calls.py); a call that `creates`
    something remotely is repeated only after a definite refusal (429), never after a timeout.
    """

    async def __call__(self, endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> T: ...


async def call_once(endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> T:
    """The runner of an adapter on its own: one try, errors naming the endpoint."""
    try:
        return await fn()
    except ProviderError as exc:
        raise failed_call(endpoint, exc, creates=creates) from None


def failed_call(endpoint: str, exc: ProviderError, *, creates: bool = False) -> ProviderError:
    """`exc` with the endpoint in its message; a create that may have happened becomes
    BatchCreateUnknownError (reconciled through `find`, never repeated blindly)."""
    definite = isinstance(exc, (BatchCreateUnknownError, ProviderUnreachableError))  # nothing sent: not created
    if creates and isinstance(exc, TransientProviderError) and not definite:
        return BatchCreateUnknownError(f"{endpoint}: {exc.message} (the batch may exist)", status=exc.status)
    if exc.message.startswith(f"{endpoint}: "):
        return exc
    named = copy.copy(exc)
    named.message = f"{endpoint}: {exc.message}"
    named.args = (named.message,)
    return named


async def mapped_call(
    calls: CallRunner,
    errors: Callable[[], AbstractAsyncContextManager[None]],
    endpoint: str,
    fn: Callable[[], Awaitable[T]],
    *,
    creates: bool = False,
) -> T:
    """One SDK call of an adapter: inside its error mapping, run (and retried) by `calls`."""

    async def attempt() -> T:
        async with errors():
            return await fn()

    return await calls(endpoint, attempt, creates=creates)


async def forget_file(provider: BatchProvider, name: str) -> None:
    """Delete an uploaded input file that no batch refers to, after a refused create: best effort,
    since an orphaned input file only takes storage and the create's own error is what matters."""
    try:
        await provider.delete_file(name)
    except ProviderError:
        pass


@runtime_checkable
class BatchProvider(Protocol):
    name: str
    limits: BatchLimits
    calls: CallRunner

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

    async def delete_file(self, name: str) -> None:
        """Delete one of `RemoteBatch.files` (results stored: the provider's copy is not needed)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ReleasesCaches(Protocol):
    """A batch adapter holding a cache for a step's jobs (Gemini's context caches): the engine
    releases it once the step has no batch left to collect."""

    async def release_caches(self, job_id: str, key: str) -> None: ...


def create_batch_provider(config: ProviderConfig) -> BatchProvider:
    """The batch adapter of a provider (`batchor.providers.<adapter>.batch`), SDK imported now."""
    info = provider_info(config.provider)
    module = importlib.import_module(f"batchor.providers.{info.adapter}.batch")
    provider: BatchProvider = module.create(config, info)
    return provider


def capped(limits: BatchLimits, max_requests: int | None, max_bytes: int | None) -> BatchLimits:
    """Spec limits can only lower the provider's."""
    return BatchLimits(
        min(limits.max_requests, max_requests or limits.max_requests),
        min(limits.max_bytes, max_bytes or limits.max_bytes),
    )
