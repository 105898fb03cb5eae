"""Anthropic Message Batches wire format: create (requests inline), retrieve, list, results
(JSONL by result type: succeeded / errored / canceled / expired) and cancel."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from . import anthropic_routes
from .batch_core import PROVIDERS, Job, Row, broken, cancel, create_refusal, new_id, read, world
from .wire import Request, Response, json_response

PROVIDER = anthropic_routes.PROVIDER
PROVIDERS["anthropic"] = PROVIDER
ROUTE = PROVIDER.routes[0]
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def register(app: Any) -> None:
    fake = app.fake

    async def create(request: Request, params: dict[str, str]) -> Response:
        refusal = create_refusal(fake, PROVIDER)
        if refusal is not None:
            return json_response(*refusal)
        body = request.json() or {}
        rows, problem = _rows(body.get("requests"))
        if problem:
            return _error(400, problem)
        job = await world(fake).create_late(fake, Job(new_id("msgbatch_"), "anthropic", ROUTE, rows))
        return json_response(200, batch_object(request, job))

    async def retrieve(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(params["id"])
        if job is None:
            return _error(404, f"message batch {params['id']} not found")
        return json_response(200, batch_object(request, read(fake, job)))

    async def cancel_job(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(params["id"])
        if job is None:
            return _error(404, f"message batch {params['id']} not found")
        job = cancel(fake, job)
        job.extra["cancel_initiated_at"] = job.extra.get("cancel_initiated_at") or time.time()
        return json_response(200, batch_object(request, job))

    async def listing(request: Request, params: dict[str, str]) -> Response:
        jobs = world(fake).newest_first("anthropic")
        after = request.query.get("after_id")
        if after:
            ids = [j.id for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = int(request.query.get("limit", 20))
        page = jobs[:limit]
        return json_response(
            200,
            {
                "data": [batch_object(request, j) for j in page],
                "has_more": len(jobs) > limit,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            },
        )

    async def results(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(params["id"])
        if job is None or not job.ended:
            return _error(404, "results are not available until the batch has ended")
        lines = [json.dumps({"custom_id": row.custom_id, "result": _result(job, row)}) for row in job.rows]
        return Response(200, ("\n".join(broken(fake, lines[::-1])) + "\n").encode(), content_type="application/binary")

    app.add("POST", "/v1/messages/batches", create, "anthropic.batches.create")
    app.add("GET", "/v1/messages/batches", listing, "anthropic.batches.list")
    app.add("GET", r"/v1/messages/batches/(?P<id>[^/]+)", retrieve, "anthropic.batches.retrieve")
    app.add("GET", r"/v1/messages/batches/(?P<id>[^/]+)/results", results, "anthropic.batches.results")
    app.add("POST", r"/v1/messages/batches/(?P<id>[^/]+)/cancel", cancel_job, "anthropic.batches.cancel")


def _rows(requests: Any) -> tuple[list[Row], str | None]:
    if not isinstance(requests, list) or not requests:
        return [], "requests: at least one request is required"
    rows, seen = [], set()
    for i, item in enumerate(requests):
        custom_id = str(item.get("custom_id", ""))
        if not _CUSTOM_ID.fullmatch(custom_id):
            return [], f"requests.{i}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
        if custom_id in seen:
            return [], f"requests.{i}.custom_id: duplicate {custom_id}"
        seen.add(custom_id)
        rows.append(Row(custom_id, item.get("params") or {}))
    return rows, None


def _result(job: Job, row: Row) -> dict[str, Any]:
    if job.state == "failed":  # Anthropic has no failed batch: every request errored alike
        kind = "invalid_request_error" if job.error_code == "invalid_request" else "api_error"
        return {
            "type": "errored",
            "error": {"type": "error", "error": {"type": kind, "message": f"batch failed: {job.error_code}"}},
        }
    if row.status is None:
        return {"type": "canceled" if job.state == "cancelled" else "expired"}
    if row.status == 200:
        return {"type": "succeeded", "message": row.payload}
    payload = dict(row.payload or {})
    payload.pop("request_id", None)
    return {"type": "errored", "error": payload}


def batch_object(request: Request, job: Job) -> dict[str, Any]:
    ended = job.ended
    done = sum(1 for r in job.rows if r.status is not None)
    counts = {
        "processing": 0 if ended else len(job.rows) - done,
        "succeeded": job.count(200),
        "errored": len(job.rows) if job.state == "failed" else done - job.count(200),
        "canceled": len(job.rows) - done if job.state == "cancelled" else 0,
        "expired": len(job.rows) - done if job.state == "expired" else 0,
    }
    cancelled_at = job.extra.get("cancel_initiated_at")
    host = request.headers.get("host", "127.0.0.1")
    return {
        "id": job.id,
        "type": "message_batch",
        "processing_status": "ended" if ended else "canceling" if job.state == "cancelling" else "in_progress",
        "request_counts": counts,
        "ended_at": _iso(time.time()) if ended else None,
        "created_at": _iso(job.created_at),
        "expires_at": _iso(job.created_at + 86400),
        "cancel_initiated_at": _iso(cancelled_at) if cancelled_at else None,
        "archived_at": None,
        "results_url": f"http://{host}/v1/messages/batches/{job.id}/results" if ended else None,
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> Response:
    return json_response(status, PROVIDER.error_body(status, message, None, 0.0))
