"""Azure OpenAI wire format: OpenAI's bodies at Azure's URLs, as the openai SDK's Azure client
sends them.

Chat Completions at ``/openai/deployments/<deployment>/chat/completions`` (the deployment is the
model: the body's ``model`` is ignored, as Azure does), files and batches at ``/openai/files`` and
``/openai/batches`` (batch lines and the batch's ``endpoint`` say ``/chat/completions``). Every
call needs the ``api-version`` query parameter and a credential (``api-key`` header or an Entra ID
bearer token); ``stats["azure"]`` counts calls by ``<auth>|<api-version>``.
"""

from __future__ import annotations

from typing import Any

from . import openai_batch_routes, openai_routes
from .batch_core import PROVIDERS
from .wire import Request, Response, json_response

PREFIX = "/openai"
PROVIDERS["azure"] = openai_routes.PROVIDER  # Azure's errors are OpenAI's shapes (faults.py)
_CHAT = next(r for r in openai_routes.PROVIDER.routes if r.endpoint == "openai.chat_completions")


def _refusal(request: Request) -> Response | None:
    """Azure's answers to a call without api-version or credential; else None (and counted)."""
    version = request.query.get("api-version")
    if not version:
        return json_response(404, {"error": {"code": "404", "message": "Resource not found"}})
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    auth = "api_key" if request.headers.get("api-key") else "entra_id" if bearer else None
    if auth is None:
        message = "Access denied due to missing subscription key or Entra ID token."
        return json_response(401, {"error": {"code": "401", "message": message}})
    return None


def register(app: Any) -> None:
    fake = app.fake

    def guard(handler: Any) -> Any:
        async def checked(request: Request, params: dict[str, str]) -> Response | None:
            refused = _refusal(request)
            if refused is not None:
                return refused
            auth = "api_key" if request.headers.get("api-key") else "entra_id"
            fake.stats.azure[f"{auth}|{request.query['api-version']}"] += 1
            return await handler(request, params)

        return checked

    async def chat(request: Request, params: dict[str, str]) -> Response | None:
        try:
            body = request.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            body = {**body, "model": params["deployment"]}
        return await fake.handle(openai_routes.PROVIDER, _CHAT, body, {})

    app.add("POST", rf"{PREFIX}/deployments/(?P<deployment>[^/]+)/chat/completions", guard(chat))
    openai_batch_routes.register(app, prefix=PREFIX, name="azure", line_prefix="", guard=guard)
