"""Anthropic wire format: Messages, errors and ``anthropic-ratelimit-*`` headers.

The SDK posts to ``{base_url}/v1/messages``. Structured output arrives either as
``output_config.format`` (answered with a text block holding JSON) or as a forced tool
(answered with a ``tool_use`` block whose ``input`` is the object).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from . import media
from .core import Answer, Call, Provider, Route, content_text, conversation, last_user
from .limits import Snapshot


def parse_messages(body: dict[str, Any], params: dict[str, str]) -> Call:
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: at least one message is required")
    if body.get("stream"):
        raise ValueError("stream: the fake server answers only non-streaming requests")
    if not isinstance(body.get("max_tokens"), int):
        raise TypeError("max_tokens: Field required")
    turns = conversation(messages)
    system = content_text(body.get("system") or "")
    tool, schema = _forced_tool(body)
    if tool is None:
        fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
        schema = fmt.get("schema", {}) if fmt.get("type") == "json_schema" else None
    texts = [system] + [content_text(m.get("content")) for m in messages]
    return Call(
        provider="anthropic",
        model=str(body["model"]),
        prompt=last_user(turns),
        input_text="\n".join(t for t in texts if t),
        turns=turns,
        schema=schema,
        tool=tool,
        max_output=body["max_tokens"],
        body=body,
        media=media.anthropic(messages),
    )


def _forced_tool(body: dict[str, Any]) -> tuple[str | None, Any]:
    choice = body.get("tool_choice") or {}
    tools = [t for t in body.get("tools") or [] if "input_schema" in t]
    if choice.get("type") in ("any", "auto") and tools:  # a model that calls the tool it is given
        return tools[0]["name"], tools[0]["input_schema"]
    if choice.get("type") != "tool":
        return None, None
    for tool in tools:
        if tool.get("name") == choice.get("name"):
            return tool["name"], tool["input_schema"]
    raise ValueError(f"tool_choice: tool {choice.get('name')!r} not found in tools")


def render_messages(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    if call.tool:
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{uid}",
            "name": call.tool,
            "input": answer.value,
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": answer.text}
        stop = "max_tokens" if answer.truncated else "end_turn"
    return {
        "id": f"msg_{uid}",
        "type": "message",
        "role": "assistant",
        "model": call.model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": answer.input_tokens - answer.cache_read - answer.cache_write,
            "output_tokens": answer.output_tokens,
            "cache_creation_input_tokens": answer.cache_write,
            "cache_read_input_tokens": answer.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": answer.cache_write - answer.cache_write_1h,
                "ephemeral_1h_input_tokens": answer.cache_write_1h,
            },
            "service_tier": "standard",
        },
    }


_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}
CREDIT_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)


def error_body(status: int, message: str, call: Call | None, retry_after_s: float) -> dict[str, Any]:
    kind = _TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return _envelope(kind, message)


def _envelope(kind: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if details:
        error["details"] = details
    return {"type": "error", "error": error, "request_id": f"req_fake{time.monotonic_ns()}"}


def quota_error(variant: Any) -> tuple[int, dict[str, Any]]:
    """Out of money, in the shapes the API and this SDK know: ``true``/``"billing"`` is a 402
    billing_error (SDK: ``PaymentRequiredError``); ``"credit_balance"`` the long-standing 400
    (``BadRequestError``); ``"spend_limit"`` a 429 that retrying will not cure
    (``EnforcedSpendLimitReachedError``)."""
    if variant == "credit_balance":
        return 400, _envelope("invalid_request_error", CREDIT_MESSAGE)
    if variant == "spend_limit":
        message = "You have reached your specified API usage limits. You will regain access later."
        details = {"error_code": "enforced_spend_limit_reached"}
        return 429, _envelope("rate_limit_error", message, details)
    return 402, _envelope("billing_error", CREDIT_MESSAGE)


def limit_headers(snap: Snapshot) -> dict[str, str]:
    headers: dict[str, str] = {}
    now = time.time()
    if snap.rpm is not None:
        headers["anthropic-ratelimit-requests-limit"] = str(snap.rpm)
        headers["anthropic-ratelimit-requests-remaining"] = str(snap.requests_left)
        headers["anthropic-ratelimit-requests-reset"] = _rfc3339(now + snap.requests_reset_s)
    if snap.tpm is not None:
        headers["anthropic-ratelimit-tokens-limit"] = str(snap.tpm)
        headers["anthropic-ratelimit-tokens-remaining"] = str(snap.tokens_left)
        headers["anthropic-ratelimit-tokens-reset"] = _rfc3339(now + snap.tokens_reset_s)
    return headers


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


PROVIDER = Provider(
    name="anthropic",
    routes=(Route("POST", r"/v1/messages", "anthropic.messages", parse_messages, render_messages),),
    error_body=error_body,
    quota_error=quota_error,
    limit_headers=limit_headers,
    request_id_header="request-id",
)
