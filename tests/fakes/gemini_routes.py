"""Gemini Developer API wire format: generateContent and Google-style errors.

google-genai 3.x posts to ``{base_url}/{api_version}/models/{model}:generateContent`` with
camelCase JSON; the default api_version is ``v1`` (``HttpOptions(api_version="v1beta")`` or
``GOOGLE_GENAI_API_VERSION=beta`` give ``v1beta``), so every version is routed. Gemini sends no
rate-limit headers: a 429 carries its retry delay as ``RetryInfo`` in the body.
"""

from __future__ import annotations

from typing import Any

from . import embedding_routes, media
from .core import Answer, Call, Provider, Route, content_text, conversation, last_user
from .limits import Snapshot

JSON_OBJECT = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
_INT_KEYS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def _get(node: dict[str, Any], camel: str, snake: str) -> Any:
    """The API accepts both spellings of proto field names; the SDK sends camelCase."""
    return node.get(camel, node.get(snake))


def parse_generate(body: dict[str, Any], params: dict[str, str]) -> Call:
    contents = body["contents"]
    contents = [contents] if isinstance(contents, dict) else contents
    if not isinstance(contents, list) or not contents:
        raise ValueError("* GenerateContentRequest.contents: contents is not specified")
    turns = conversation(contents, key="parts")
    system = _get(body, "systemInstruction", "system_instruction") or {}
    system_text = system if isinstance(system, str) else content_text(system.get("parts"))
    config = _get(body, "generationConfig", "generation_config") or {}
    texts = [system_text] + [content_text(c.get("parts")) for c in contents]
    tool, tool_schema = _called_function(body)
    return Call(
        provider="gemini",
        model=params["model"],
        prompt=last_user(turns),
        input_text="\n".join(t for t in texts if t),
        turns=turns,
        schema=tool_schema if tool else _schema(config),
        tool=tool,
        max_output=_get(config, "maxOutputTokens", "max_output_tokens"),
        body=body,
        media=media.gemini(contents),
    )


def _called_function(body: dict[str, Any]) -> tuple[str | None, Any]:
    """The function the answer calls: the first allowed by ``toolConfig.functionCallingConfig``
    (mode ANY or AUTO: a model that calls the function it is given), and its parameters' schema."""
    declared = [
        d for tool in body.get("tools") or [] for d in _get(tool, "functionDeclarations", "function_declarations") or []
    ]
    config = _get(_get(body, "toolConfig", "tool_config") or {}, "functionCallingConfig", "function_calling_config")
    mode = (config or {}).get("mode", "AUTO")
    if not declared or mode not in ("ANY", "AUTO", "VALIDATED"):
        return None, None
    allowed = _get(config or {}, "allowedFunctionNames", "allowed_function_names") or [d["name"] for d in declared]
    chosen = next((d for d in declared if d["name"] in allowed), None)
    if chosen is None:
        raise ValueError(f"allowedFunctionNames {allowed} names no declared function")
    schema = _get(chosen, "parametersJsonSchema", "parameters_json_schema")
    if schema is None and chosen.get("parameters") is not None:
        schema = from_openapi_schema(chosen["parameters"])
    return chosen["name"], schema or {"type": "object"}


def _schema(config: dict[str, Any]) -> Any:
    json_schema = _get(config, "responseJsonSchema", "response_json_schema")
    if json_schema is not None:
        return json_schema
    openapi = _get(config, "responseSchema", "response_schema")
    if openapi is not None:
        return from_openapi_schema(openapi)
    mime = _get(config, "responseMimeType", "response_mime_type")
    return JSON_OBJECT if mime == "application/json" else None


def from_openapi_schema(node: Any) -> Any:
    """Gemini's OpenAPI-style ``responseSchema`` as JSON Schema: ``"STRING"`` types lower-cased,
    ``nullable`` folded into the type, int64 counts (sent as strings) made numbers."""
    if isinstance(node, list):
        return [from_openapi_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key in _INT_KEYS:
            out[key] = int(value)
        elif key == "properties":
            out[key] = {name: from_openapi_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = from_openapi_schema(value)
        elif key != "nullable":
            out[key] = value
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def render_generate(call: Call, answer: Answer, uid: str) -> dict[str, Any]:
    part = {"functionCall": {"name": call.tool, "args": answer.value}} if call.tool else {"text": answer.text}
    candidate = {
        "content": {"parts": [part], "role": "model"},
        "finishReason": "MAX_TOKENS" if answer.truncated else "STOP",
        "index": 0,
    }
    usage = {
        "promptTokenCount": answer.input_tokens,
        "candidatesTokenCount": answer.output_tokens,
        "totalTokenCount": answer.input_tokens + answer.output_tokens,
    }
    if answer.cache_read:  # Gemini reports it only when some of the prompt came from its cache
        usage["cachedContentTokenCount"] = answer.cache_read
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": call.model,
        "responseId": f"fake{uid}",
    }


_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_TYPE = "type.googleapis.com/google.rpc."


def error_body(status: int, message: str, call: Call | None, retry_after_s: float) -> dict[str, Any]:
    details: list[dict[str, Any]] = []
    if status == 429:
        limit = "ContentInputTokens" if "on tokens" in message else "Requests"
        details.append(_quota_failure(f"Generate{limit}PerMinutePerProjectPerModel", call))
        if retry_after_s > 0:
            delay = f"{retry_after_s:.3f}".rstrip("0").rstrip(".")
            details.append({"@type": _TYPE + "RetryInfo", "retryDelay": f"{delay}s"})
    code = _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    error = {"code": status, "message": message, "status": code}
    if details:
        error["details"] = details
    return {"error": error}


def _quota_failure(quota_id: str, call: Call | None) -> dict[str, Any]:
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
        "quotaId": quota_id,
        "quotaDimensions": {"model": call.model if call else "unknown", "location": "global"},
    }
    return {"@type": _TYPE + "QuotaFailure", "violations": [violation]}


def quota_error(variant: Any) -> tuple[int, dict[str, Any]]:
    """A daily quota spent: RESOURCE_EXHAUSTED like a rate limit, told apart by its per-day
    quota id and by carrying no RetryInfo (waiting seconds will not help)."""
    message = (
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, head to: "
        "https://ai.google.dev/gemini-api/docs/rate-limits."
    )
    error = {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}
    if variant != "no_details":  # "no_details": the text alone, as some projects receive it
        error["details"] = [_quota_failure("GenerateRequestsPerDayPerProjectPerModel", None)]
    return 429, {"error": error}


def limit_headers(snap: Snapshot) -> dict[str, str]:
    return {}


PROVIDER = Provider(
    name="gemini",
    routes=(
        Route(
            "POST",
            r"/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):generateContent",
            "gemini.generate_content",
            parse_generate,
            render_generate,
        ),
        Route(
            "POST",
            r"/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):batchEmbedContents",
            "gemini.batch_embed_contents",
            embedding_routes.parse_gemini,
            embedding_routes.render_gemini,
        ),
    ),
    error_body=error_body,
    quota_error=quota_error,
    limit_headers=limit_headers,
    request_id_header="x-goog-request-id",
)
