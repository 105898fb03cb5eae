"""Amazon Bedrock batch inference as boto3's `bedrock` and `s3` clients send it, on one fake port.

S3 is path-style under ``/s3`` (``AWS_ENDPOINT_URL_S3=<fake>/s3``; fault endpoints ``s3.objects.*``):
PUT, GET and DELETE of ``/s3/<bucket>/<key>``, objects kept in the batch world's files as
``s3://<bucket>/<key>`` (so a left-behind file shows in stats). The control plane:
``POST /model-invocation-job`` (the input object must exist; its lines ``{"recordId",
"modelInput"}`` are Converse requests), ``GET /model-invocation-job/<arn>``,
``GET /model-invocation-jobs`` (``nameContains``, ``submitTimeAfter``, newest first,
``maxResults``/``nextToken``) and ``POST .../stop``. A job ends as ``batch_core`` decides; then
``<output>/<job id>/<input name>.out`` holds a line per record that ran (``modelOutput``: a
Converse answer, or ``error``: ``{errorCode, errorMessage}``) and ``manifest.json.out`` its
counts. Every call must be SigV4-signed for its service (403 otherwise).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from . import bedrock_routes
from .batch_core import PROVIDERS, Job, Row, broken, cancel, create_refusal, new_id, read, world
from .core import Provider
from .wire import Request, Response, json_response

PROVIDER = bedrock_routes.PROVIDER
PROVIDERS["bedrock"] = PROVIDER
# S3's errors for the fault plan's `s3.*` endpoints: it has no quota error, its nearest is SlowDown (503).
PROVIDERS["s3"] = Provider(
    name="s3",
    routes=(),
    error_body=lambda status, message, call, retry_after_s: {"Code": str(status), "Message": message},
    quota_error=lambda variant: (503, {"Code": "SlowDown", "Message": "Please reduce your request rate."}),
    limit_headers=lambda snap: {},
    request_id_header="x-amz-request-id",
)
ROUTE = PROVIDER.routes[0]
ARN = "arn:aws:bedrock:{region}:123456789012:model-invocation-job/{id}"
_STATUS = {
    "running": "InProgress",
    "cancelling": "Stopping",
    "expired": "Expired",
    "failed": "Failed",
    "cancelled": "Stopped",
}


def register(app: Any) -> None:
    fake = app.fake
    objects = _S3(fake)
    for method, name, handler in (
        ("PUT", "s3.objects.put", objects.put),
        ("GET", "s3.objects.get", objects.get),
        ("DELETE", "s3.objects.delete", objects.delete),
    ):
        app.add(method, r"/s3/(?P<bucket>[^/]+)/(?P<key>.+)", _signed("s3", handler), name)
    jobs = _Jobs(fake)
    app.add("POST", "/model-invocation-job", _signed("bedrock", jobs.create), "bedrock.batches.create")
    app.add("GET", "/model-invocation-jobs", _signed("bedrock", jobs.listing), "bedrock.batches.list")
    app.add("POST", r"/model-invocation-job/(?P<id>.+)/stop", _signed("bedrock", jobs.stop), "bedrock.batches.cancel")
    app.add("GET", r"/model-invocation-job/(?P<id>.+)", _signed("bedrock", jobs.get), "bedrock.batches.retrieve")


def _signed(service: str, handler: Any) -> Any:
    async def checked(request: Request, params: dict[str, str]) -> Response | None:
        if bedrock_routes.signer(request, service) is None:
            return bedrock_routes.unsigned()
        return await handler(request, params)

    return checked


class _S3:
    def __init__(self, fake: Any) -> None:
        self.fake = fake

    def _uri(self, params: dict[str, str]) -> str:
        return f"s3://{params['bucket']}/{unquote(params['key'])}"

    async def put(self, request: Request, params: dict[str, str]) -> Response:
        world(self.fake).files[self._uri(params)] = {"data": _decoded(request)}
        return Response(200, b"", {"ETag": f'"{new_id("")}"'})

    async def get(self, request: Request, params: dict[str, str]) -> Response:
        found = world(self.fake).files.get(self._uri(params))
        if found is None:
            body = b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"
            return Response(404, body, content_type="application/xml")
        return Response(200, found["data"], content_type="application/octet-stream")

    async def delete(self, request: Request, params: dict[str, str]) -> Response:
        world(self.fake).files.pop(self._uri(params), None)
        return Response(204)


def _decoded(request: Request) -> bytes:
    """The object's bytes (an `aws-chunked` body unwrapped: `<hex size>[;...]\\r\\n<data>\\r\\n`...)."""
    if "aws-chunked" not in request.headers.get("content-encoding", ""):
        return request.body
    data, rest = b"", request.body
    while rest:
        head, _, rest = rest.partition(b"\r\n")
        size = int(head.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        data, rest = data + rest[:size], rest[size + 2 :]
    return data


class _Jobs:
    def __init__(self, fake: Any) -> None:
        self.fake = fake

    async def create(self, request: Request, params: dict[str, str]) -> Response:
        refusal = create_refusal(self.fake, PROVIDER)
        if refusal is not None:
            return json_response(*refusal)
        body = request.json() or {}
        if body.get("modelInvocationType") != "Converse" or not body.get("roleArn") or not body.get("jobName"):
            return _invalid("jobName, roleArn and modelInvocationType Converse are required here")
        source = body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
        found = world(self.fake).files.get(source)
        if found is None:
            return _invalid(f"the input {source} does not exist")
        try:
            rows = [
                Row(str(line["recordId"]), line["modelInput"]) for line in map(json.loads, found["data"].splitlines())
            ]
        except (ValueError, KeyError, TypeError) as exc:
            return _invalid(f"the input {source} is not JSONL of recordId and modelInput: {exc}")
        region = bedrock_routes.signer(request, "bedrock") or "|us-east-1"
        arn = ARN.format(region=region.split("|")[1], id=new_id("")[-12:])
        extra = {"route_params": {"model": body["modelId"]}, "request": body, "arn": arn}
        job = Job(arn, "bedrock", ROUTE, rows, tag=body["jobName"], extra=extra)
        await world(self.fake).create_late(self.fake, job)
        return json_response(200, {"jobArn": arn})

    def _job(self, params: dict[str, str]) -> Job | None:
        return world(self.fake).jobs.get(unquote(params["id"]))

    async def get(self, request: Request, params: dict[str, str]) -> Response:
        job = self._job(params)
        if job is None:
            return _missing(params["id"])
        return json_response(200, self._described(read(self.fake, job)))

    async def stop(self, request: Request, params: dict[str, str]) -> Response:
        job = self._job(params)
        if job is None:
            return _missing(params["id"])
        cancel(self.fake, job)
        return json_response(200, {})

    async def listing(self, request: Request, params: dict[str, str]) -> Response:
        name = request.query.get("nameContains", "")
        after = request.query.get("submitTimeAfter")
        since = datetime.fromisoformat(after.replace("Z", "+00:00")).timestamp() if after else 0.0
        jobs = [
            j
            for j in world(self.fake).newest_first("bedrock")
            if name in str(j.tag) and j.created_at >= since  # created_at: when it shows in listings
        ]
        start, size = int(request.query.get("nextToken") or 0), int(request.query.get("maxResults") or 100)
        page: dict[str, Any] = {"invocationJobSummaries": [self._described(j) for j in jobs[start : start + size]]}
        if start + size < len(jobs):
            page["nextToken"] = str(start + size)
        return json_response(200, page)

    def _described(self, job: Job) -> dict[str, Any]:
        if job.ended and not job.extra.get("written"):
            self._write_output(job)
        asked = job.extra["request"]
        done = [r for r in job.rows if r.status is not None]
        status = _STATUS.get(job.state) or ("PartiallyCompleted" if job.count(200) < len(job.rows) else "Completed")
        described = {
            "jobArn": job.id,
            "jobName": job.tag,
            "modelId": asked["modelId"],
            "roleArn": asked["roleArn"],
            "status": status,
            "submitTime": _iso(job.created_at),
            "lastModifiedTime": _iso(job.created_at),
            "inputDataConfig": asked["inputDataConfig"],
            "outputDataConfig": asked["outputDataConfig"],
            "modelInvocationType": "Converse",
            "timeoutDurationInHours": asked.get("timeoutDurationInHours", 168),
            "totalRecordCount": len(job.rows),
            "processedRecordCount": len(done),
            "successRecordCount": job.count(200),
            "errorRecordCount": len(done) - job.count(200),
        }
        if job.state == "failed":
            described["message"] = f"The job failed: {job.error_code}"
        return described

    def _write_output(self, job: Job) -> None:
        """The output file and manifest, as Bedrock writes them once a job ends (none for a failed one)."""
        job.extra["written"] = True
        if job.state == "failed":
            return
        asked = job.extra["request"]
        source = asked["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
        out = f"{asked['outputDataConfig']['s3OutputDataConfig']['s3Uri'].rstrip('/')}/{job.id.rsplit('/', 1)[-1]}"
        lines = [json.dumps(_line(row)) for row in job.rows if row.status is not None]
        files = world(self.fake).files
        if lines:
            files[f"{out}/{source.rsplit('/', 1)[-1]}.out"] = {"data": "\n".join(broken(self.fake, lines)).encode()}
        manifest = {"totalRecordCount": len(job.rows), "processedRecordCount": len(lines)}
        files[f"{out}/manifest.json.out"] = {"data": json.dumps(manifest).encode()}


def _line(row: Row) -> dict[str, Any]:
    line: dict[str, Any] = {"recordId": row.custom_id, "modelInput": row.body}
    if row.status == 200:
        line["modelOutput"] = row.payload
    else:
        payload = row.payload or {}
        line["error"] = {"errorCode": row.status, "errorMessage": str(payload.get("message") or payload)}
    return line


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _invalid(message: str) -> Response:
    return json_response(400, {"__type": "ValidationException", "message": message})


def _missing(ident: str) -> Response:
    return json_response(404, {"__type": "ResourceNotFoundException", "message": f"job {unquote(ident)} not found"})
