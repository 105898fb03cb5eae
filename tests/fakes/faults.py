"""Fault injection on any named endpoint of the fake: one switch per endpoint and fault kind.

The config's ``fault_plan`` maps an endpoint name (``"openai.files.create"``,
``"gemini.batches.get"``, see ``ENDPOINTS``) to the actions its next calls get, one per call, in
order; after the list, calls are answered normally::

    {"openai.batches.retrieve": ["429", "503", "ok"], "anthropic.batches.create": ["timeout"]}

Actions: ``"ok"``; an HTTP status (``"429"`` carries the config's ``retry_after_s`` as the provider
does: a header, or Gemini's RetryInfo); ``"timeout"`` (the call is carried out, then its answer is
held ``timeout_hold_s`` and the connection dropped: the client cannot know whether it happened);
``"slow"`` (answered normally, ``slow_hold_s`` late); ``"disconnect"`` (the connection is dropped
before anything is done); ``"cut"`` (answered, the head and half the body sent, then the
connection dropped); ``"quota"`` or ``"quota:<variant>"`` (the provider's own quota error, see
each ``quota_error``). Changing the plan restarts every endpoint's list; ``stats["endpoint_calls"]``
counts calls per name, and ``stats["endpoint_max_in_flight"]`` the most of them answered at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .wire import Request, Response, json_response

ENDPOINTS = (
    "openai.files.create", "openai.files.content", "openai.files.delete", "openai.batches.create",
    "openai.batches.list", "openai.batches.retrieve", "openai.batches.cancel",
    "anthropic.batches.create", "anthropic.batches.list", "anthropic.batches.retrieve",
    "anthropic.batches.results", "anthropic.batches.cancel",
    "gemini.batches.create", "gemini.batches.list", "gemini.batches.get", "gemini.batches.cancel",
    "gemini.batches.delete", "gemini.files.upload", "gemini.files.get", "gemini.files.download",
    "gemini.files.delete", "openai.embeddings", "gemini.batch_embed_contents",
    "gemini.caches.create", "gemini.caches.list", "gemini.caches.delete",
    "azure.files.create", "azure.files.content", "azure.files.delete", "azure.batches.create",
    "azure.batches.list", "azure.batches.retrieve", "azure.batches.cancel",
    "s3.objects.put", "s3.objects.get", "s3.objects.delete", "bedrock.batches.create",
    "bedrock.batches.list", "bedrock.batches.retrieve", "bedrock.batches.cancel",
    "vertex.batches.create", "vertex.batches.list", "vertex.batches.get", "vertex.batches.cancel",
    "gcs.objects.insert", "gcs.objects.get", "gcs.objects.list", "gcs.objects.delete",
)  # fmt: skip
KINDS = ("ok", "slow", "timeout", "disconnect", "cut", "quota")
Handler = Callable[[Request, dict[str, str]], Awaitable[Response | None]]


def check_plan(plan: Any) -> None:
    """Refuse a plan naming an unknown endpoint or action (a typo must not pass as "no fault")."""
    if not isinstance(plan, dict):
        raise TypeError("fault_plan must be an object {endpoint: [action, ...]}")
    for endpoint, actions in plan.items():
        if endpoint not in ENDPOINTS:
            raise ValueError(f"fault_plan: unknown endpoint {endpoint!r}; known: {list(ENDPOINTS)}")
        if not isinstance(actions, list):
            raise TypeError(f"fault_plan[{endpoint!r}] must be a list of actions")
        for action in actions:
            if not _valid(str(action)):
                raise ValueError(
                    f"fault_plan[{endpoint!r}]: unknown action {action!r}; use a status, "
                    f"or one of {KINDS} (quota:<variant> too)"
                )


def _valid(action: str) -> bool:
    return action in KINDS or action.startswith("quota:") or (action.isdigit() and 400 <= int(action) <= 599)


def with_faults(fake: Any, endpoint: str, handler: Handler) -> Handler:
    """`handler` behind the fault plan of `endpoint`."""
    if endpoint not in ENDPOINTS:
        raise ValueError(f"unknown endpoint name {endpoint}")
    provider_name = endpoint.partition(".")[0]

    async def faulty(request: Request, params: dict[str, str]) -> Response | None:
        stats = fake.stats
        stats.endpoint_calls[endpoint] += 1
        stats.endpoint_in_flight[endpoint] += 1
        stats.endpoint_max_in_flight[endpoint] = max(
            stats.endpoint_max_in_flight[endpoint], stats.endpoint_in_flight[endpoint]
        )
        try:
            if not fake.config["batch_api"] and (".batches." in endpoint or ".files." in endpoint):
                return json_response(404, {"detail": "Not Found"})  # as an OpenAI-compatible server without it
            return await _act(fake, endpoint, provider_name, handler, request, params)
        finally:
            stats.endpoint_in_flight[endpoint] -= 1

    return faulty


async def _act(
    fake: Any, endpoint: str, provider_name: str, handler: Handler, request: Request, params: dict[str, str]
) -> Response | None:
    """The next action of `endpoint`'s plan, carried out."""
    action = next_action(fake, endpoint)
    if action in ("ok", "slow"):
        if action == "slow":
            await asyncio.sleep(float(fake.config["slow_hold_s"]))
        return await handler(request, params)
    fake.stats.faults[f"{endpoint}:{action}"] += 1
    if action == "disconnect":
        return None
    if action == "cut":
        response = await handler(request, params)
        if response is not None:
            response.cut = True
        return response
    if action == "timeout":
        await handler(request, params)
        await asyncio.sleep(float(fake.config["timeout_hold_s"]))
        return None
    from .batch_core import PROVIDERS

    return _error(fake, PROVIDERS[provider_name], action, endpoint)


def next_action(fake: Any, endpoint: str) -> str:
    actions = (fake.config.get("fault_plan") or {}).get(endpoint) or []
    cursor = fake.fault_cursor[endpoint]
    fake.fault_cursor[endpoint] = cursor + 1
    return str(actions[cursor]) if cursor < len(actions) else "ok"


def _error(fake: Any, provider: Any, action: str, endpoint: str) -> Response:
    if action.startswith("quota"):
        variant = action.partition(":")[2] or True
        status, payload = provider.quota_error(variant)
        return fake._reply(provider, status, payload)
    status = int(action)
    retry_after = float(fake.config["retry_after_s"]) if status == 429 else 0.0
    message = f"{endpoint} failed with status {status} (injected fault)."
    if status in (404, 410):
        message = f"{endpoint}: the resource is not found or no longer available ({status}, injected fault)."
    return fake._error(provider, status, message, None, retry_after)
