"""OpenAI's request bodies and answers, as pure functions on JSON: Chat Completions and the
Responses API (schema, tools, the prompt-cache fields and the service tier of OpenAI's own
endpoint). The realtime and batch adapters both send `to_body` and read `parse_result`, so a row
costs the same request either way.
"""

from __future__ import annotations

import functools
from typing import Any

from batchor.errors import TransientProviderError
from batchor.providers.base import Completion, LLMRequest, ToolCall, refused, tool_arguments
from batchor.providers.caching import openai_breakpoint, openai_fields
from batchor.providers.media_parts import openai_chat_parts, openai_responses_parts, with_parts

_TOKEN_PARAM_FIRST_PARTY = "max_completion_tokens"
# Chat Completions parameters the Responses API rejects ("Unknown parameter"): dropped there.
_CHAT_ONLY = frozenset({
    "seed", "stop", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "n",
    "response_format", "max_completion_tokens", "modalities", "prediction", "audio",
})  # fmt: skip


def to_body(request: LLMRequest, *, api: str = "chat", strict: bool = True, first_party: bool = True) -> dict[str, Any]:
    """The JSON body for /v1/chat/completions or /v1/responses, with the prompt-cache key and the
    service tier (OpenAI's own: other servers may not know them)."""
    body = _responses_body(request, strict) if api == "responses" else _chat_body(request, strict, first_party)
    if first_party:
        body.update(openai_fields(request.cache, request.model, marked=api != "responses"))
        if api != "responses":
            body["messages"] = openai_breakpoint(body["messages"], request.cache, request.model)
        if request.service_tier:
            body["service_tier"] = request.service_tier
    return body


def _chat_body(request: LLMRequest, strict: bool, first_party: bool) -> dict[str, Any]:
    params = dict(request.params)
    if first_party and "max_tokens" in params:
        params[_TOKEN_PARAM_FIRST_PARTY] = params.pop("max_tokens")
    messages = with_parts(request, list(request.messages), "content", openai_chat_parts)
    body: dict[str, Any] = {"model": request.model, "messages": messages, **params}
    if request.schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": _schema_name(request.schema_name), "schema": request.schema, "strict": strict},
        }
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
        body["tool_choice"] = _tool_choice(request.tool_choice, nested=True)
    return body


def _tool_choice(choice: str | None, *, nested: bool) -> Any:
    """`required` and `auto` as they are; one tool as `{"type": "function", ...}` (Chat nests its name)."""
    if choice in (None, "required", "auto"):
        return choice or "required"
    return {"type": "function", "function": {"name": choice}} if nested else {"type": "function", "name": choice}


def _responses_body(request: LLMRequest, strict: bool) -> dict[str, Any]:
    params = {k: v for k, v in request.params.items() if k not in _CHAT_ONLY}
    tokens = params.pop("max_tokens", request.params.get("max_completion_tokens"))
    if tokens is not None:
        params.setdefault("max_output_tokens", tokens)
    if "reasoning_effort" in params:
        params.setdefault("reasoning", {"effort": params.pop("reasoning_effort")})
    system = [m["content"] for m in request.messages if m["role"] == "system"]
    turns = with_parts(
        request, [m for m in request.messages if m["role"] != "system"], "content", openai_responses_parts
    )
    body: dict[str, Any] = {"model": request.model, "input": turns, **params}
    if system:
        body["instructions"] = "\n\n".join(system)
    if request.schema is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": _schema_name(request.schema_name),
                "schema": request.schema,
                "strict": strict,
            }
        }
    if request.tools:  # Responses tools are strict unless told: strict needs every property required
        body["tools"] = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            | {"strict": False}
            for t in request.tools
        ]
        body["tool_choice"] = _tool_choice(request.tool_choice, nested=False)
    return body


def parse_result(data: dict[str, Any], *, api: str = "chat") -> Completion:
    """A Completion from a Chat Completions or Responses JSON body."""
    if api == "responses":
        return _parse_responses(data)
    choices = data.get("choices") or []
    if not choices:
        raise TransientProviderError("answer has no choices")
    message = choices[0].get("message") or {}
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    completion = Completion(
        text=message.get("content") or "",
        tool_calls=_chat_tool_calls(message),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
        service_tier=data.get("service_tier"),
        finish_reason=choices[0].get("finish_reason"),
        model=data.get("model"),
        raw=data,
        usage_known=bool(usage),
    )
    if message.get("refusal"):
        raise refused(f"model refused: {message['refusal']}", completion)
    return completion


def _chat_tool_calls(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    """`tool_calls` of a chat message (and the legacy single `function_call`)."""
    calls = [c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if isinstance(message.get("function_call"), dict):
        calls.append(message["function_call"])
    return tuple(ToolCall(str(c.get("name") or "?"), tool_arguments(c.get("arguments"))) for c in calls)


def _parse_responses(data: dict[str, Any]) -> Completion:
    texts, refusal, calls = [], None, []
    for item in data.get("output") or []:
        if item.get("type") == "function_call":
            calls.append(ToolCall(str(item.get("name") or "?"), tool_arguments(item.get("arguments"))))
        for part in item.get("content") or [] if item.get("type") == "message" else []:
            if part.get("type") == "output_text":
                texts.append(part.get("text") or "")
            elif part.get("type") == "refusal" and refusal is None:
                refusal = part.get("refusal")
    usage = data.get("usage") or {}
    details = usage.get("input_tokens_details") or {}
    # An incomplete response names why (max_output_tokens: cut off by the limit).
    finish = (
        (data.get("incomplete_details") or {}).get("reason") or data.get("status")
        if data.get("status") == "incomplete"
        else data.get("status")
    )
    completion = Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
        service_tier=data.get("service_tier"),
        finish_reason=finish,
        model=data.get("model"),
        raw=data,
        usage_known=bool(usage),
    )
    if refusal is not None:
        raise refused(f"model refused: {refusal}", completion)
    return completion


@functools.lru_cache(maxsize=256)  # one name per step: cleaned once, not per request
def _schema_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)
    return cleaned[:64] or "output"
