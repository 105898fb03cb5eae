"""Gemini batch prediction on Vertex AI, Cloud Storage's JSON API and an OAuth token endpoint, as
google-genai (Vertex path), google-cloud-storage and google-auth send them, on one fake port.

Vertex (``GOOGLE_VERTEX_BASE_URL=<fake>``; fault endpoints ``vertex.batches.*``):
``POST /<version>/projects/<p>/locations/<l>/batchPredictionJobs`` (input: one JSONL object whose
lines are exactly ``{"request": GenerateContentRequest}``; rows keyed by the request's
``labels.batchor_key``), ``GET`` of that collection (``filter=display_name="..."``, newest first,
``pageSize``/``pageToken``), ``GET .../batchPredictionJobs/<id>`` and ``POST ...:cancel``. A job ends
as ``batch_core`` decides; then ``<outputUriPrefix>/prediction-model-<time>/predictions.jsonl``
holds a line per row that ran: ``{"status": "", "processed_time", "request", "response"}``, or a
non-empty ``status`` (the error) and no response. Calls need a bearer token (401 otherwise).

Cloud Storage (``STORAGE_EMULATOR_HOST=<fake>``; ``gcs.objects.*``): multipart upload, media
download, list by prefix and delete; objects are the batch world's files as ``gs://<bucket>/<name>``.
Sign-in is Compute Engine's metadata server (``GCE_METADATA_HOST``/``GCE_METADATA_IP``): the ping
at ``/``, the project id and the default service account's token.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import unquote

from . import gemini_batch_routes, gemini_routes
from .batch_core import PROVIDERS, Job, Row, broken, cancel, create_refusal, new_id, read, world
from .core import Provider
from .wire import Request, Response, json_response

KEY_LABEL = "batchor_key"
PROVIDERS["vertex"] = gemini_routes.PROVIDER  # Vertex AI answers errors as google.rpc.Status, as Gemini
PROVIDERS["gcs"] = Provider(
    name="gcs",
    routes=(),
    error_body=lambda status, message, call, retry_after_s: {
        "error": {"code": status, "message": message, "errors": [{"message": message, "reason": "backendError"}]}
    },
    quota_error=lambda variant: (
        429,
        {"error": {"code": 429, "message": "The rate of change requests to the object is too high."}},
    ),
    limit_headers=lambda snap: {},
    request_id_header="x-guploader-uploadid",
)
_JOBS = r"/(?P<version>v1|v1beta1)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/batchPredictionJobs"
_STATE = {
    "running": "JOB_STATE_RUNNING",
    "cancelling": "JOB_STATE_CANCELLING",
    "expired": "JOB_STATE_EXPIRED",
    "failed": "JOB_STATE_FAILED",
    "cancelled": "JOB_STATE_CANCELLED",
}
TOKEN = "ya29.vertex-test-token"


def register(app: Any) -> None:
    fake = app.fake
    jobs, objects = _Jobs(fake), _Objects(fake)
    app.add("GET", "/", _metadata)
    app.add("GET", r"/computeMetadata/v1/(?P<what>.+)", _metadata)
    app.add("POST", _JOBS, _authorised(jobs.create), "vertex.batches.create")
    app.add("GET", _JOBS, _authorised(jobs.listing), "vertex.batches.list")
    app.add("GET", _JOBS + r"/(?P<id>[^/:]+)", _authorised(jobs.get), "vertex.batches.get")
    app.add("POST", _JOBS + r"/(?P<id>[^/:]+):cancel", _authorised(jobs.cancel), "vertex.batches.cancel")
    app.add("POST", r"/upload/storage/v1/b/(?P<bucket>[^/]+)/o", objects.insert, "gcs.objects.insert")
    app.add("GET", r"/download/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<name>.+)", objects.get, "gcs.objects.get")
    app.add("GET", r"/storage/v1/b/(?P<bucket>[^/]+)/o", objects.listing, "gcs.objects.list")
    app.add("DELETE", r"/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<name>.+)", objects.delete, "gcs.objects.delete")


async def _metadata(request: Request, params: dict[str, str]) -> Response:
    """Compute Engine's metadata server: what google-auth asks it (others: 404)."""
    flavor = {"Metadata-Flavor": "Google"}
    what = params.get("what", "")
    if request.headers.get("metadata-flavor") != "Google":
        return Response(403, b"Missing Metadata-Flavor header", flavor, "text/plain")
    if what.endswith("/token"):
        return json_response(200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}, flavor)
    if what == "project/project-id":
        return Response(200, b"batchor-test", flavor, "text/plain")
    if what.rstrip("/") == "instance/service-accounts/default":
        account = {"email": "batchor@batchor-test.iam.gserviceaccount.com", "aliases": ["default"]}
        return json_response(200, {**account, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}, flavor)
    return Response(200 if not what else 404, b"", flavor, "text/plain")


