"""Gemini batch jobs wire format (Developer API): ``models/{model}:batchGenerateContent``, jobs as
long-running operations (``batches/{id}``, states ``BATCH_STATE_*``), list, and ``:cancel``.

``models/{model}:asyncBatchEmbedContent`` creates an embeddings job from such a file (lines
``{"key", "request": EmbedContentRequest}``, results ``{"key", "response": {"embedding"}}``).
A job takes inline requests keyed by ``metadata`` (results inline, each with its metadata) or an
uploaded JSONL file (``inputConfig.fileName``, lines ``{"key", "request"}``; results in a
generated ``responsesFile``, lines ``{"key", "response"}`` or ``{"key", "error"}``). File lines
must be REST JSON: an unknown request field fails the row with a 400, as the API does. The File
API speaks the resumable upload protocol (a ``start`` call answers with ``X-Goog-Upload-URL``,
then ``upload, finalize``); get, delete and ``:download?alt=media`` (generated files only).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from . import embedding_routes, gemini_routes
from .batch_core import PROVIDERS, Job, Row, broken, cancel, create_refusal, new_id, read, world
from .core import Call, Route
from .faults import with_faults
from .wire import Request, Response, json_response

PROVIDER = gemini_routes.PROVIDER
PROVIDERS["gemini"] = PROVIDER
ROUTE = PROVIDER.routes[0]
_VERSION = r"/(?P<version>v1|v1beta|v1alpha)"
_FILE_ID = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")  # files/{id}, as the File API allows
# GenerateContentRequest fields, in both spellings the API accepts (proto JSON).
_REQUEST_FIELDS = {
    "model",
    "contents",
    "systemInstruction",
    "system_instruction",
    "generationConfig",
    "generation_config",
    "safetySettings",
    "safety_settings",
    "tools",
    "toolConfig",
    "tool_config",
    "cachedContent",
    "cached_content",
    "labels",
    "serviceTier",
    "service_tier",
    "store",
}
_STATE = {
    "running": "BATCH_STATE_RUNNING",
    "cancelling": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "failed": "BATCH_STATE_FAILED",
    "cancelled": "BATCH_STATE_CANCELLED",
}


def register(app: Any) -> None:
    fake = app.fake

    async def create(request: Request, params: dict[str, str], file_route: Route | None = None) -> Response:
        refusal = create_refusal(fake, PROVIDER)
        if refusal is not None:
            return json_response(*refusal)
        batch = (request.json() or {}).get("batch") or {}
        source = batch.get("inputConfig") or {}
        extra: dict[str, Any] = {"route_params": {"model": params["model"]}, "model": params["model"]}
        file_name = source.get("fileName", source.get("file_name"))  # proto JSON takes both spellings
        if file_route is not None and file_name is None:
            return _error(400, "batch.inputConfig: an embeddings job here reads a file (fileName)")
        if file_name is not None:
            found = world(fake).files.get(str(file_name))
            if found is None:
                return _error(400, f"batch.inputConfig.fileName: file {file_name} not found")
            rows, route = _file_rows(found["data"]), file_route or FILE_ROUTE
            extra["input_file"] = file_name
        else:
            items = (source.get("requests") or {}).get("requests")
            rows, route = (
                [
                    Row(str((item.get("metadata") or {}).get("key") or i), item.get("request") or {})
                    for i, item in enumerate(items or [])
                ],
                ROUTE,
            )
            extra["metadata"] = [i.get("metadata") for i in items or []]
        if not rows:
            return _error(400, "batch.inputConfig: at least one request is required")
        job = Job(new_id("batches/"), "gemini", route, rows, tag=batch.get("displayName"), extra=extra)
        await world(fake).create_late(fake, job)
        return json_response(200, operation(fake, job))

    async def get(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(f"batches/{params['id']}")
        if job is None:
            return _error(404, f"batch job batches/{params['id']} not found")
        return json_response(200, operation(fake, read(fake, job)))

    async def cancel_job(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(f"batches/{params['id']}")
        if job is None:
            return _error(404, f"batch job batches/{params['id']} not found")
        cancel(fake, job)
        return json_response(200, {})

    async def listing(request: Request, params: dict[str, str]) -> Response:
        jobs = world(fake).newest_first("gemini")
        start = int(request.query.get("pageToken") or 0)
        size = int(request.query.get("pageSize") or 50)
        page = jobs[start : start + size]
        body: dict[str, Any] = {"operations": [operation(fake, j) for j in page]}
        if start + size < len(jobs):
            body["nextPageToken"] = str(start + size)
        return json_response(200, body)

    async def delete_job(request: Request, params: dict[str, str]) -> Response:
        if world(fake).jobs.pop(f"batches/{params['id']}", None) is None:
            return _error(404, f"batch job batches/{params['id']} not found")
        return json_response(200, {})

    openai_list = app.exact.get(("GET", "/v1/batches"))
    gemini_list = with_faults(fake, "gemini.batches.list", listing)

    async def shared_list(request: Request, params: dict[str, str]) -> Response | None:
        """GET /v1/batches is OpenAI's list too: Google's SDK is told apart by its key header."""
        if openai_list is not None and "x-goog-api-key" not in request.headers:
            return await openai_list(request, params)
        return await gemini_list(request, {"version": "v1"})

    register_files(app)

    async def create_embeddings(request: Request, params: dict[str, str]) -> Response:
        return await create(request, params, EMBED_ROUTE)

    app.add("POST", _VERSION + r"/models/(?P<model>[^/:]+):batchGenerateContent", create, "gemini.batches.create")
    app.add(
        "POST",
        _VERSION + r"/models/(?P<model>[^/:]+):asyncBatchEmbedContent",
        create_embeddings,
        "gemini.batches.create",
    )
    app.add("GET", "/v1/batches", shared_list)
    app.add("GET", _VERSION + r"/batches", gemini_list)
    app.add("GET", _VERSION + r"/batches/(?P<id>[^/:]+)", get, "gemini.batches.get")
    app.add("POST", _VERSION + r"/batches/(?P<id>[^/:]+):cancel", cancel_job, "gemini.batches.cancel")
    app.add("DELETE", _VERSION + r"/batches/(?P<id>[^/:]+)", delete_job, "gemini.batches.delete")


def operation(fake: Any, job: Job) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "model": f"models/{job.extra['model']}",
        "displayName": job.tag,
        "state": _STATE[job.state],
        "createTime": _iso(job.created_at),
        "updateTime": _iso(time.time()),
        "batchStats": {"requestCount": str(len(job.rows)), "successfulRequestCount": str(job.count(200))},
    }
    if "input_file" in job.extra:
        metadata["inputConfig"] = {"fileName": job.extra["input_file"]}
    if job.state == "failed":  # a failed operation carries a google.rpc.Status, and no output
        metadata["endTime"] = _iso(time.time())
        code = 3 if job.error_code == "invalid_request" else 13  # INVALID_ARGUMENT, else INTERNAL
        return {
            "name": job.id,
            "metadata": metadata,
            "done": True,
            "error": {"code": code, "message": f"batch failed: {job.error_code}"},
        }
    if job.ended:
        metadata["endTime"] = _iso(time.time())
        metadata["output"] = _output(fake, job)
    return {"name": job.id, "metadata": metadata, "done": job.ended}


def _output(fake: Any, job: Job) -> dict[str, Any]:
    """Rows that ran: inline (with their metadata), or in a results file written once."""
    if "input_file" in job.extra:
        if "output_file" not in job.extra:
            lines = [json.dumps({"key": row.custom_id, **_result(row)}) for row in job.rows if row.status is not None]
            job.extra["output_file"] = _store(world(fake), "\n".join(broken(fake, lines)).encode(), generated=True)
        return {"responsesFile": job.extra["output_file"]}
    responses = [
        {**_result(row), "metadata": meta}
        for row, meta in zip(job.rows, job.extra["metadata"])
        if row.status is not None
    ]
    return {"inlinedResponses": {"inlinedResponses": responses}}


def _result(row: Row) -> dict[str, Any]:
    if row.status == 200:
        return {"response": row.payload}
    return {"error": (row.payload or {}).get("error")}


def _file_rows(data: bytes) -> list[Row]:
    lines = [json.loads(raw) for raw in data.splitlines() if raw.strip()]
    return [Row(str(line.get("key") or i), line.get("request") or {}) for i, line in enumerate(lines)]


def _parse_rest(body: dict[str, Any], params: dict[str, str]) -> Call:
    """A file line's request: REST JSON only (an SDK-style `config` is an unknown field there)."""
    unknown = sorted(set(body) - _REQUEST_FIELDS)
    if unknown:
        raise ValueError(f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.')
    return ROUTE.parse(body, params)


FILE_ROUTE = replace(ROUTE, parse=_parse_rest)
EMBED_ROUTE = replace(
    ROUTE,
    endpoint="gemini.embed_content",
    parse=embedding_routes.parse_gemini_one,
    render=embedding_routes.render_gemini_one,
)  # an embeddings job's line


# --- File API --------------------------------------------------------------------------------


def register_files(app: Any) -> None:
    fake = app.fake

    async def upload(request: Request, params: dict[str, str]) -> Response:
        command = request.headers.get("x-goog-upload-command", "")
        if command == "start":
            return _start_upload(world(fake), request, params["version"])
        found = world(fake).uploads.get(request.query.get("upload_id", ""))
        if found is None:
            return _error(404, "upload session not found")
        found["data"] += request.body
        if "finalize" not in command:
            return json_response(200, {}, {"x-goog-upload-status": "active"})
        del world(fake).uploads[request.query["upload_id"]]
        world(fake).files[found["name"]] = found
        return json_response(200, {"file": _file_resource(found)}, {"x-goog-upload-status": "final"})

    async def get_file(request: Request, params: dict[str, str]) -> Response:
        found = world(fake).files.get(f"files/{params['id']}")
        if found is None:
            return _error(404, f"File files/{params['id']} not found")
        return json_response(200, _file_resource(found))

    async def delete_file(request: Request, params: dict[str, str]) -> Response:
        if world(fake).files.pop(f"files/{params['id']}", None) is None:
            return _error(404, f"File files/{params['id']} not found")
        return json_response(200, {})

    async def download(request: Request, params: dict[str, str]) -> Response:
        found = world(fake).files.get(f"files/{params['id']}")
        if found is None:
            return _error(404, f"File files/{params['id']} not found")
        if not found["generated"]:
            return _error(400, "Only generated files can be downloaded")
        return Response(200, found["data"], content_type="application/octet-stream")

    faulty_download = with_faults(fake, "gemini.files.download", download)
    app.add("POST", r"/upload" + _VERSION + r"/files", upload, "gemini.files.upload")
    app.add("GET", _VERSION + r"/files/(?P<id>[^/:]+)", get_file, "gemini.files.get")
    app.add("DELETE", _VERSION + r"/files/(?P<id>[^/:]+)", delete_file, "gemini.files.delete")
    app.add("GET", _VERSION + r"/files/(?P<id>[^/:]+):download", faulty_download)
    app.add("GET", r"/download" + _VERSION + r"/files/(?P<id>[^/:]+):download", faulty_download)


def _start_upload(found: Any, request: Request, version: str) -> Response:
    meta = (request.json() or {}).get("file") or {}
    name = str(meta.get("name") or f"files/{new_id('f')}")
    if not _FILE_ID.fullmatch(name.removeprefix("files/")):
        return _error(400, f"invalid file name {name}: lowercase letters, digits and dashes, up to 40")
    if name in found.files:
        return _error(409, f"File {name} already exists")
    upload_id = new_id("u")
    found.uploads[upload_id] = {
        "name": name,
        "data": b"",
        "generated": False,
        "created_at": time.time(),
        "display_name": _spelled(meta, "displayName", "display_name"),
        "mime_type": request.headers.get("x-goog-upload-header-content-type"),
    }
    url = f"http://{request.headers.get('host')}/upload/{version}/files?upload_id={upload_id}&upload_protocol=resumable"
    return json_response(200, {}, {"x-goog-upload-url": url, "x-goog-upload-status": "active"})


def _spelled(node: dict[str, Any], camel: str, snake: str) -> Any:
    """The API takes proto field names in either spelling (the SDK sends this body snake_case)."""
    return node.get(camel, node.get(snake))


def _store(found: Any, data: bytes, *, generated: bool) -> str:
    name = f"files/batch-{new_id('')}"
    found.files[name] = {
        "name": name,
        "data": data,
        "generated": generated,
        "created_at": time.time(),
        "display_name": name,
        "mime_type": "application/jsonl",
    }
    return name


def _file_resource(found: dict[str, Any]) -> dict[str, Any]:
    resource = {
        "name": found["name"],
        "displayName": found["display_name"],
        "mimeType": found["mime_type"],
        "sizeBytes": str(len(found["data"])),
        "createTime": _iso(found["created_at"]),
        "updateTime": _iso(found["created_at"]),
        "state": "ACTIVE",
        "source": "GENERATED" if found["generated"] else "UPLOADED",
    }
    if found["generated"]:
        resource["downloadUri"] = f"/download/v1beta/{found['name']}:download?alt=media"
    return resource


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(status: int, message: str) -> Response:
    return json_response(status, PROVIDER.error_body(status, message, None, 0.0))
