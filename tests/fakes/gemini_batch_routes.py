"""Gemini batch jobs wire format (Developer API): ``models/{model}:batchGenerateContent`` with
inline requests keyed by ``metadata``, jobs as long-running operations (``batches/{id}``,
states ``BATCH_STATE_*``), list, and ``:cancel``. Results come back inline, one per row that
ran, each with its request's metadata."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from . import gemini_routes
from .batch_core import PROVIDERS, Job, Row, cancel, create_refusal, new_id, read, world
from .wire import Request, Response, json_response

PROVIDER = gemini_routes.PROVIDER
PROVIDERS["gemini"] = PROVIDER
ROUTE = PROVIDER.routes[0]
_VERSION = r"/(?P<version>v1|v1beta|v1alpha)"
_STATE = {"running": "BATCH_STATE_RUNNING", "cancelling": "BATCH_STATE_RUNNING", "completed": "BATCH_STATE_SUCCEEDED",
          "expired": "BATCH_STATE_EXPIRED", "failed": "BATCH_STATE_FAILED", "cancelled": "BATCH_STATE_CANCELLED"}


def register(app: Any) -> None:
    fake = app.fake

    async def create(request: Request, params: dict[str, str]) -> Response:
        refusal = create_refusal(fake, PROVIDER)
        if refusal is not None:
            return json_response(*refusal)
        batch = (request.json() or {}).get("batch") or {}
        items = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")
        if not isinstance(items, list) or not items:
            return _error(400, "batch.inputConfig.requests: at least one inline request is required")
        rows = [Row(str((item.get("metadata") or {}).get("key") or i), item.get("request") or {})
                for i, item in enumerate(items)]
        job = Job(new_id("batches/"), "gemini", ROUTE, rows, tag=batch.get("displayName"),
                  extra={"route_params": {"model": params["model"]}, "metadata": [i.get("metadata") for i in items],
                         "model": params["model"]})
        world(fake).create(fake, job)
        delay = float(fake.config["batch_create_delay_s"])
        if delay > 0:
            await asyncio.sleep(delay)
        return json_response(200, operation(job))

    async def get(request: Request, params: dict[str, str]) -> Response:
        job = world(fake).jobs.get(f"batches/{params['id']}")
        if job is None:
            return _error(404, f"batch job batches/{params['id']} not found")
        return json_response(200, operation(read(fake, job)))

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
        page = jobs[start:start + size]
        body: dict[str, Any] = {"operations": [operation(j) for j in page]}
        if start + size < len(jobs):
            body["nextPageToken"] = str(start + size)
        return json_response(200, body)

    openai_list = app.exact.get(("GET", "/v1/batches"))

    async def shared_list(request: Request, params: dict[str, str]) -> Response:
        """GET /v1/batches is OpenAI's list too: Google's SDK is told apart by its key header."""
        if openai_list is not None and "x-goog-api-key" not in request.headers:
            return await openai_list(request, params)
        return await listing(request, {"version": "v1"})

    app.add("POST", _VERSION + r"/models/(?P<model>[^/:]+):batchGenerateContent", create)
    app.add("GET", "/v1/batches", shared_list)
    app.add("GET", _VERSION + r"/batches", listing)
    app.add("GET", _VERSION + r"/batches/(?P<id>[^/:]+)", get)
    app.add("POST", _VERSION + r"/batches/(?P<id>[^/:]+):cancel", cancel_job)


def operation(job: Job) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "model": f"models/{job.extra['model']}", "displayName": job.tag, "state": _STATE[job.state],
        "createTime": _iso(job.created_at), "updateTime": _iso(time.time()),
        "batchStats": {"requestCount": str(len(job.rows)), "successfulRequestCount": str(job.count(200))},
    }
    if job.ended:
        metadata["endTime"] = _iso(time.time())
        responses = []
        for row, meta in zip(job.rows, job.extra["metadata"]):
            if row.status == 200:
                responses.append({"response": row.payload, "metadata": meta})
            elif row.status is not None:
                responses.append({"error": (row.payload or {}).get("error"), "metadata": meta})
        metadata["output"] = {"inlinedResponses": {"inlinedResponses": responses}}
    return {"name": job.id, "metadata": metadata, "done": job.ended}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(status: int, message: str) -> Response:
    return json_response(status, PROVIDER.error_body(status, message, None, 0.0))
