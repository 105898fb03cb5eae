"""The parameter lists `validate` checks `model.params` against follow the official SDKs' request
types: every field a user may set there is known (so nothing valid is refused)."""

from __future__ import annotations

from batchor.providers import params

# Fields batchor itself fills in from the spec (messages, schema, system prompt...).
SET_BY_BATCHOR = {
    "messages", "model", "input", "system", "output_config", "stream", "response_json_schema",
    "response_mime_type", "response_schema", "system_instruction",
}  # fmt: skip


def _typed_dict_keys(cls: type) -> set[str]:
    return set().union(*(getattr(base, "__annotations__", {}) for base in cls.__mro__))


def test_openai_lists_cover_the_sdk_request_types():
    from openai.types.chat import completion_create_params
    from openai.types.responses import response_create_params

    chat = _typed_dict_keys(completion_create_params.CompletionCreateParamsNonStreaming)
    responses = _typed_dict_keys(response_create_params.ResponseCreateParamsNonStreaming)
    assert chat - SET_BY_BATCHOR <= params.OPENAI_CHAT
    assert responses - SET_BY_BATCHOR <= params.OPENAI_RESPONSES


def test_anthropic_list_covers_the_sdk_request_type():
    from anthropic.types import message_create_params

    fields = _typed_dict_keys(message_create_params.MessageCreateParamsNonStreaming)
    assert fields - SET_BY_BATCHOR <= params.ANTHROPIC
    assert {"temperature", "top_p", "top_k"} <= params.ANTHROPIC  # documented sampling parameters


def test_gemini_list_is_the_sdk_config():
    from google.genai import types

    assert set(types.GenerateContentConfig.model_fields) - SET_BY_BATCHOR == params.GEMINI


def test_every_provider_takes_the_openai_names_a_shared_spec_uses():
    for provider in ("openai", "anthropic", "gemini", "vllm"):
        assert {"temperature", "max_tokens", "stop", "seed", "top_p"} <= params.known_params(provider)
