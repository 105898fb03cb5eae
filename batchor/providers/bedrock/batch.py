"""Amazon Bedrock batch inference: a JSONL file in S3, a model invocation job, results back from S3.

A chunk's lines (`{"recordId": <request key>, "modelInput": <a Converse request>}`: the realtime
`to_body` without `modelId`) go to `<batch_s3>/<batch id>/input.jsonl`; `CreateModelInvocationJob`
(`modelInvocationType: Converse`) is named after batchor's local batch id and carries it as
`clientRequestToken`, so a create whose outcome is unknown is found again by `ListModelInvocationJobs`
(`nameContains`), never repeated. Bedrock writes `<batch_s3>/<batch id>/out/<job id>/input.jsonl.out`
(one line per record that ran: `modelOutput`, a Converse answer, or `error`) and `manifest.json.out`;
a stopped or expired job's records that never ran are absent, so they are sent again. The job needs
an IAM service role that can read and write that S3 location (`options.role_arn`): batchor does not
create one. boto3 is synchronous: each call runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from batchor.errors import BatchCreateUnknownError, InvalidRequestError, ProviderError
from batchor.providers.base import LLMRequest, ProviderConfig, answer_cut
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
from batchor.providers.bedrock.realtime import (
    _mapped_errors,
    bedrock_client,
    error_for,
    parse_result,
    shown,
    structured_mode,
    to_body,
)
from batchor.providers.clouds import ROLE_OPTION, S3_OPTION, bedrock_batch_missing

# Bedrock's default quotas: 50,000 records and 1 GB per input file (a job also needs at least 100 records).
LIMITS = BatchLimits(max_requests=50_000, max_bytes=1_000_000_000)
RECONCILE_SKEW_S = 600.0  # provider and local clocks may disagree by this much
TIMEOUT_HOURS = 24  # the shortest job timeout Bedrock takes: results within the engine's batch window
_STATES = {
    "Submitted": RUNNING,
    "Validating": RUNNING,
    "Scheduled": RUNNING,
    "InProgress": RUNNING,
    "Stopping": RUNNING,
    "Completed": COMPLETED,
    "PartiallyCompleted": COMPLETED,  # some records failed: their lines carry the error
    "Failed": FAILED,
    "Stopped": CANCELLED,
    "Expired": EXPIRED,
}
_RECORD = re.compile(rb'\{"recordId":("(?:[^"\\]|\\.)*")')
_NAME = re.compile(r"[^a-zA-Z0-9+.-]")


def job_name(batch_id: str) -> str:
    """The job's name: the local batch id, as Bedrock's name pattern allows (63 characters)."""
    return _NAME.sub("-", batch_id).strip("-")[:63] or "batchor"


def encode_line(request: LLMRequest, structured: str) -> bytes:
    """One input line: the request key as `recordId`, the Converse request (bytes as base64)."""
    body = shown(to_body(request, structured=structured))
    body.pop("modelId", None)  # the job names the model
    line = {"recordId": request.key, "modelInput": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def parse_line(line: dict[str, Any]) -> RowResult:
    """A line of the `.jsonl.out` file as a completion or a classified error."""
    key = str(line.get("recordId"))
    output = line.get("modelOutput")
    if isinstance(output, dict):
        try:
            return RowResult(key, completion=parse_result(output))
        except ProviderError as exc:
            return RowResult(key, error=exc)
    found = line.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    code = str(error.get("errorCode") or "")
    status = int(code) if code.isdigit() else None
    return RowResult(key, error=error_for(status, code, str(error.get("errorMessage") or "no model output")))


def remote_from(job: dict[str, Any]) -> RemoteBatch:
    """A RemoteBatch from a job as GetModelInvocationJob or a listing's summary describes it."""
    arn = str(job["jobArn"])
    source = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
    out = f"{job['outputDataConfig']['s3OutputDataConfig']['s3Uri'].rstrip('/')}/{arn.rsplit('/', 1)[-1]}"
    output = f"{out}/{source.rsplit('/', 1)[-1]}.out"
    submitted = job.get("submitTime")
    status = str(job.get("status") or "Submitted")
    return RemoteBatch(
        remote_id=arn,
        status=status,
        state=_STATES.get(status, RUNNING),
        tag=job.get("jobName"),
        created_at=submitted.timestamp() if isinstance(submitted, datetime) else None,
        requests=job.get("totalRecordCount"),
        done=job.get("processedRecordCount"),
        error=error_for(None, "", str(job.get("message") or "the job failed")) if status == "Failed" else None,
        handle=output,
        files=(source, output, f"{out}/manifest.json.out"),
    )


