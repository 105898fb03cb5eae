"""Gemini batch jobs (google-genai `client.batches`): inline requests keyed by metadata, tagged by
`display_name` = the local batch id.

Requests reuse the realtime `to_body` (the SDK turns its snake_case config into the REST request,
as it does for `generate_content`); results are read back per `metadata.key` through the
realtime `parse_result`, which accepts the SDK's snake_case dumps. Chunks stay below the
inline limit (about 20 MB of requests), so no request file has to be uploaded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from batchor.errors import BatchCreateUnknownError, ProviderError, TransientProviderError
from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.batch import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    RUNNING,
    BatchLimits,
    BatchTag,
    RemoteBatch,
    RowResult,
)
from batchor.providers.gemini import _mapped_errors, error_for, parse_result, to_body
from batchor.providers.gemini import create as create_realtime

INLINE_MAX_BYTES = 19 * 1024 * 1024  # the API takes inline requests up to about 20 MB per job
LIMITS = BatchLimits(max_requests=100_000, max_bytes=INLINE_MAX_BYTES)
RECONCILE_PAGES = 20  # list pages searched for a tag (100 jobs each)
_STATES = {"SUCCEEDED": COMPLETED, "FAILED": FAILED, "CANCELLED": CANCELLED, "EXPIRED": EXPIRED}


def encode_request(request: LLMRequest) -> bytes:
    """One inline request: the realtime arguments (model, contents, config) plus metadata.key."""
    line = {**to_body(request), "metadata": {"key": request.key}}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def parse_inlined(item: dict[str, Any]) -> RowResult | None:
    """A row of `dest.inlined_responses` (SDK dump); None when it carries no key."""
    key = (item.get("metadata") or {}).get("key")
    if not key:
        return None
    error = item.get("error")
    if error:
        status = int(error.get("code") or 500)
        return RowResult(key, error=error_for(status, {"error": error}, str(error.get("message") or status)))
    try:
        return RowResult(key, completion=parse_result(item.get("response") or {}))
    except ProviderError as exc:
        return RowResult(key, error=exc)


def remote_from(job: Any) -> RemoteBatch:
    state_name = str(getattr(job.state, "value", job.state) or "")
    suffix = state_name.rsplit("_", 1)[-1]
    state = _STATES.get(suffix, RUNNING)
    error = TransientProviderError(f"Gemini batch job {job.name} failed") if state == FAILED else None
    created = job.create_time.timestamp() if job.create_time else None
    return RemoteBatch(remote_id=job.name, status=state_name, state=state, tag=job.display_name,
                       created_at=created, error=error, handle=job.dest)


class GeminiBatchProvider:
    name = "gemini"

    def __init__(self, client: Any, *, secret: str | None, limits: BatchLimits = LIMITS) -> None:
        self.client, self._secret, self.limits = client, secret, limits

    def encode(self, request: LLMRequest) -> bytes:
        return encode_request(request)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        requests = [json.loads(line) for line in lines]
        try:
            async with _mapped_errors(self._secret):
                job = await self.client.aio.batches.create(model=requests[0]["model"], src=requests,
                                                           config={"display_name": tag.batch_id})
        except TransientProviderError as exc:
            raise BatchCreateUnknownError(f"batch create for {tag.batch_id}: {exc.message}") from None
        return remote_from(job)

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        async with _mapped_errors(self._secret):
            pager = await self.client.aio.batches.list(config={"page_size": 100})
            seen = 0
            async for job in pager:
                if job.display_name == tag.batch_id:
                    return remote_from(job)
                seen += 1
                if seen >= RECONCILE_PAGES * 100:
                    break
        return None

    async def poll(self, remote_id: str) -> RemoteBatch:
        async with _mapped_errors(self._secret):
            return remote_from(await self.client.aio.batches.get(name=remote_id))

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        dest = remote.handle
        for item in getattr(dest, "inlined_responses", None) or []:
            row = parse_inlined(item.model_dump(mode="json", exclude_none=True))
            if row is not None:
                yield row

    async def cancel(self, remote_id: str) -> RemoteBatch:
        async with _mapped_errors(self._secret):
            await self.client.aio.batches.cancel(name=remote_id)
            return remote_from(await self.client.aio.batches.get(name=remote_id))

    async def aclose(self) -> None:
        await self.client.aio.aclose()
        self.client.close()


def create(config: ProviderConfig, info: Any) -> GeminiBatchProvider:
    realtime = create_realtime(config, info)  # same key, base URL and single-attempt transport
    return GeminiBatchProvider(realtime.client, secret=realtime._secret)
