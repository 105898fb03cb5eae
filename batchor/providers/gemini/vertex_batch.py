"""Gemini batch prediction on Vertex AI: google-genai's Vertex path with Cloud Storage files.

A chunk is written as one JSONL object, `<batch_gcs>/<batch id>/input.jsonl`, each line exactly
`{"request": GenerateContentRequest}` (Vertex takes nothing beside the request), so the row's key
travels as the request label `batchor_key` and comes back in the echoed request of its result
line. The job (`batchPredictionJobs`) is named after the batch id, which is how a create whose
answer was lost is found again; its results land under `<batch id>/out/`, one or more
`predictions.jsonl` files whose lines carry the request, and a `response` or a `status` error.
Both the input and the results folder are deleted after collection unless kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from batchor.errors import BatchCreateUnknownError, ProviderError, TransientProviderError
from batchor.providers.base import ProviderConfig
from batchor.providers.batch import (
    COMPLETED,
    BatchLimits,
    BatchTag,
    RemoteBatch,
    RowResult,
    crash_point,
    forget_file,
    mapped_call,
    result_line,
)
from batchor.providers.clouds import GCS_OPTION
from batchor.providers.gemini import gcs
from batchor.providers.gemini.batch import GeminiBatchProvider, job_error, parse_row, rest_request
from batchor.providers.gemini.batch import remote_from as gemini_remote
from batchor.providers.gemini.realtime import error_for

T = TypeVar("T")
KEY_LABEL = "batchor_key"
# Vertex AI takes up to 200,000 requests and a 1 GB input file per job.
LIMITS = BatchLimits(max_requests=200_000, max_bytes=950 * 1024 * 1024)
_STATUS_CODE = re.compile(r'"code"\s*:\s*(\d{3})')


def vertex_line(line: bytes) -> bytes:
    """An encoded request (the realtime arguments plus `metadata.key`) as an input line."""
    item = json.loads(line)
    request = rest_request(item)
    request["labels"] = {**(request.get("labels") or {}), KEY_LABEL: item["metadata"]["key"]}
    return json.dumps({"request": request}, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def parse_vertex_row(item: dict[str, Any]) -> RowResult | None:
    """A result line: the key from the echoed request's label; a non-empty `status` is its error."""
    key = ((item.get("request") or {}).get("labels") or {}).get(KEY_LABEL)
    if not key:
        return None
    status = item.get("status")
    if status and not item.get("response"):
        found = _STATUS_CODE.search(str(status))
        code = int(found.group(1)) if found else None
        return RowResult(str(key), error=error_for(code, {}, f"Vertex AI batch row failed: {status}"))
    return parse_row({"key": key, "response": item.get("response") or {}})


def remote_from(job: Any) -> RemoteBatch:
    """A RemoteBatch for a Vertex job: its files are the input object and the results folder."""
    remote = gemini_remote(job)
    sources = getattr(job.src, "gcs_uri", None) or []
    prefix = str(getattr(job.dest, "gcs_uri", "") or "").rstrip("/")
    output = getattr(job.output_info, "gcs_output_directory", None) if job.output_info else None
    remote.handle = output or prefix
    remote.files = (*sources, f"{prefix}/") if prefix else tuple(sources)
    if job.completion_stats is not None:
        done = [job.completion_stats.successful_count, job.completion_stats.failed_count]
        remote.done = sum(int(n or 0) for n in done)
    return remote


class VertexBatchProvider(GeminiBatchProvider):
    """The Gemini adapter's encoding, reconciliation and parsing; Vertex's files and job shape."""

    def __init__(self, client: Any, storage: gcs.Storage, *, location: str, secret: str | None) -> None:
        super().__init__(client, secret=secret, limits=LIMITS)
        self.storage, self.location = storage, location.rstrip("/")

    def _gcs(self, endpoint: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        return mapped_call(self.calls, lambda: gcs.mapped_errors(self.location), endpoint, fn)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        model = json.loads(lines[0])["model"]
        source = f"{self.location}/{tag.batch_id}/input.jsonl"
        async with self._errors():  # an invalid config fails here, as it would realtime
            data = b"".join(vertex_line(line) for line in lines)
        await self._gcs("vertex.gcs.upload", lambda: self.storage.put(source, data))
        crash_point("after_upload")
        config = {"display_name": tag.batch_id, "dest": f"{self.location}/{tag.batch_id}/out/"}
        try:
            job = await self._call(
                "vertex.batches.create",
                lambda: self.client.aio.batches.create(model=model, src=source, config=config),
                creates=True,
            )
        except BatchCreateUnknownError:
            raise
        except ProviderError:  # refused: nothing refers to the uploaded file any more
            await forget_file(self, source)
            raise
        return remote_from(job)

    def _errors(self) -> Any:
        from batchor.providers.gemini.realtime import _mapped_errors

        return _mapped_errors(self._secret, self._url)

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        async def listed() -> RemoteBatch | None:
            config = {"page_size": 100, "filter": f'display_name="{tag.batch_id}"'}
            async for job in await self.client.aio.batches.list(config=config):
                if job.display_name == tag.batch_id and job.name not in claimed:
                    return remote_from(job)
            return None

        return await self._call("vertex.batches.list", listed)

    async def poll(self, remote_id: str) -> RemoteBatch:
        job = await self._call("vertex.batches.get", lambda: self.client.aio.batches.get(name=remote_id))
        remote = remote_from(job)
        if remote.error is not None:
            status = job.error.model_dump(exclude_none=True) if job.error else None
            remote.error = job_error(remote.remote_id, status)
        return remote

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        folder = f"{str(remote.handle).rstrip('/')}/"
        names = await self._gcs("vertex.gcs.list", lambda: self.storage.names(folder))
        found = sorted(n for n in names if n.endswith(".jsonl"))
        if not found and remote.state == COMPLETED:
            raise TransientProviderError(f"Vertex AI batch job {remote.remote_id} finished without results in {folder}")
        for name in found:
            data = await self._gcs("vertex.gcs.download", lambda name=name: self.storage.get(name))  # type: ignore[misc]
            for raw in data.splitlines():
                line = result_line(raw, KEY_LABEL) if raw.strip() else None
                row = parse_vertex_row(line) if isinstance(line, dict) else line
                if row is not None:
                    row.raw = raw
                    yield row

    async def cancel(self, remote_id: str) -> RemoteBatch:
        await self._call("vertex.batches.cancel", lambda: self.client.aio.batches.cancel(name=remote_id))
        return await self.poll(remote_id)

    async def delete_file(self, name: str) -> None:
        """The input object, or every object under the results folder (a name ending in `/`)."""
        if not name.endswith("/"):
            await self._gcs("vertex.gcs.delete", lambda: self.storage.delete(name))
            return
        for found in await self._gcs("vertex.gcs.list", lambda: self.storage.names(name)):
            await self._gcs("vertex.gcs.delete", lambda found=found: self.storage.delete(found))  # type: ignore[misc]

    async def aclose(self) -> None:
        await super().aclose()
        self.storage.close()


def create(config: ProviderConfig, info: Any, realtime: Any) -> VertexBatchProvider:
    """The batch adapter on the realtime adapter's Vertex client (same project, location, sign-in)."""
    project = config.options.get("project") or getattr(realtime.client._api_client, "project", None)
    return VertexBatchProvider(
        realtime.client, gcs.storage(project), location=str(config.options[GCS_OPTION]), secret=realtime._secret
    )
