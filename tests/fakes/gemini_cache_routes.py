"""Gemini explicit context caches (Developer API): ``cachedContents`` create, list, get, patch
(ttl), delete, and ``generateContent`` (or a batch job's request) naming one in ``cachedContent``.

A cache holds a system instruction (and contents) of at least the model's minimum (1,024 tokens
for 2.5 Flash, 2,048 for 2.5 Pro and Flash-Lite, 4,096 otherwise: else 400 "too small"), lives
until its ``ttl`` runs out or it is deleted, and is billed for storage per token-hour over that
time (``Stats.context_caches``: created, renewed, deleted, storage_token_hours, creation_tokens).
A request naming one reads its tokens (``cachedContentTokenCount``, part of ``promptTokenCount``)
every time: it must be for the cache's model and carry no system instruction of its own (400),
and the cache must exist (403, as Gemini answers an expired or deleted one).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from .answers import estimate_tokens
from .batch_core import new_id
from .cache import _GONE, Context, bill_storage, gemini_minimum, usage_row
from .core import content_text
from .gemini_routes import error_body
from .wire import Request, Response, json_response

_VERSION = r"/(?P<version>v1|v1beta|v1alpha)"


def register(app: Any) -> None:
    fake = app.fake

    async def create(request: Request, params: dict[str, str]) -> Response:
        body = request.json() or {}
        model = str(body.get("model") or "").removeprefix("models/")
        system = body.get("systemInstruction") or body.get("system_instruction") or {}
        texts = [content_text(system.get("parts")) if isinstance(system, dict) else str(system)]
        texts += [content_text(c.get("parts")) for c in body.get("contents") or []]
        text = "\n".join(t for t in texts if t)
        tokens, minimum = estimate_tokens(text), gemini_minimum(model)
        if tokens < minimum:
            fake.stats.context_caches["refused"] += 1
            message = f"Cached content is too small. total_token_count={tokens}, min_total_token_count={minimum}"
            return _error(fake, 400, message)
        now = time.time()
        expires, shown = now + _seconds(body.get("ttl")), str(body.get("displayName") or "")
        context = Context(new_id("cachedContents/"), model, text, tokens, now, expires, shown)
        fake.caches.contexts[context.name] = context
        fake.stats.contexts_held[context.name] = context
        fake.stats.context_caches["created"] += 1
        fake.stats.context_caches["creation_tokens"] += tokens
        usage_row(fake.stats, f"gemini|{model}|realtime|standard")["context_create"] += tokens
        return json_response(200, _resource(context))

    async def get(request: Request, params: dict[str, str]) -> Response:
        context = fake.caches.live(fake.stats, f"cachedContents/{params['id']}")
        return json_response(200, _resource(context)) if context else _error(fake, 403, _GONE)

    async def update(request: Request, params: dict[str, str]) -> Response:
        context = fake.caches.live(fake.stats, f"cachedContents/{params['id']}")
        if context is None:
            return _error(fake, 403, _GONE)
        bill_storage(fake.stats, context, time.time())
        context.expires = time.time() + _seconds((request.json() or {}).get("ttl"))
        fake.stats.context_caches["renewed"] += 1
        return json_response(200, _resource(context))

    async def delete(request: Request, params: dict[str, str]) -> Response:
        context = fake.caches.live(fake.stats, f"cachedContents/{params['id']}")
        if context is None:
            return _error(fake, 403, _GONE)
        bill_storage(fake.stats, context, time.time())
        del fake.caches.contexts[context.name]
        fake.stats.contexts_held.pop(context.name, None)
        fake.stats.context_caches["deleted"] += 1
        return json_response(200, {})

    async def listing(request: Request, params: dict[str, str]) -> Response:
        live = [c for c in list(fake.caches.contexts) if fake.caches.live(fake.stats, c) is not None]
        start, size = int(request.query.get("pageToken") or 0), int(request.query.get("pageSize") or 50)
        body: dict[str, Any] = {
            "cachedContents": [_resource(fake.caches.contexts[c]) for c in live[start : start + size]]
        }
        if start + size < len(live):
            body["nextPageToken"] = str(start + size)
        return json_response(200, body)

    app.add("POST", _VERSION + r"/cachedContents", create, "gemini.caches.create")
    app.add("GET", _VERSION + r"/cachedContents", listing, "gemini.caches.list")
    app.add("GET", _VERSION + r"/cachedContents/(?P<id>[^/:]+)", get)
    app.add("PATCH", _VERSION + r"/cachedContents/(?P<id>[^/:]+)", update)
    app.add("DELETE", _VERSION + r"/cachedContents/(?P<id>[^/:]+)", delete, "gemini.caches.delete")


def _seconds(ttl: Any) -> float:
    return float(str(ttl or "3600s").removesuffix("s"))


def _resource(context: Context) -> dict[str, Any]:
    return {
        "name": context.name,
        "model": f"models/{context.model}",
        "displayName": context.display_name,
        "usageMetadata": {"totalTokenCount": context.tokens},
        "createTime": _iso(context.created),
        "updateTime": _iso(time.time()),
        "expireTime": _iso(context.expires),
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _error(fake: Any, status: int, message: str) -> Response:
    return json_response(status, error_body(status, message, None, 0.0))
