"""Which `model.params` each provider knows, so a misspelt parameter fails at `validate`, not at
the provider on every row (`temprature` would be sent as it is and refused as unknown).

A spec's params use the provider's own names, and the OpenAI names every adapter accepts
(`max_tokens`, `stop`, ... are renamed or dropped by the anthropic and gemini adapters so one spec runs
on every provider). The lists follow the official SDKs' request types (a test compares them).
An OpenAI-compatible server (a `base_url`, or a preset such as vllm or openrouter) takes extra
parameters of its own, so there only a near miss of a known name is refused.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from batchor.errors import ModelParamError

# OpenAI Chat Completions (openai.types.chat.CompletionCreateParams) and the Responses API
# (openai.types.responses.ResponseCreateParams) request fields a spec may set.
OPENAI_CHAT = frozenset({
    "audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "metadata", "modalities", "moderation", "n", "parallel_tool_calls",
    "prediction", "presence_penalty", "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention",
    "reasoning_effort",
    "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
    "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user", "verbosity",
    "web_search_options",
})  # fmt: skip
OPENAI_RESPONSES = frozenset({
    "access_programs", "background", "background_options", "context_management", "conversation", "image",
    "include", "instructions", "max_output_tokens", "max_tool_calls", "metadata", "moderation",
    "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key", "prompt_cache_options",
    "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier", "store", "stream",
    "stream_options", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation",
    "user",
})  # fmt: skip
# Anthropic Messages (anthropic.types.MessageCreateParams), less what batchor sets itself; the
# sampling parameters and beta fields the Messages API documents but newer SDK types leave out.
ANTHROPIC = frozenset({
    "cache_control", "container", "context_management", "diagnostics", "inference_geo", "max_tokens",
    "mcp_servers", "metadata", "service_tier", "speed", "stop_sequences", "temperature", "thinking",
    "tool_choice", "tools", "top_k", "top_p", "user_profile_id", "workspace_id",
})  # fmt: skip
# Gemini GenerateContentConfig (google.genai.types), less what batchor sets itself.
GEMINI = frozenset({
    "audio_timestamp", "audio_transcription_config", "automatic_continuation", "automatic_function_calling",
    "cached_content", "candidate_count", "continuation_token", "enable_enhanced_civic_answers",
    "frequency_penalty", "generation_output_config", "http_options", "image_config", "labels", "logprobs",
    "max_output_tokens", "media_resolution", "model_armor_config", "model_selection_config",
    "presence_penalty", "response_logprobs", "response_modalities", "routing_config", "safety_settings",
    "seed", "service_tier", "should_return_http_response", "speech_config", "stop_sequences", "store",
    "temperature", "thinking_config", "tool_config", "tools", "top_k", "top_p",
})  # fmt: skip
# Bedrock Converse: inferenceConfig (in OpenAI's names, as every adapter takes them) and `top_k`,
# sent to the model as additionalModelRequestFields (Claude's and Mistral's name for it).
BEDROCK = frozenset({"max_tokens", "temperature", "top_p", "stop_sequences", "top_k"})
_KNOWN: Mapping[str, frozenset[str]] = {
    "openai": OPENAI_CHAT | OPENAI_RESPONSES,
    "azure": OPENAI_CHAT,  # Chat Completions on a deployment
    "anthropic": ANTHROPIC | OPENAI_CHAT,  # OpenAI names: renamed (stop, max_completion_tokens) or dropped
    "gemini": GEMINI | OPENAI_CHAT,
    "bedrock": BEDROCK | OPENAI_CHAT,  # OpenAI names: renamed (stop, max_completion_tokens) or dropped
}


_ANY_PROVIDER = frozenset().union(*_KNOWN.values())


def known_params(provider: str) -> frozenset[str]:
    """The parameter names `provider` takes (OpenAI's for an OpenAI-compatible endpoint)."""
    return _KNOWN.get(provider, OPENAI_CHAT | OPENAI_RESPONSES)


def check_params(provider: str, params: Mapping[str, Any], where: Callable[[str], str], *, exact: bool) -> None:
    """Raise `model_param` for a parameter `provider` does not know (`where(key)` names its place
    in the spec). With `exact` (an official endpoint) any unknown name is refused; else only a
    near miss of a known one (`temprature`)."""
    if provider == "mock":
        return
    known = known_params(provider)
    for key in params:
        if key in known or (not exact and key in _ANY_PROVIDER):  # `top_k` on vLLM is no typo of `top_p`
            continue
        close = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.8 if not exact else 0.6)
        if not close and not exact:
            continue  # a server's own parameter (vLLM's `min_p`, ...)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        raise ModelParamError(
            f"{where(str(key))}: {provider} has no parameter '{key}'{guess}; every request would be refused",
            hint=f"rename it to `{close[0]}`" if close else f"remove it, or use one of: {', '.join(sorted(known))}",
        )
