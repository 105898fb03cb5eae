"""Gemini's generation config in its REST form, for the plain-HTTP realtime path, without the SDK.

`to_body` gives the config in the SDK's snake_case; the REST API wants camelCase, with some
fields on the request and the rest in `generationConfig`. The SDK's config type does that
conversion (`batch.rest_request`), but importing google-genai costs more than a CPU-second of a
realtime apply's start-up. The fields batchor's specs usually set (sampling, length, stop,
seed, JSON schema, function tools, thinking budget) are converted here, as the SDK does it:
same names, order and types. Anything else (a field not listed, a value of another type) is
`None`, and the caller converts it through the SDK, which also refuses what it does not know.
"""

from __future__ import annotations

from typing import Any

# Top-level GenerateContentConfig fields, in the SDK's order: (REST name, kind, on the request
# itself rather than in generationConfig).
_FIELDS: dict[str, tuple[str, str, bool]] = {
    "temperature": ("temperature", "float", False),
    "top_p": ("topP", "float", False),
    "top_k": ("topK", "float", False),
    "candidate_count": ("candidateCount", "int", False),
    "max_output_tokens": ("maxOutputTokens", "int", False),
    "stop_sequences": ("stopSequences", "strings", False),
    "response_logprobs": ("responseLogprobs", "bool", False),
    "logprobs": ("logprobs", "int", False),
    "presence_penalty": ("presencePenalty", "float", False),
    "frequency_penalty": ("frequencyPenalty", "float", False),
    "seed": ("seed", "int", False),
    "response_mime_type": ("responseMimeType", "str", False),
    "response_json_schema": ("responseJsonSchema", "json", False),
    "tools": ("tools", "tools", True),
    "tool_config": ("toolConfig", "tool_config", True),
    "labels": ("labels", "labels", True),
    "cached_content": ("cachedContent", "str", True),
    "thinking_config": ("thinkingConfig", "thinking", False),
}
_MODES = frozenset({"ANY", "AUTO", "NONE", "VALIDATED"})


class _Unfit(Exception):
    """A config this module does not convert: the SDK does."""


def rest_config(config: dict[str, Any]) -> dict[str, Any] | None:
    """The REST fields of `config` (a GenerateContentConfig's snake_case fields, no system
    instruction), or None when only the SDK's config type can convert it."""
    if not config.keys() <= _FIELDS.keys():
        return None
    request: dict[str, Any] = {}
    generation: dict[str, Any] = {}
    try:
        for name, (rest, kind, on_request) in _FIELDS.items():
            value = config.get(name)
            if value is not None:
                (request if on_request else generation)[rest] = _CONVERT[kind](value)
    except _Unfit:
        return None
    if generation:
        request["generationConfig"] = generation
    return request


def _float(value: Any) -> float:
    if type(value) not in (int, float):  # a bool or a string: the SDK's lax rules decide
        raise _Unfit
    return float(value)


def _int(value: Any) -> int:
    if type(value) is not int:
        raise _Unfit
    return value


def _of(kind: type) -> Any:
    def exact(value: Any) -> Any:
        if type(value) is not kind:
            raise _Unfit
        return value

    return exact


def _strings(value: Any) -> list[str]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise _Unfit
    return list(value)


def _labels(value: Any) -> dict[str, str]:
    if type(value) is not dict or any(type(k) is not str or type(v) is not str for k, v in value.items()):
        raise _Unfit
    return dict(value)


def _picked(value: Any, fields: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """A nested config object: only `fields` (snake -> (camel, convert)), in that order."""
    if type(value) is not dict or not value.keys() <= fields.keys():
        raise _Unfit
    return {camel: convert(value[name]) for name, (camel, convert) in fields.items() if value.get(name) is not None}


def _json(value: Any) -> Any:
    return value  # a JSON Schema is sent as written (its property order is the answer's)


def _mode(value: Any) -> str:
    if value not in _MODES:
        raise _Unfit
    return str(value)


_DECLARATION = {
    "description": ("description", _of(str)),
    "name": ("name", _of(str)),
    "parameters_json_schema": ("parametersJsonSchema", _json),
}
_CALLING = {"allowed_function_names": ("allowedFunctionNames", _strings), "mode": ("mode", _mode)}


def _tools(value: Any) -> list[dict[str, Any]]:
    if type(value) is not list:
        raise _Unfit
    tools = [_picked(tool, {"function_declarations": ("functionDeclarations", _declarations)}) for tool in value]
    return tools


def _declarations(value: Any) -> list[dict[str, Any]]:
    if type(value) is not list:
        raise _Unfit
    return [_picked(declaration, _DECLARATION) for declaration in value]


def _tool_config(value: Any) -> dict[str, Any]:
    return _picked(value, {"function_calling_config": ("functionCallingConfig", lambda v: _picked(v, _CALLING))})


def _thinking(value: Any) -> dict[str, Any]:
    return _picked(
        value, {"include_thoughts": ("includeThoughts", _of(bool)), "thinking_budget": ("thinkingBudget", _int)}
    )


_CONVERT: dict[str, Any] = {
    "float": _float,
    "int": _int,
    "bool": _of(bool),
    "str": _of(str),
    "strings": _strings,
    "json": _json,
    "tools": _tools,
    "tool_config": _tool_config,
    "labels": _labels,
    "thinking": _thinking,
}