def _authorised(handler: Any) -> Any:
    async def checked(request: Request, params: dict[str, str]) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return _error(401, "Request had invalid authentication credentials.")
        return await handler(request, params)

    return checked


class _Objects:
    def __init__(self, fake: Any) -> None:
        self.fake = fake

    async def insert(self, request: Request, params: dict[str, str]) -> Response:
        if request.query.get("uploadType") != "multipart":
            return _gcs_error(400, "this fake takes multipart uploads only")
        head = f"Content-Type: {request.headers.get('content-type')}\r\n\r\n".encode()
        parts = list(BytesParser(policy=HTTP).parsebytes(head + request.body).iter_parts())
        meta = json.loads(parts[0].get_payload(decode=True))
        data = parts[1].get_payload(decode=True)
        name = str(meta.get("name") or request.query.get("name"))
        world(self.fake).files[f"gs://{params['bucket']}/{name}"] = {"data": data}
        return json_response(200, _resource(params["bucket"], name, data))

    async def get(self, request: Request, params: dict[str, str]) -> Response:
        found = world(self.fake).files.get(_uri(params))
        if found is None:
            return _gcs_error(404, f"No such object: {params['bucket']}/{unquote(params['name'])}")
        return Response(200, found["data"], content_type="application/octet-stream")

    async def listing(self, request: Request, params: dict[str, str]) -> Response:
        prefix = f"gs://{params['bucket']}/{request.query.get('prefix', '')}"
        names = sorted(uri for uri in world(self.fake).files if uri.startswith(prefix))
        items = [
            _resource(params["bucket"], uri.split("/", 3)[3], world(self.fake).files[uri]["data"]) for uri in names
        ]
        return json_response(200, {"kind": "storage#objects", "items": items})

    async def delete(self, request: Request, params: dict[str, str]) -> Response:
        if world(self.fake).files.pop(_uri(params), None) is None:
            return _gcs_error(404, f"No such object: {params['bucket']}/{unquote(params['name'])}")
        return Response(204)


def _uri(params: dict[str, str]) -> str:
    return f"gs://{params['bucket']}/{unquote(params['name'])}"


def _resource(bucket: str, name: str, data: bytes) -> dict[str, Any]:
    return {"kind": "storage#object", "bucket": bucket, "name": name, "generation": "1", "size": str(len(data))}