def whole(endpoint: str, answer: Any, expect: str) -> Any:
    """`answer`, unless it is what botocore makes of a body cut short: for a 200 whose JSON does not
    parse it returns `{"message": <the text>}` (or `{}` for no body) instead of raising, so a create
    cut mid-answer looked like a job without an ARN. Such an answer is a cut one (the call ran)."""
    if not isinstance(answer, dict):
        return answer
    fields = set(answer) - {"ResponseMetadata"}
    if fields == {"message"} or (expect and expect not in answer):
        raise answer_cut(f"{endpoint}: the answer was cut short ({len(str(answer.get('message', '')))} characters)")
    return answer


def split_s3(uri: str) -> tuple[str, str]:
    parts = urlsplit(uri)
    return parts.netloc, parts.path.lstrip("/")


class BedrockBatchProvider:
    name = "bedrock"

    def __init__(
        self,
        control: Any,
        s3: Any,
        *,
        location: str,
        role: str,
        secrets: tuple[str, ...],
        option: str | None = None,
        strict: bool = True,
    ) -> None:
        self.control, self.s3, self.location, self.role = control, s3, location.rstrip("/"), role
        self.option, self.strict, self._secrets = option, strict, secrets
        self._url = str(control.meta.endpoint_url) if control is not None else ""
        self.limits = LIMITS
        self.calls: CallRunner = call_once
        self._models: dict[str, str] = {}  # request key -> model, from encode until its chunk is submitted

    def encode(self, request: LLMRequest) -> bytes:
        self._models[request.key] = request.model
        return encode_line(request, structured_mode(request.model, strict=self.strict, option=self.option))

    def _call(
        self, endpoint: str, fn: Callable[..., Any], *, creates: bool = False, expect: str = "", **kwargs: Any
    ) -> Awaitable[Any]:
        async def threaded() -> Any:
            return whole(endpoint, await asyncio.to_thread(functools.partial(fn, **kwargs)), expect)

        errors = functools.partial(_mapped_errors, self._secrets, self._url)
        return mapped_call(self.calls, errors, endpoint, threaded, creates=creates)

    async def submit(self, tag: BatchTag, lines: list[bytes]) -> RemoteBatch:
        model = self._chunk_model(lines)
        source = f"{self.location}/{tag.batch_id}/input.jsonl"
        bucket, key = split_s3(source)
        with spooled(lines) as body:
            await self._call(
                "bedrock.s3.put_object", lambda: self.s3.put_object(Bucket=bucket, Key=key, Body=from_start(body))
            )
        job = {
            "jobName": job_name(tag.batch_id),
            "clientRequestToken": job_name(tag.batch_id),  # Bedrock's own guard against a repeated create
            "roleArn": self.role,
            "modelId": model,
            "modelInvocationType": "Converse",
            "timeoutDurationInHours": TIMEOUT_HOURS,
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": source, "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"{self.location}/{tag.batch_id}/out/"}},
            "tags": [{"key": "batchor_job", "value": tag.job_id}, {"key": "batchor_step", "value": tag.step[:256]}],
        }
        try:
            created = await self._call(
                "bedrock.create_model_invocation_job",
                self.control.create_model_invocation_job,
                creates=True,
                expect="jobArn",
                **job,
            )
        except BatchCreateUnknownError:
            raise
        except ProviderError:  # refused: nothing refers to the uploaded file any more
            await forget_file(self, source)
            raise
        described = {**job, "jobArn": created["jobArn"], "status": "Submitted", "totalRecordCount": len(lines)}
        return remote_from({**described, "submitTime": datetime.now(UTC)})

    def _chunk_model(self, lines: list[bytes]) -> str:
        """The model of a chunk's requests (one step: one model), forgetting the chunk's keys."""
        models = set()
        for line in lines:
            found = _RECORD.match(line)
            if found is not None:
                models.add(self._models.pop(json.loads(found.group(1)), ""))
        models.discard("")
        if len(models) != 1:
            raise InvalidRequestError(f"a Bedrock batch job runs one model, not {sorted(models) or 'none'}")
        return models.pop()

    async def find(self, tag: BatchTag, claimed: set[str]) -> RemoteBatch | None:
        name = job_name(tag.batch_id)
        after = datetime.fromtimestamp(tag.created_at - RECONCILE_SKEW_S, UTC)
        token: str | None = None
        while True:
            more: dict[str, Any] = {"nextToken": token} if token else {}
            page = await self._call(
                "bedrock.list_model_invocation_jobs",
                self.control.list_model_invocation_jobs,
                nameContains=name,
                submitTimeAfter=after,
                sortBy="CreationTime",
                sortOrder="Descending",
                maxResults=100,
                **more,
            )
            for job in page.get("invocationJobSummaries") or []:
                if job.get("jobName") == name and job.get("jobArn") not in claimed:
                    return remote_from(job)
            token = page.get("nextToken")
            if not token:
                return None

    async def poll(self, remote_id: str) -> RemoteBatch:
        job = await self._call(
            "bedrock.get_model_invocation_job",
            self.control.get_model_invocation_job,
            expect="jobArn",
            jobIdentifier=remote_id,
        )
        return remote_from(job)

    async def results(self, remote: RemoteBatch) -> AsyncIterator[RowResult]:
        bucket, key = split_s3(str(remote.handle))
        try:
            data: bytes = await self._call("bedrock.s3.get_object", self._download, Bucket=bucket, Key=key)
        except ProviderError as exc:
            if exc.status == 404 and remote.state != COMPLETED:
                return  # stopped or expired before any record ran: no output file
            raise
        for raw in data.splitlines():
            if raw.strip():
                line = result_line(raw, "recordId")
                row = line if isinstance(line, RowResult) else parse_line(line)
                row.raw = raw
                yield row

    def _download(self, **where: str) -> bytes:
        data: bytes = self.s3.get_object(**where)["Body"].read()
        return data

    async def cancel(self, remote_id: str) -> RemoteBatch:
        await self._call(
            "bedrock.stop_model_invocation_job", self.control.stop_model_invocation_job, jobIdentifier=remote_id
        )
        return await self.poll(remote_id)

    async def delete_file(self, name: str) -> None:
        bucket, key = split_s3(name)
        await self._call("bedrock.s3.delete_object", self.s3.delete_object, Bucket=bucket, Key=key)

    async def aclose(self) -> None:
        self.control.close()
        self.s3.close()


def create(config: ProviderConfig, info: Any) -> BedrockBatchProvider:
    missing = bedrock_batch_missing(config.options)
    if missing is not None:
        raise InvalidRequestError(missing, status=None)
    control, secrets = bedrock_client(config, "bedrock")
    s3, _ = bedrock_client(config, "s3")
    return BedrockBatchProvider(
        control,
        s3,
        location=str(config.options[S3_OPTION]),
        role=str(config.options[ROLE_OPTION]),
        secrets=secrets,
        option=config.options.get("structured"),
        strict=bool(config.options.get("strict", True)),
    )
