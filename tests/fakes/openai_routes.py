"""OpenAI wire format: Chat Completions and Responses, errors and rate-limit headers.

Shapes follow what the installed ``openai`` SDK sends and parses (``POST {base}/chat/completions``
and ``{base}/responses`` with ``base_url=".../v1"``), so the SDK's own models and exception
classes are exercised for real.
"""

from __future__ import annotations

import time
from typing import Any

from . import embedding_routes, media
from .core import Answer, Call, Provider, Route, content_text, conversation, last_user
from .limits import Snapshot

JSON_OBJECT = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


def _refuse_stream(body: dict[str, Any]) -> None:
    if body.get("stream"):
        raise ValueError("stream: the fake server answers only non-streaming requests")


def parse_chat(body: dict[str, Any], params: dict[str, str]) -> Call:
    _refuse_stream(body)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty array")
    turns = conversation(messages)
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema", {}) if fmt.get("type") == "json_schema" else None
    schema = JSON_OBJECT if fmt.get("type") == "json_object" else schema
    tool, tool_schema = _forced_function(body, nested=True)
    return Call(
        provider="openai",
        model=str(body["model"]),
        prompt=last_user(turns),
        input_text="\n".join(content_text(m.get("content")) for m in messages),
        turns=turns,
        schema=tool_schema if tool else schema,
        tool=tool,
        max_output=body.get("max_completion_tokens") or body.get("max_tokens"),
        body=body,
        media=media.openai_chat(messages),
    )


def render_chat(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
    finish = "length" if answer.truncated else "stop"
    if call.tool:
        function = {"name": call.tool, "arguments": answer.text}
        message["content"] = None
        message["tool_calls"] = [{"id": f"call_{uid}", "type": "function", "function": function}]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "prompt_tokens_details": {"cached_tokens": answer.cache_read, **_writes(answer)},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "service_tier": served_tier(call),
        "system_fingerprint": "fp_fake",
    }


def served_tier(call: Call) -> str:
    """The tier OpenAI reports having served the call at: flex when asked for, else default."""
    return "flex" if call.body.get("service_tier") == "flex" else "default"


def parse_responses(body: dict[str, Any], params: dict[str, str]) -> Call:
    _refuse_stream(body)
    items = body["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise ValueError("'input' must be a string or a non-empty array")
    messages = [i for i in items if isinstance(i, dict) and i.get("type", "message") == "message"]
    turns = conversation(messages)
    fmt = (body.get("text") or {}).get("format") or {}
    schema = fmt.get("schema", {}) if fmt.get("type") == "json_schema" else None
    schema = JSON_OBJECT if fmt.get("type") == "json_object" else schema
    tool, tool_schema = _forced_function(body, nested=False)
    texts = [str(body.get("instructions") or "")] + [content_text(m.get("content")) for m in messages]
    return Call(
        provider="openai",
        model=str(body["model"]),
        prompt=last_user(turns),
        input_text="\n".join(t for t in texts if t),
        turns=turns,
        schema=tool_schema if tool else schema,
        tool=tool,
        max_output=body.get("max_output_tokens"),
        body=body,
        media=media.openai_responses(messages),
    )


def render_responses(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    if call.tool:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{uid}",
            "call_id": f"call_{uid}",
            "name": call.tool,
            "arguments": answer.text,
            "status": "completed",
        }
    else:
        text = {"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}
        item = {"type": "message", "id": f"msg_{uid}", "status": "completed", "role": "assistant"}
        item["content"] = [text]
    body = call.body
    return {
        "id": f"resp_{uid}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if answer.truncated else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if answer.truncated else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": call.model,
        "output": [item],
        "parallel_tool_calls": True,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": body.get("top_p", 1.0),
        "usage": {
            "input_tokens": answer.input_tokens,
            "input_tokens_details": {"cached_tokens": answer.cache_read, **_writes(answer)},
            "output_tokens": answer.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.input_tokens + answer.output_tokens,
        },
    }


def _forced_function(body: dict[str, Any], nested: bool) -> tuple[str | None, Any]:
    """Name and parameter schema of the tool the answer calls: the one ``tool_choice`` names (chat
    nests it as ``{"function": {"name"}}``, Responses does not), else, when the request has tools
    and its choice is ``required`` or ``auto``, the first (a model that calls the tool it is given)."""
    choice = body.get("tool_choice")
    functions = [t.get("function", {}) if nested else t for t in body.get("tools") or [] if t.get("type") == "function"]
    if choice in ("required", "auto") and functions:
        return functions[0]["name"], functions[0].get("parameters") or {"type": "object"}
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return None, None
    name = (choice.get("function") or {}).get("name") if nested else choice.get("name")
    for tool in body.get("tools") or []:
        spec = tool.get("function", {}) if nested else tool
        if spec.get("name") == name:
            return name, spec.get("parameters") or {"type": "object"}
    raise ValueError(f"tool_choice names {name!r}, which is not in 'tools'")


_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    503: ("server_error", "service_unavailable"),
}


def error_body(status: int, message: str, call: Call | None, retry_after_s: float) -> dict[str, Any]:
    if status == 429:
        # OpenAI names the exhausted limit in `type`; the limiter's message names it too.
        kind = "tokens" if "on tokens" in message else "requests"
        code = "rate_limit_exceeded"
    else:
        kind, code = _TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def quota_error(variant: Any) -> tuple[int, dict[str, Any]]:
    message = (
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors."
    )
    error = {
        "message": message,
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
    return 429, {"error": error}


def limit_headers(snap: Snapshot) -> dict[str, str]:
    headers: dict[str, str] = {}
    if snap.rpm is not None:
        headers["x-ratelimit-limit-requests"] = str(snap.rpm)
        headers["x-ratelimit-remaining-requests"] = str(snap.requests_left)
        headers["x-ratelimit-reset-requests"] = duration(snap.requests_reset_s)
    if snap.tpm is not None:
        headers["x-ratelimit-limit-tokens"] = str(snap.tpm)
        headers["x-ratelimit-remaining-tokens"] = str(snap.tokens_left)
        headers["x-ratelimit-reset-tokens"] = duration(snap.tokens_reset_s)
    return headers


def duration(seconds: float) -> str:
    """OpenAI's reset format: ``"120ms"``, ``"1.5s"``, ``"6m0s"``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"


PROVIDER = Provider(
    name="openai",
    routes=(
        Route("POST", r"/v1/chat/completions", "openai.chat_completions", parse_chat, render_chat),
        Route("POST", r"/v1/responses", "openai.responses", parse_responses, render_responses),
        Route(
            "POST",
            r"/v1/embeddings",
            "openai.embeddings",
            embedding_routes.parse_openai,
            embedding_routes.render_openai,
        ),
    ),
    error_body=error_body,
    quota_error=quota_error,
    limit_headers=limit_headers,
    request_id_header="x-request-id",
)


def _writes(answer: Any) -> dict[str, int]:
    """GPT-5.6 and later report the tokens a miss wrote to the prompt cache (billed)."""
    return {"cache_write_tokens": answer.cache_write} if answer.cache_write else {}
