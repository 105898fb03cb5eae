"""OpenAI Batch API: JSONL request files, batches tagged through `metadata`, output/error files.

Lines reuse the realtime `to_body`/`parse_result` (chat or responses). The client never retries
by itself (`max_retries=0`): an automatic retry of `batches.create` after a timeout can create the
same batch twice, so an uncertain create surfaces as `BatchCreateUnknownError` and the engine
reconciles through `find` (the local batch id is in the batch's metadata). Every call goes through
`self.calls` under its endpoint name (the engine's runner retries it, providers/batch.py).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from batchor.errors import (
    BatchCreateUnknownError,
    InvalidRequestError,
    ProviderError,
    RateLimitedError,
)
from batchor.providers import base_url
from batchor.providers.base import LLMRequest, ProviderConfig, read_api_key
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
    forget_file,
    from_start,
    mapped_call,
    result_line,
    spooled,
)
from batchor.providers.embeddings import embed_request, openai_body, openai_completion
from batchor.providers.errors_map import classify
from batchor.providers.openai.realtime import _mapped_errors, parse_result, to_body

T = TypeVar("T")
LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
TAG = "batchor_batch"
RECONCILE_SKEW_S = 600.0  # provider and local clocks may disagree by this much
_STATES = {
    "validating": RUNNING,
    "in_progress": RUNNING,
    "finalizing": RUNNING,
    "cancelling": RUNNING,
    "completed": COMPLETED,
    "failed": FAILED,
    "expired": EXPIRED,
    "cancelled": CANCELLED,
}
EMBEDDINGS = "embeddings"  # StepPlan.api of an embedding step
_ENDPOINTS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", EMBEDDINGS: "/v1/embeddings"}
_MISSING_CODES = ("batch_expired", "batch_cancelled")


def encode_line(
    request: LLMRequest, *, api: str = "chat", strict: bool = True, url: str | None = None, first_party: bool = True
) -> bytes:
    """One JSONL line of the input file: custom_id = request key, body = the realtime body (an
    embedding step's: its one text, see providers/embeddings.py); `url` the line's endpoint
    (Azure's have no /v1)."""
    url = url or _ENDPOINTS[api]
    if api == "chat" and not request.attachments:
        return _LINES.line(request, strict, url, first_party)
    body = (
        openai_body(embed_request(request), single=True)
        if api == EMBEDDINGS
        else to_body(request, api=api, strict=strict, first_party=first_party)
    )
    line = {"custom_id": request.key, "method": "POST", "url": url, "body": body}
    return (_dumps(line) + "\n").encode("utf-8")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _LineTemplates:
    """A step's chat lines differ only in their key and messages: the rest (model, params, the
    schema, often most of a line) is serialised once per step, and each line splices its key and
    messages into it. JSON of an object is the concatenation of its members' JSON, so the bytes
    are those of `json.dumps` of the whole line (tests/providers/test_openai_batch.py)."""

    _KEY, _MESSAGES = "\x00batchor-key\x00", "\x00batchor-messages\x00"

    def __init__(self) -> None:
        self._parts: dict[tuple[Any, ...], tuple[Any, Any, tuple[str, str, str]]] = {}

    def line(self, request: LLMRequest, strict: bool, url: str, first_party: bool) -> bytes:
        how = (request.cache, request.service_tier)  # sent, though not part of the key (prompt_cache_key)
        ident = (
            request.model,
            id(request.params),
            id(request.schema),
            request.schema_name,
            id(request.tools),
            request.tool_choice,
            strict,
            url,
            first_party,
            how,
        )
        found = self._parts.get(ident)
        if found is None or found[0] is not request.params or found[1] is not request.schema:
            split = self._split(request, strict, url, first_party)
            found = self._parts[ident] = (request.params, request.schema, split)
            if len(self._parts) > 64:  # plans come and go in a long-lived process
                self._parts = {ident: found}
        head, middle, tail = found[2]
        return (head + _dumps(request.key) + middle + _dumps(list(request.messages)) + tail).encode("utf-8")

    def _split(self, request: LLMRequest, strict: bool, url: str, first_party: bool) -> tuple[str, str, str]:
        marked = LLMRequest(
            self._KEY,
            request.model,
            (),
            request.params,
            request.schema,
            request.schema_name,
            tools=request.tools,
            tool_choice=request.tool_choice,
            cache=request.cache,
            service_tier=request.service_tier,
        )
        body = to_body(marked, api="chat", strict=strict, first_party=first_party)
        body["messages"] = self._MESSAGES
        text = _dumps({"custom_id": self._KEY, "method": "POST", "url": url, "body": body}) + "\n"
        head, rest = text.split(_dumps(self._KEY), 1)
        middle, tail = rest.split(_dumps(self._MESSAGES), 1)
        return head, middle, tail


_LINES = _LineTemplates()


def parse_line(line: dict[str, Any], *, api: str = "chat") -> RowResult:
    """A row of the output or error file as a completion, a classified error, or missing."""
    key = str(line.get("custom_id"))
    response = line.get("response") or None
    error = line.get("error") or None
    if response is None:
        code = str((error or {}).get("code") or "")
        message = str((error or {}).get("message") or "no response")
        if code in _MISSING_CODES:
            return RowResult(key, missing=True)
        return RowResult(key, error=classify(400, message, code))
    status = int(response.get("status_code") or 0)
    body = response.get("body") or {}
    if status != 200:
        detail = body.get("error", body) if isinstance(body, dict) else {}
        detail = detail if isinstance(detail, dict) else {}
        return RowResult(
            key, error=classify(status, str(detail.get("message") or f"HTTP {status}"), detail.get("code"))
        )
    try:
        if api == EMBEDDINGS:
            return RowResult(key, completion=openai_completion(body))
        return RowResult(key, completion=parse_result(body, api=api))
    except ProviderError as exc:
        return RowResult(key, error=exc)


def remote_from(batch: Any) -> RemoteBatch:
    """A RemoteBatch from the SDK's Batch model."""
    metadata = batch.metadata or {}
    counts = batch.request_counts
    return RemoteBatch(
        remote_id=batch.id,
        status=batch.status,
        state=_STATES.get(batch.status, RUNNING),
        tag=metadata.get(TAG),
        created_at=float(batch.created_at or 0),
        requests=counts.total if counts else None,
        done=(counts.completed or 0) + (counts.failed or 0) if counts else None,
        error=_batch_error(batch),
        handle=(batch.output_file_id, batch.error_file_id),
        files=tuple(f for f in (batch.input_file_id, batch.output_file_id, batch.error_file_id) if f),
    )


def _batch_error(batch: Any) -> ProviderError | None:
    if batch.status != "failed":
        return None
    errors = getattr(batch.errors, "data", None) or []
    if not errors:
        return InvalidRequestError("batch failed without a reason")
    first = errors[0]
    message = f"{first.message or 'batch failed'}" + (f" (line {first.line})" if first.line else "")
    if first.code == "token_limit_exceeded":  # the enqueued-token limit: wait for room, then resubmit
        return RateLimitedError(message)
    return classify(400, message, first.code)


class OpenAIBatchProvider:
    name = "openai"
    endpoints = _ENDPOINTS  # the batch's `endpoint` and each line's `url`, by api
    first_party = True  # OpenAI's own request fields (max_completion_tokens, prompt_cache_key)

    def __init__(
        self, client: Any, *, api: str, strict: bool, secret: str | None, limits: BatchLimits = LIMITS
    ) -> None:
        self.client, self.api, self.strict, self._secret = client, api, strict, secret
        self.limits = limits
        self.calls: CallRunner = call_once

    def encode(self, request: LLMRequest) -> bytes:
        return encode_line(
            request, api=self.api, strict=self.strict, url=self.endpoints[self.api], first_party=self.first_party
        )

    def _call(self, endpoint: str, fn: Callable[[], Awaitable[T]], *, creates: bool = False) -> Awaitable[T]:
        return mapped_call(self.calls, lambda: _mapped_errors(self._secret), endpoint, fn, creates=creates)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        with spooled(lines) as data:
            upload = await self._call(
                f"{self.name}.files.create",
                lambda: self.client.files.create(file=(f"{tag.batch_id}.jsonl", from_start(data)), purpose="batch"),
            )
        metadata = {
            TAG: tag.batch_id,
            "batchor_job": tag.job_id,
            "batchor_step": tag.step,
            "batchor_chunk": str(tag.chunk),
        }
        try:
            batch = await self._call(
                f"{self.name}.batches.create",
                lambda: self.client.batches.create(
                    input_file_id=upload.id,
                    endpoint=self.endpoints[self.api],
                    completion_window="24h",
                    metadata=metadata,
                ),
                creates=True,
            )
        except BatchCreateUnknownError:
            raise
        except ProviderError:  # refused: nothing refers to the uploaded file any more
            await forget_file(self, upload.id)
            raise
        return remote_from(batch)

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        return await self._call(f"{self.name}.batches.list", lambda: self._find(tag))

    async def _find(self, tag: BatchTag) -> RemoteBatch | None:
        async for batch in self.client.batches.list(limit=100):
            if batch.created_at and batch.created_at < tag.created_at - RECONCILE_SKEW_S:
                return None  # listed newest first: older batches cannot be this one
            if (batch.metadata or {}).get(TAG) == tag.batch_id:
                return remote_from(batch)
        return None

    async def poll(self, remote_id: str) -> RemoteBatch:
        return remote_from(
            await self._call(f"{self.name}.batches.retrieve", lambda: self.client.batches.retrieve(remote_id))
        )

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        for data in await self._downloads([file_id for file_id in remote.handle or () if file_id]):
            for raw in data.splitlines():
                if raw.strip():
                    line = result_line(raw, "custom_id")
                    row = line if isinstance(line, RowResult) else parse_line(line, api=self.api)
                    row.raw = raw
                    yield row

    async def _downloads(self, file_ids: list[str]) -> list[bytes]:
        """The output and error files side by side (one round trip, not two); a failure is raised
        after both ended, the first in file order, as one download after the other would."""
        found = await asyncio.gather(
            *(
                self._call(f"{self.name}.files.content", functools.partial(self._content, file_id))
                for file_id in file_ids
            ),
            return_exceptions=True,
        )
        for item in found:
            if isinstance(item, BaseException):
                raise item
        return [item for item in found if isinstance(item, bytes)]

    async def _content(self, file_id: str) -> bytes:
        content: bytes = (await self.client.files.content(file_id)).content
        return content

    async def cancel(self, remote_id: str) -> RemoteBatch:
        return remote_from(
            await self._call(f"{self.name}.batches.cancel", lambda: self.client.batches.cancel(remote_id))
        )

    async def delete_file(self, name: str) -> None:
        await self._call(f"{self.name}.files.delete", lambda: self.client.files.delete(name))

    async def aclose(self) -> None:
        await self.client.close()


def create(config: ProviderConfig, info: Any) -> OpenAIBatchProvider:
    import openai

    key_env = config.api_key_env or info.key_env
    secret = read_api_key(key_env, config.provider) if key_env else os.environ.get("OPENAI_API_KEY", "not-needed")
    # max_retries=0: the SDK would retry a timed-out batches.create and could create it twice.
    url = base_url(config.provider, config.base_url)
    client = openai.AsyncOpenAI(api_key=secret, base_url=url, max_retries=0, timeout=config.timeout_s)
    return OpenAIBatchProvider(
        client, api=config.options.get("api") or "chat", strict=bool(config.options.get("strict")), secret=secret
    )
