"""OpenAI Batch API wire format: files (multipart upload, content download) and batches.

Input lines are ``{"custom_id", "method", "url", "body"}``; a finished batch has an output file
(200 rows) and an error file (other statuses, and rows an expiry or cancel left unrun, with
``batch_expired`` / ``batch_cancelled``), lines in no particular order, like the real API.
"""

from __future__ import annotations

import json
import time
from typing import Any

from . import openai_routes
from .batch_core import PROVIDERS, Job, Row, broken, cancel, create_refusal, new_id, read, world
from .wire import Request, Response, json_response, parse_multipart

PROVIDER = openai_routes.PROVIDER
PROVIDERS["openai"] = PROVIDER
_ROUTES = {route.pattern.replace("\\", ""): route for route in PROVIDER.routes}  # "/v1/chat/completions"
_STATUS = {
    "running": "in_progress",
    "cancelling": "cancelling",
    "completed": "completed",
    "expired": "expired",
    "failed": "failed",
    "cancelled": "cancelled",
}


def register(
    app: Any, *, prefix: str = "/v1", name: str = "openai", line_prefix: str = "/v1", guard: Any = None
) -> None:
    """The routes under `prefix` (Azure's: /openai), their fault names under `name`; batch lines
    and the batch's `endpoint` start with `line_prefix` (Azure's: none); `guard(handler)` wraps
    each route (Azure's checks the api-version)."""
    fake = app.fake

    async def upload(request: Request, params: dict[str, str]) -> Response:
        parts = parse_multipart(request.body, request.headers.get("content-type", ""))
        if "file" not in parts or "purpose" not in parts:
            return _error(400, "file and purpose are required")
        file_id = new_id("file-")
        data = parts["file"].data
        world(fake).files[file_id] = {
            "data": data,
            "filename": parts["file"].filename or "upload.jsonl",
            "purpose": parts["purpose"].data.decode(),
            "created_at": int(time.time()),
        }
        return json_response(200, _file_object(file_id, world(fake).files[file_id]))

    async def file_content(request: Request, params: dict[str, str]) -> Response:
        found = world(fake).files.get(params["id"])
        if found is None:
            return _error(404, f"No such File object: {params['id']}")
        return Response(200, found["data"], content_type="application/octet-stream")

    async def create(request: Request, params: dict[str, str]) -> Response:
        body = request.json() or {}
        refusal = create_refusal(fake, PROVIDER)
        if refusal is not None:
            return json_response(*refusal)
        found = world(fake).files.get(str(body.get("input_file_id")))
        if found is None:
            return _error(400, f"input file {body.get('input_file_id')} not found")
        endpoint = str(body.get("endpoint"))
        rows, problem = _rows(found["data"], endpoint, line_prefix)
        if problem:
            return _error(400, problem)
        job = Job(
            new_id("batch_"),
            "openai",
            _ROUTES["/v1" + endpoint.removeprefix(line_prefix)],
            rows,
            tag=(body.get("metadata") or {}).get("batchor_batch"),
            extra={
                "metadata": body.get("metadata"),
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
            },
        )
        await world(fake).create_late(fake, job)  # the client may give up before it hears so
        return json_response(200, batch_object(fake, job))

    async def retrieve(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(params["id"])
        if job is None:
            return _error(404, f"No batch found with id '{params['id']}'.")
        return json_response(200, batch_object(fake, read(fake, job)))

    async def cancel_job(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(params["id"])
        if job is None:
            return _error(404, f"No batch found with id '{params['id']}'.")
        return json_response(200, batch_object(fake, cancel(fake, job)))

    async def listing(request: Request, params: dict[str, str]) -> Response:
        jobs = world(fake).newest_first("openai")
        after = request.query.get("after")
        if after:
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = int(request.query.get("limit", 20))
        page = jobs[:limit]
        data = [batch_object(fake, j) for j in page]
        return json_response(
            200,
            {
                "object": "list",
                "data": data,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(jobs) > limit,
            },
        )

    async def delete_file(request: Request, params: dict[str, str]) -> Response:
        if world(fake).files.pop(params["id"], None) is None:
            return _error(404, f"No such File object: {params['id']}")
        return json_response(200, {"id": params["id"], "object": "file", "deleted": True})

    guard = guard or (lambda handler: handler)
    app.add("POST", f"{prefix}/files", guard(upload), f"{name}.files.create")
    app.add("GET", rf"{prefix}/files/(?P<id>[^/]+)/content", guard(file_content), f"{name}.files.content")
    # ids start with file-: Gemini files (API version v1) live under /v1/files/<name> too
    app.add("DELETE", rf"{prefix}/files/(?P<id>file-[^/]+)", guard(delete_file), f"{name}.files.delete")
    app.add("POST", f"{prefix}/batches", guard(create), f"{name}.batches.create")
    app.add("GET", f"{prefix}/batches", guard(listing), f"{name}.batches.list")
    # ids start with batch_: Gemini's jobs (API version v1) live under /v1/batches/<digits> too
    app.add("GET", rf"{prefix}/batches/(?P<id>batch_[^/]+)", guard(retrieve), f"{name}.batches.retrieve")
    app.add("POST", rf"{prefix}/batches/(?P<id>batch_[^/]+)/cancel", guard(cancel_job), f"{name}.batches.cancel")


def _rows(data: bytes, endpoint: str, line_prefix: str = "/v1") -> tuple[list[Row], str | None]:
    if not endpoint.startswith(line_prefix) or "/v1" + endpoint.removeprefix(line_prefix) not in _ROUTES:
        return [], f"endpoint {endpoint} is not supported by the fake"
    rows, seen = [], set()
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            return [], f"line {number}: not JSON"
        custom_id = line.get("custom_id")
        if not custom_id or line.get("method") != "POST" or line.get("url") != endpoint:
            return [], f"line {number}: needs custom_id, method POST and url {endpoint}"
        if custom_id in seen:
            return [], f"line {number}: duplicate custom_id {custom_id}"
        seen.add(custom_id)
        rows.append(Row(custom_id, line.get("body") or {}))
    return rows, None if rows else "the input file has no requests"


def batch_object(fake: Any, job: Job) -> dict[str, Any]:
    files = _result_files(fake, job)
    ended = int(time.time()) if job.ended else None
    done = sum(1 for r in job.rows if r.status is not None)
    errors = None
    if job.state == "failed":
        errors = {
            "object": "list",
            "data": [
                {"code": job.error_code, "message": f"batch failed: {job.error_code}", "param": None, "line": None}
            ],
        }
    return {
        "id": job.id,
        "object": "batch",
        "endpoint": job.extra["endpoint"],
        "errors": errors,
        "input_file_id": job.extra["input_file_id"],
        "completion_window": "24h",
        "status": _STATUS[job.state],
        "output_file_id": files[0],
        "error_file_id": files[1],
        "created_at": int(job.created_at),
        "in_progress_at": int(job.created_at),
        "expires_at": int(job.created_at) + 86400,
        "completed_at": ended if job.state == "completed" else None,
        "expired_at": ended if job.state == "expired" else None,
        "failed_at": ended if job.state == "failed" else None,
        "cancelled_at": ended if job.state == "cancelled" else None,
        "request_counts": {"total": len(job.rows), "completed": job.count(200), "failed": done - job.count(200)},
        "metadata": job.extra.get("metadata"),
    }


def _result_files(fake: Any, job: Job) -> tuple[str | None, str | None]:
    """Output and error files, written once when the job ends."""
    if not job.ended or job.state == "failed":
        return None, None
    if "files" not in job.extra:
        ok, bad = [], []
        missing = "batch_expired" if job.state == "expired" else "batch_cancelled"
        for row in job.rows:
            line: dict[str, Any] = {"id": new_id("batch_req_"), "custom_id": row.custom_id}
            if row.status is None:
                line.update(response=None, error={"code": missing, "message": f"not run: {missing}"})
            else:
                line.update(
                    response={"status_code": row.status, "request_id": new_id("req_"), "body": row.payload}, error=None
                )
            (ok if row.status == 200 else bad).append(json.dumps(line))
        ok.reverse()  # output order is not input order
        job.extra["files"] = tuple(_store(fake, broken(fake, lines), job.id) for lines in (ok, bad))
    return job.extra["files"]


def _store(fake: Any, lines: list[str], job_id: str) -> str | None:
    if not lines:
        return None
    file_id = new_id("file-")
    world(fake).files[file_id] = {
        "data": ("\n".join(lines) + "\n").encode(),
        "filename": f"{job_id}_output.jsonl",
        "purpose": "batch_output",
        "created_at": int(time.time()),
    }
    return file_id


def _file_object(file_id: str, found: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(found["data"]),
        "created_at": found["created_at"],
        "filename": found["filename"],
        "purpose": found["purpose"],
        "status": "processed",
    }


def _error(status: int, message: str) -> Response:
    return json_response(status, PROVIDER.error_body(status, message, None, 0.0))