class _Jobs:
    def __init__(self, fake: Any) -> None:
        self.fake = fake

    async def create(self, request: Request, params: dict[str, str]) -> Response:
        refusal = create_refusal(self.fake, PROVIDERS["vertex"])
        if refusal is not None:
            return json_response(*refusal)
        body = request.json() or {}
        uris = ((body.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or []
        prefix = ((body.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
        if len(uris) != 1 or not prefix or not body.get("displayName"):
            return _error(400, "one gcsSource uri, a gcsDestination and a displayName are required here")
        found = world(self.fake).files.get(uris[0])
        if found is None:
            return _error(400, f"input {uris[0]} does not exist")
        try:
            rows = [_row(json.loads(raw)) for raw in found["data"].splitlines() if raw.strip()]
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"input {uris[0]}: {exc}")
        name = f"projects/{params['project']}/locations/{params['location']}/batchPredictionJobs/{new_id('')[-12:]}"
        model = str(body.get("model") or "").rsplit("/", 1)[-1]
        extra = {"route_params": {"model": model}, "request": body, "model": model}
        job = Job(name, "vertex", gemini_batch_routes.FILE_ROUTE, rows, tag=body["displayName"], extra=extra)
        await world(self.fake).create_late(self.fake, job)
        return json_response(200, self._described(job))

    def _job(self, params: dict[str, str]) -> Job | None:
        found = world(self.fake).jobs
        return next((j for j in found.values() if j.provider == "vertex" and j.id.endswith(f"/{params['id']}")), None)

    async def get(self, request: Request, params: dict[str, str]) -> Response:
        job = self._job(params)
        if job is None:
            return _error(404, f"batch prediction job {params['id']} not found")
        return json_response(200, self._described(read(self.fake, job)))

    async def cancel(self, request: Request, params: dict[str, str]) -> Response:
        job = self._job(params)
        if job is None:
            return _error(404, f"batch prediction job {params['id']} not found")
        cancel(self.fake, job)
        return json_response(200, {})

    async def listing(self, request: Request, params: dict[str, str]) -> Response:
        wanted = re.fullmatch(r'display_name="([^"]*)"', request.query.get("filter", ""))
        jobs = [j for j in world(self.fake).newest_first("vertex") if wanted is None or j.tag == wanted.group(1)]
        start, size = int(request.query.get("pageToken") or 0), int(request.query.get("pageSize") or 100)
        page: dict[str, Any] = {"batchPredictionJobs": [self._described(j) for j in jobs[start : start + size]]}
        if start + size < len(jobs):
            page["nextPageToken"] = str(start + size)
        return json_response(200, page)

    def _described(self, job: Job) -> dict[str, Any]:
        asked = job.extra["request"]
        failed = len([r for r in job.rows if r.status is not None]) - job.count(200)
        state = _STATE.get(job.state) or ("JOB_STATE_PARTIALLY_SUCCEEDED" if failed else "JOB_STATE_SUCCEEDED")
        described: dict[str, Any] = {
            "name": job.id,
            "displayName": job.tag,
            "model": asked["model"],
            "inputConfig": asked["inputConfig"],
            "outputConfig": asked["outputConfig"],
            "state": state,
            "createTime": _iso(job.created_at),
            "updateTime": _iso(time.time()),
        }
        if job.state == "failed":
            code = 3 if job.error_code == "invalid_request" else 13
            described["error"] = {"code": code, "message": f"batch failed: {job.error_code}"}
        elif job.ended:
            described["outputInfo"] = {"gcsOutputDirectory": self._write_output(job)}
            described["completionStats"] = {"successfulCount": str(job.count(200)), "failedCount": str(failed)}
        return described

    def _write_output(self, job: Job) -> str:
        """The predictions file, written once when the job ends (none when no row ran)."""
        if "output" in job.extra:
            return str(job.extra["output"])
        prefix = job.extra["request"]["outputConfig"]["gcsDestination"]["outputUriPrefix"].rstrip("/")
        folder = job.extra["output"] = f"{prefix}/prediction-model-{datetime.now(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"
        lines = [json.dumps(_line(row)) for row in job.rows if row.status is not None]
        if lines:
            world(self.fake).files[f"{folder}/predictions.jsonl"] = {
                "data": "\n".join(broken(self.fake, lines)).encode()
            }
        return folder


def _row(line: dict[str, Any]) -> Row:
    """A line of the input: exactly a request (anything else beside it is refused)."""
    if set(line) != {"request"}:
        raise ValueError(f"unknown fields {sorted(set(line) - {'request'})} beside request")
    request = line["request"]
    return Row(str(request["labels"][KEY_LABEL]), request)


def _line(row: Row) -> dict[str, Any]:
    line: dict[str, Any] = {"status": "", "processed_time": _iso(time.time()), "request": row.body}
    if row.status == 200:
        line["response"] = row.payload
    else:
        error = (row.payload or {}).get("error") or {"code": row.status, "message": "failed"}
        line["status"] = f"Bad Request: {json.dumps({'error': error})}"
    return line


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(status: int, message: str) -> Response:
    return json_response(status, PROVIDERS["vertex"].error_body(status, message, None, 0.0))


def _gcs_error(status: int, message: str) -> Response:
    return json_response(status, PROVIDERS["gcs"].error_body(status, message, None, 0.0))
