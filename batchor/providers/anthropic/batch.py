"""Anthropic Message Batches: requests inline (`custom_id` + the realtime `params`), results by type.

Lines reuse the realtime `to_body`/`parse_result`. Message Batches carry no metadata to tag, so
an uncertain create is reconciled by elimination: a batch created after the intent (allowing
for clock skew), with the intent's number of requests, and not already claimed by another local
batch. Creates are sequential per step, so at most one such batch can be ours; another job's batch of
the same size made in the same minutes can look the same, so a batch found so is `guessed`: the
engine adopts it only once its results carry the intent's request keys (custom ids), and never
cancels it before then.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from batchor.errors import ProviderError
from batchor.providers.anthropic.realtime import (
    _mapped_errors,
    error_for,
    parse_result,
    structured_mode,
    to_body,
)
from batchor.providers.anthropic.realtime import create as create_realtime
from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.batch import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    RUNNING,
    BatchLimits,
    BatchTag,
    CallRunner,
    RemoteBatch,
    RowResult,
    call_once,
    mapped_call,
    result_line,
)

T = TypeVar("T")
LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)
RECONCILE_SKEW_S = 120.0  # local and provider clocks may disagree by this much
_STATUS_OF = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def encode_request(request: LLMRequest, *, strict: bool = True, option: str | None = None) -> bytes:
    """One Message Batches request: custom_id = request key (32 hex), params = the realtime body."""
    mode = structured_mode(request.model, strict=strict, option=option)
    line = {"custom_id": request.key, "params": to_body(request, structured=mode)}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def parse_line(line: dict[str, Any]) -> RowResult:
    """A results line by its type: succeeded, errored (classified), canceled/expired (missing)."""
    key = str(line.get("custom_id"))
    result = line.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        try:
            return RowResult(key, completion=parse_result(result.get("message") or {}))
        except ProviderError as exc:  # a refusal
            return RowResult(key, error=exc)
    if kind == "errored":
        envelope = result.get("error") or {}
        error = envelope.get("error", envelope) if isinstance(envelope, dict) else {}
        status = _STATUS_OF.get(str(error.get("type")), 500)
        return RowResult(key, error=error_for(status, envelope, str(error.get("message") or kind), None))
    return RowResult(key, missing=True)  # canceled, expired


def remote_from(batch: Any) -> RemoteBatch:
    counts = batch.request_counts
    total = sum(getattr(counts, k) or 0 for k in ("processing", "succeeded", "errored", "canceled", "expired"))
    state = RUNNING
    if batch.processing_status == "ended":
        state = CANCELLED if batch.cancel_initiated_at else EXPIRED if counts.expired else COMPLETED
    return RemoteBatch(
        remote_id=batch.id,
        status=batch.processing_status,
        state=state,
        created_at=batch.created_at.timestamp() if batch.created_at else None,
        requests=total,
        done=total - (counts.processing or 0),
    )


class AnthropicBatchProvider:
    name = "anthropic"

    def __init__(
        self, client: Any, *, strict: bool, option: str | None, secret: str, limits: BatchLimits = LIMITS
    ) -> None:
        self.client, self.strict, self.option, self._secret = client, strict, option, secret
        self.limits = limits
        self.calls: CallRunner = call_once

    def encode(self, request: LLMRequest) -> bytes:
        return encode_request(request, strict=self.strict, option=self.option)

    def _call(self, endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> Awaitable[T]:
        return mapped_call(self.calls, lambda: _mapped_errors(self._secret), endpoint, fn, creates=creates)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        requests = [json.loads(line) for line in lines]
        batch = await self._call(
            "anthropic.batches.create", lambda: self.client.messages.batches.create(requests=requests), creates=True
        )
        return remote_from(batch)

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        """The unclaimed batch of the intent's size created closest after the intent, if any."""
        candidates = await self._call("anthropic.batches.list", lambda: self._candidates(tag, claimed))
        found = min(candidates, key=lambda r: abs((r.created_at or 0) - tag.created_at), default=None)
        return None if found is None else replace(found, guessed=True)

    async def _candidates(self, tag: BatchTag, claimed: set[str]) -> list[RemoteBatch]:
        candidates: list[RemoteBatch] = []
        async for batch in self.client.messages.batches.list(limit=100):
            remote = remote_from(batch)
            if remote.created_at is not None and remote.created_at < tag.created_at - RECONCILE_SKEW_S:
                break  # newest first: the rest are older than the intent
            if remote.remote_id not in claimed and remote.requests == tag.requests:
                candidates.append(remote)
        return candidates

    async def poll(self, remote_id: str) -> RemoteBatch:
        return remote_from(
            await self._call("anthropic.batches.retrieve", lambda: self.client.messages.batches.retrieve(remote_id))
        )

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        data = await self._call("anthropic.batches.results", lambda: self._read_results(remote.remote_id))
        for raw in data.splitlines():
            if raw.strip():
                line = result_line(raw, "custom_id")
                yield line if isinstance(line, RowResult) else parse_line(line)

    async def _read_results(self, remote_id: str) -> bytes:
        """All of a batch's results, as sent (the SDK's decoder would fail the whole batch on one
        line that is not JSON): a download cut off half way is read again as a whole."""
        decoder = await self.client.messages.batches.results(remote_id)
        try:
            return b"".join([chunk async for chunk in decoder.http_response.aiter_bytes()])
        finally:
            await decoder.close()

    async def cancel(self, remote_id: str) -> RemoteBatch:
        return remote_from(
            await self._call("anthropic.batches.cancel", lambda: self.client.messages.batches.cancel(remote_id))
        )

    async def delete_file(self, name: str) -> None:
        """Message Batches have no files (results stay 29 days, then go)."""

    async def aclose(self) -> None:
        await self.client.close()


def create(config: ProviderConfig, info: Any) -> AnthropicBatchProvider:
    # the same client settings (key, base URL, no retries), on the SDK: batches are its calls
    realtime = create_realtime(replace(config, options={**config.options, "transport": "sdk"}), info)
    return AnthropicBatchProvider(
        realtime.client, strict=realtime.strict, option=realtime.option, secret=realtime._secret
    )
