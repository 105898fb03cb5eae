"""The body each adapter sends for a request, without a client or a key (for `batchor show --prompts`).

It calls the adapters' own pure `to_body` with the settings the engine gives them (api, strict,
`model.options`), so a preview is the request as sent, not a description of it.
"""

from __future__ import annotations

from typing import Any

from batchor.providers import provider_info
from batchor.providers.base import LLMRequest

_WHAT = {
    "openai": "HTTP JSON body",
    "anthropic": "HTTP JSON body (Messages API)",
    "gemini": "google-genai generate_content arguments",
    "bedrock": "boto3 bedrock-runtime converse arguments",
    "mock": "answered locally",
}


def sent_body(
    provider: str, request: LLMRequest, *, api: str | None, strict: bool, options: dict[str, Any]
) -> dict[str, Any]:
    """What the adapter for `provider` sends for `request`."""
    info = provider_info(provider)
    if info.adapter == "openai":
        from batchor.providers.openai import realtime as openai

        return openai.to_body(request, api=api or "chat", strict=strict, first_party=info.first_party)
    if info.adapter == "anthropic":
        from batchor.providers.anthropic import realtime as anthropic

        mode = anthropic.structured_mode(request.model, strict=strict, option=options.get("structured"))
        return anthropic.to_body(request, structured=mode)
    if info.adapter == "gemini":
        from batchor.providers.gemini import realtime as gemini

        return gemini.to_body(request)
    if info.adapter == "bedrock":
        from batchor.providers.bedrock import realtime as bedrock

        mode = bedrock.structured_mode(request.model, strict=strict, option=options.get("structured"))
        return bedrock.shown(bedrock.to_body(request, structured=mode))
    from batchor.providers.mock import realtime as mock

    return mock.to_body(request)


def body_kind(provider: str, api: str | None) -> str:
    """What the body is, e.g. `POST /chat/completions HTTP JSON body`."""
    adapter = provider_info(provider).adapter
    if adapter == "openai":
        return f"POST /{'responses' if api == 'responses' else 'chat/completions'} {_WHAT['openai']}"
    if adapter == "anthropic":
        return f"POST /v1/messages {_WHAT['anthropic']}"
    return _WHAT.get(adapter, _WHAT["mock"])
