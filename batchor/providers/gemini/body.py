"""Gemini's request bodies and answers, as pure functions on JSON: `generate_content` arguments
(OpenAI-style parameter names mapped, schema, tools) and the REST or SDK-dump answer read into a
`Completion`. The realtime and batch adapters both use them, and neither imports google-genai to
do so (a plain-HTTP apply never loads the SDK).
"""

from __future__ import annotations

from typing import Any

from batchor.errors import TransientProviderError
from batchor.providers.base import Completion, LLMRequest, ToolCall, refused
from batchor.providers.media_parts import gemini_parts, with_parts

_RENAMED = {"max_tokens": "max_output_tokens", "max_completion_tokens": "max_output_tokens", "stop": "stop_sequences"}
# Chat Completions parameters with no Gemini equivalent: dropped, so OpenAI specs run unchanged.
_OPENAI_ONLY = frozenset({
    "response_format", "logit_bias", "logprobs", "top_logprobs", "n", "user", "store",
    "parallel_tool_calls", "reasoning_effort", "stream", "prediction", "modalities", "metadata",
    "service_tier",
})  # fmt: skip
# Finish and block reasons meaning the answer was withheld: retrying the same prompt will not help.
_REFUSALS = frozenset({"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION", "IMAGE_SAFETY"})


def to_body(request: LLMRequest) -> dict[str, Any]:
    """Keyword arguments for `client.aio.models.generate_content` (config in SDK snake_case)."""
    config = _params(request.params)
    system = [m["content"] for m in request.messages if m["role"] == "system"]
    if system:
        config["system_instruction"] = "\n\n".join(system)
    if request.schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = request.schema
    if request.tools:
        config.update(_tools(request))
    contents = with_parts(
        request,
        [
            {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
            for m in request.messages
            if m["role"] != "system"
        ],
        "parts",
        gemini_parts,
    )
    return {"model": request.model, "contents": contents, "config": config}


def _tools(request: LLMRequest) -> dict[str, Any]:
    """Function declarations and the calling mode: ANY (a call is required, of the one tool named
    when `tool_choice` names one) or AUTO (the model may answer in text)."""
    declarations = [
        {"name": t.name, "description": t.description, "parameters_json_schema": t.parameters} for t in request.tools
    ]
    choice = request.tool_choice or "required"
    calling: dict[str, Any] = {"mode": "AUTO" if choice == "auto" else "ANY"}
    if choice not in ("required", "auto"):
        calling["allowed_function_names"] = [choice]
    return {"tools": [{"function_declarations": declarations}], "tool_config": {"function_calling_config": calling}}


def _params(params: dict[str, Any]) -> dict[str, Any]:
    """OpenAI-style names mapped; Gemini-native ones (top_k, seed, thinking_config...) kept."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in _OPENAI_ONLY:
            continue
        name = _RENAMED.get(key, key)
        if name in out and key != name:
            continue  # the Gemini spelling, when given too, wins
        out[name] = value
    stop = out.get("stop_sequences")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    return out


def _get(node: dict[str, Any], camel: str, snake: str) -> Any:
    """REST answers are camelCase; SDK dumps (batch inline results) are snake_case."""
    value = node.get(camel)
    return node.get(snake) if value is None else value


def parse_result(data: dict[str, Any]) -> Completion:
    """A Completion from a generateContent JSON body; a blocked answer is a ContentRefusedError."""
    usage = _get(data, "usageMetadata", "usage_metadata") or {}
    feedback = _get(data, "promptFeedback", "prompt_feedback") or {}
    blocked = _get(feedback, "blockReason", "block_reason")
    if blocked:  # a 200, not a failed 400/500 (those Google does not bill): its usage says what it cost
        raise refused(f"Gemini blocked the prompt (blockReason: {blocked})", _completion(data, usage, "", blocked))
    candidates = data.get("candidates") or []
    if not candidates:
        raise TransientProviderError("answer has no candidates")
    candidate = candidates[0]
    finish = _get(candidate, "finishReason", "finish_reason")
    parts = (candidate.get("content") or {}).get("parts") or []
    text = "".join(p.get("text") or "" for p in parts if not p.get("thought"))
    completion = _completion(data, usage, text, finish)
    calls = [_get(p, "functionCall", "function_call") for p in parts]
    completion.tool_calls = tuple(ToolCall(str(c.get("name") or "?"), c.get("args")) for c in calls if c)
    if finish in _REFUSALS:
        raise refused(f"Gemini withheld the answer (finishReason: {finish})", completion)
    return completion


def _completion(data: dict[str, Any], usage: dict[str, Any], text: str, finish: str | None) -> Completion:
    """The answer's text and usage (none reported: usage_known False, the cost estimated)."""
    # Thinking tokens are billed as output.
    output = int(_get(usage, "candidatesTokenCount", "candidates_token_count") or 0)
    output += int(_get(usage, "thoughtsTokenCount", "thoughts_token_count") or 0)
    cached = int(_get(usage, "cachedContentTokenCount", "cached_content_token_count") or 0)
    return Completion(
        text=text,
        input_tokens=int(_get(usage, "promptTokenCount", "prompt_token_count") or 0),
        output_tokens=output,
        cached_input_tokens=cached,
        finish_reason=finish,
        model=_get(data, "modelVersion", "model_version"),
        raw=data,
        usage_known=bool(usage),
    )
