"""Gemini batch jobs (google-genai `client.batches`), tagged by `display_name` = the local batch id.

A chunk whose requests fit the inline limit (about 20 MB per create call) goes inline: one call,
results inline in the job. A larger chunk is written as a JSONL file (`{"key", "request"}` per
line, up to 2 GB), uploaded through the File API under the batch's id, and its results come back
as a file. Inline requests reuse the realtime `to_body` (the SDK turns its snake_case config into
REST); file lines must already be REST JSON, so `rest_request` converts them through the SDK's own
config type. Results, inline or from a file, go through the realtime `parse_result` (it reads the
REST camelCase of a file as well as the SDK's snake_case dumps of inline results).
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import IO, Any, TypeVar
from urllib.parse import urlencode

import pydantic
from google.genai import errors as genai_errors
from google.genai import types

from batchor.errors import ProviderError, TransientProviderError
from batchor.providers.base import CacheFeeSink, LLMRequest, ProviderConfig
from batchor.providers.batch import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    RUNNING,
    BatchLimits,
    BatchTag,
    CallRunner,
    RemoteBatch,
    RowResult,
    call_once,
    crash_point,
    mapped_call,
    result_line,
)
from batchor.providers.embeddings import gemini_completion
from batchor.providers.gemini.batch_cache import BatchCaches, marked
from batchor.providers.gemini.realtime import _base_url, _mapped_errors, error_for, parse_result, to_body
from batchor.providers.gemini.realtime import create as create_realtime

T = TypeVar("T")
INLINE_MAX_BYTES = 19 * 1024 * 1024  # the API takes inline requests up to about 20 MB per job
INLINE_OPTION = "batch_inline_max_bytes"  # model.options: a lower inline limit (larger chunks use a file)
# Input files take up to 2 GB; chunks are measured as inline requests, a little off the file's size.
FILE_MAX_BYTES = 1900 * 1024 * 1024
LIMITS = BatchLimits(max_requests=100_000, max_bytes=FILE_MAX_BYTES)
RECONCILE_PAGES = 20  # list pages searched for a tag (100 jobs each)
_STATES = {"SUCCEEDED": COMPLETED, "FAILED": FAILED, "CANCELLED": CANCELLED, "EXPIRED": EXPIRED}
# GenerateContentConfig fields that sit on the REST request itself, not in its generationConfig.
_REQUEST_FIELDS = frozenset(
    {
        "systemInstruction",
        "safetySettings",
        "tools",
        "toolConfig",
        "labels",
        "cachedContent",
        "serviceTier",
        "continuationToken",
        "store",
    }
)
_SDK_ONLY = frozenset({"httpOptions", "shouldReturnHttpResponse", "automaticFunctionCalling"})


def encode_request(request: LLMRequest) -> bytes:
    """One inline request: the realtime arguments (model, contents, config) plus metadata.key (and
    the step's explicit cache key, replaced at submit by the cache's name: batch_cache.py)."""
    return _dumps({**to_body(request), "metadata": {"key": request.key, **marked(request)}})


def rest_request(body: dict[str, Any]) -> dict[str, Any]:
    """The REST `GenerateContentRequest` for `to_body`'s arguments (a file line is sent as written).

    The SDK's config type validates the config as realtime does and names its fields in camelCase
    (schemas stay as written); request-level fields move out of `generationConfig`."""
    from google.genai import types

    config = types.GenerateContentConfig.model_validate(body.get("config") or {})
    request: dict[str, Any] = {"contents": body["contents"]}
    generation: dict[str, Any] = {}
    for name, value in config.model_dump(mode="json", by_alias=True, exclude_none=True).items():
        if name not in _SDK_ONLY:
            (request if name in _REQUEST_FIELDS else generation)[name] = value
    if isinstance(request.get("systemInstruction"), str):
        request["systemInstruction"] = {"parts": [{"text": request["systemInstruction"]}]}
    if generation:
        request["generationConfig"] = generation
    return request


def file_line(line: bytes) -> bytes:
    """An encoded inline request as a line of the JSONL input file: its key and REST request."""
    item = json.loads(line)
    return _dumps({"key": item["metadata"]["key"], "request": rest_request(item)}) + b"\n"


def embed_line(request: LLMRequest) -> bytes:
    """An embedding request as a line of the JSONL input file (REST `EmbedContentRequest`, keyed)."""
    body: dict[str, Any] = {
        "model": f"models/{request.model.removeprefix('models/')}",
        "content": {"parts": [{"text": str(request.messages[-1]["content"])}]},
    }
    if request.params.get("dimensions") is not None:
        body["outputDimensionality"] = request.params["dimensions"]
    return _dumps({"key": request.key, "request": body}) + b"\n"


def parse_row(item: dict[str, Any]) -> RowResult | None:
    """One result: an inline response (key in `metadata`) or a file line (`key`); None without a key."""
    key = item.get("key") or (item.get("metadata") or {}).get("key")
    if not key:
        return None
    error = item.get("error")
    if error:
        error = {**error, "details": [_json_object(d) for d in error.get("details") or []]}
        status = int(error.get("code") or 500)
        return RowResult(key, error=error_for(status, {"error": error}, str(error.get("message") or status)))
    try:
        response = item.get("response") or {}
        if "embedding" in response:  # an embeddings job's line: one vector, no usage
            return RowResult(key, completion=gemini_completion(response))
        return RowResult(key, completion=parse_result(response))
    except ProviderError as exc:
        return RowResult(key, error=exc)


def _details_as_text(value: Any) -> Any:
    """A copy of a job's JSON where every `details` list holds JSON text (see _get_job_leniently)."""
    if isinstance(value, list):
        return [_details_as_text(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: (
            [d if isinstance(d, str) else json.dumps(d) for d in v]
            if k == "details" and isinstance(v, list)
            else _details_as_text(v)
        )
        for k, v in value.items()
    }


def _json_object(detail: Any) -> Any:
    """A detail given back as JSON text (lenient read) becomes its object again."""
    if isinstance(detail, str) and detail.startswith("{"):
        try:
            return json.loads(detail)
        except ValueError:
            return detail
    return detail


async def _job_tagged(jobs: AsyncIterator[Any], tag: BatchTag) -> RemoteBatch | None:
    async for job in jobs:
        if job.display_name == tag.batch_id:
            return remote_from(job)
    return None


# google.rpc.Code -> the HTTP status the API answers it with (unlisted codes: 500)
_HTTP_OF_RPC = {3: 400, 4: 504, 5: 404, 7: 403, 8: 429, 9: 400, 11: 400, 12: 501, 14: 503, 16: 401}


def job_error(name: str, status: dict[str, Any] | None) -> ProviderError:
    """A failed job's error, classified like a call's: a request the API refused (INVALID_ARGUMENT,
    ...) fails its rows at once, as OpenAI's failed validation does (nothing ran, nothing billed);
    an internal error, or none given, is sent again (up to `max_attempts`)."""
    if not status:
        return TransientProviderError(f"Gemini batch job {name} failed (no reason given)")
    message = f"Gemini batch job {name} failed: {status.get('message') or status.get('code')}"
    return error_for(_HTTP_OF_RPC.get(int(status.get("code") or 13), 500), {"error": status}, message)


def remote_from(job: Any) -> RemoteBatch:
    state_name = str(getattr(job.state, "value", job.state) or "")
    suffix = state_name.rsplit("_", 1)[-1]
    state = _STATES.get(suffix, RUNNING)
    error = TransientProviderError(f"Gemini batch job {job.name} failed") if state == FAILED else None
    created = job.create_time.timestamp() if job.create_time else None
    results_file = getattr(job.dest, "file_name", None)
    # A job whose results are a file read its requests from one too: the upload named after the tag.
    files = (f"files/{job.display_name}", results_file) if results_file and job.display_name else ()
    return RemoteBatch(
        remote_id=job.name,
        status=state_name,
        state=state,
        tag=job.display_name,
        created_at=created,
        error=error,
        handle=job.dest,
        files=files,
    )


class GeminiBatchProvider:
    name = "gemini"

    def __init__(
        self,
        client: Any,
        *,
        secret: str | None,
        limits: BatchLimits = LIMITS,
        inline_max_bytes: int = INLINE_MAX_BYTES,
        embeddings: bool = False,
    ) -> None:
        self.client, self._secret, self.limits = client, secret, limits
        self.embeddings = embeddings  # an embedding step's jobs: asyncBatchEmbedContent from a JSONL file
        self.inline_max_bytes = inline_max_bytes
        self.calls: CallRunner = call_once
        self._url = _base_url(client)  # names where a connection failed
        self._caches = BatchCaches(client, self._call)

    def report_cache_fees(self, sink: CacheFeeSink) -> None:
        self._caches.sink = sink

    async def release_caches(self, job_id: str, key: str) -> None:
        """The step's batches are all collected: its context cache goes (batch_cache.py)."""
        await self._caches.release(job_id, key)

    def encode(self, request: LLMRequest) -> bytes:
        return embed_line(request) if self.embeddings else encode_request(request)

    def _call(self, endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> Awaitable[T]:
        return mapped_call(self.calls, lambda: _mapped_errors(self._secret, self._url), endpoint, fn, creates=creates)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        if self.embeddings:
            return await self._submit_embeddings(tag, lines)
        model = json.loads(lines[0])["model"]
        lines = await self._caches.apply(tag.job_id, lines)
        if sum(map(len, lines)) <= self.inline_max_bytes:
            src: Any = [json.loads(line) for line in lines]
        else:
            src = await self._upload(tag, lines)
            crash_point("after_upload")
        job = await self._call(
            "gemini.batches.create",
            lambda: self.client.aio.batches.create(model=model, src=src, config={"display_name": tag.batch_id}),
            creates=True,
        )
        return remote_from(job)

    async def _submit_embeddings(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        """An embeddings job (google-genai's experimental `batches.create_embeddings`) always reads
        a file: its inline form has no key per request, a file line does."""
        model = json.loads(lines[0])["request"]["model"]
        with tempfile.TemporaryFile() as handle:
            handle.writelines(lines)
            name = await self._call("gemini.files.upload", lambda: self._send_file(tag, handle))
        crash_point("after_upload")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "experimental": the call is pinned by the tests
            job = await self._call(
                "gemini.batches.create",
                lambda: self.client.aio.batches.create_embeddings(
                    model=model, src={"file_name": name}, config={"display_name": tag.batch_id}
                ),
                creates=True,
            )
        return remote_from(job)

    async def _upload(self, tag: BatchTag, lines: list[bytes]) -> str:
        """The chunk as a JSONL file at the File API, named after the batch; returns its name.

        An upload creates no job: when it fails, or the process dies before the create, the
        engine finds no job for the tag and sends the rows again (the file expires in 48 h)."""
        with tempfile.TemporaryFile() as handle:  # on disk: the file may be far larger than a request
            async with _mapped_errors(self._secret):  # an invalid config fails here, as it would inline
                handle.writelines(file_line(line) for line in lines)
            return await self._call("gemini.files.upload", lambda: self._send_file(tag, handle))

    async def _send_file(self, tag: BatchTag, handle: IO[bytes]) -> str:
        """One upload from the start of the file; a file of this name is this chunk, uploaded whole
        by an earlier try whose answer was lost (the File API refuses a second one: 409)."""
        handle.seek(0)
        config = {"name": tag.batch_id, "display_name": tag.batch_id, "mime_type": "jsonl"}
        try:
            uploaded = await self.client.aio.files.upload(file=handle, config=config)
        except (KeyError, ValueError) as exc:  # the SDK's checks of the resumable-upload replies
            raise TransientProviderError(f"file upload for {tag.batch_id} failed: {exc}") from None
        except genai_errors.APIError as exc:
            if exc.code == 409:
                return f"files/{tag.batch_id}"
            raise
        return str(uploaded.name)

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        return await self._call("gemini.batches.list", lambda: self._find(tag))

    async def _find(self, tag: BatchTag) -> RemoteBatch | None:
        try:
            return await _job_tagged(self._recent_jobs(), tag)
        except pydantic.ValidationError:
            return await _job_tagged(self._recent_jobs_leniently(), tag)

    async def _recent_jobs(self) -> AsyncIterator[Any]:
        pager = await self.client.aio.batches.list(config={"page_size": 100})
        seen = 0
        async for job in pager:
            yield job
            seen += 1
            if seen >= RECONCILE_PAGES * 100:
                return

    async def _recent_jobs_leniently(self) -> AsyncIterator[Any]:
        """`_recent_jobs`, each page read leniently (see _get_job_leniently)."""
        from google.genai import batches as sdk_batches

        token = None
        for _ in range(RECONCILE_PAGES):
            query = urlencode({"pageSize": 100, **({"pageToken": token} if token else {})})
            response = await self.client.aio._api_client.async_request("get", f"batches?{query}", {}, None)
            body = _details_as_text(json.loads(response.body or "{}"))
            page = types.ListBatchJobsResponse._from_response(
                response=sdk_batches._ListBatchJobsResponse_from_mldev(body), kwargs={}
            )
            for job in page.batch_jobs or []:
                yield job
            token = page.next_page_token
            if not token:
                return

    async def poll(self, remote_id: str) -> RemoteBatch:
        job = await self._call("gemini.batches.get", lambda: self._get_job(remote_id))
        remote = remote_from(job)
        if remote.state == FAILED:
            status = job.error.model_dump(exclude_none=True) if getattr(job, "error", None) else None
            if status is None and not self.client.vertexai:
                status = await self._call("gemini.batches.get", lambda: self._operation_error(remote.remote_id))
            remote.error = job_error(remote.remote_id, status)
        return remote

    async def _operation_error(self, name: str) -> dict[str, Any] | None:
        """A failed job's google.rpc.Status, read from its operation (the SDK's BatchJob keeps it on
        Vertex AI only): tells a request the API refused from an internal failure."""
        path = name if name.startswith("batches/") else f"batches/{name}"
        request = getattr(getattr(self.client.aio, "_api_client", None), "async_request", None)
        if request is None:  # an SDK without this private client: no reason, as before (sent again)
            return None
        response = await request("get", path, {}, None)
        status = (json.loads(response.body or "{}") or {}).get("error")
        return status if isinstance(status, dict) else None

    async def _get_job(self, name: str) -> Any:
        try:
            return await self.client.aio.batches.get(name=name)
        except pydantic.ValidationError:
            return await self._get_job_leniently(name)

    async def _get_job_leniently(self, name: str) -> Any:
        """The job read as the SDK reads it, but with row errors' `details` passed as JSON text.

        The SDK types them as strings while the API sends google.rpc.Status objects (RetryInfo,
        QuotaFailure, ...), so one row error with details would make the whole job unreadable.
        This uses the SDK's own request and converter (private names, hence only as a fallback).
        """
        from google.genai import batches as sdk_batches

        path = name if name.startswith("batches/") else f"batches/{name}"
        response = await self.client.aio._api_client.async_request("get", path, {}, None)
        body = _details_as_text(json.loads(response.body or "{}"))
        return types.BatchJob._from_response(response=sdk_batches._BatchJob_from_mldev(body), kwargs={})

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        dest = remote.handle
        if getattr(dest, "file_name", None):
            data = await self._call(
                "gemini.files.download", lambda: self.client.aio.files.download(file=dest.file_name)
            )
            for raw in data.splitlines():
                line = result_line(raw, "key") if raw.strip() else None
                row = parse_row(line) if isinstance(line, dict) else line
                if row is not None:
                    row.raw = raw
                    yield row
            return
        for item in getattr(dest, "inlined_responses", None) or []:
            row = parse_row(item.model_dump(mode="json", exclude_none=True))
            if row is not None:
                yield row

    async def cancel(self, remote_id: str) -> RemoteBatch:
        await self._call("gemini.batches.cancel", lambda: self.client.aio.batches.cancel(name=remote_id))
        return await self.poll(remote_id)

    async def delete_file(self, name: str) -> None:
        """Uploads and results count against the project's file storage (they expire in 48 h)."""
        await self._call("gemini.files.delete", lambda: self.client.aio.files.delete(name=name))

    async def aclose(self) -> None:
        await self.client.aio.aclose()
        self.client.close()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def create(config: ProviderConfig, info: Any) -> GeminiBatchProvider:
    # same key, base URL and single-attempt transport, on the SDK: batches and files are its calls
    realtime = create_realtime(replace(config, options={**config.options, "transport": "sdk"}), info)
    if realtime.client.vertexai:
        from batchor.providers.gemini import vertex_batch

        return vertex_batch.create(config, info, realtime)
    inline = min(int(config.options.get(INLINE_OPTION) or INLINE_MAX_BYTES), INLINE_MAX_BYTES)
    return GeminiBatchProvider(
        realtime.client,
        secret=realtime._secret,
        inline_max_bytes=inline,
        embeddings=config.options.get("api") == "embeddings",
    )
