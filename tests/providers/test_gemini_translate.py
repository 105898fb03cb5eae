"""Gemini adapter, pure parts: SDK arguments, answer parsing, error mapping, client config."""

from __future__ import annotations

import json

import pytest

from batchor.errors import (
    AuthenticationError,
    ContentRefusedError,
    ContextLengthError,
    InvalidRequestError,
    NoApiKeyError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers import REGISTRY
from batchor.providers.base import ProviderConfig
from batchor.providers.gemini.realtime import client_kwargs, error_for, parse_result, retry_delay, to_body
from tests.providers.helpers import SCHEMA, case, request

INFO = REGISTRY["gemini"]


def test_body_maps_params_and_keeps_system_instruction_apart():
    body = to_body(request(temperature=0.2, top_p=0.8, top_k=4, stop="END", seed=3))
    assert body["model"] == "some-model"
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Review: great"}]}]
    config = body["config"]
    assert config["system_instruction"] == "Classify."
    assert config["max_output_tokens"] == 50 and "max_tokens" not in config
    assert config["stop_sequences"] == ["END"] and "stop" not in config
    assert (config["temperature"], config["top_p"], config["top_k"], config["seed"]) == (0.2, 0.8, 4, 3)
    assert "response_mime_type" not in config


def test_openai_only_params_are_dropped():
    config = to_body(request(response_format={"type": "json_object"}, logit_bias={}, n=1))["config"]
    assert not {"response_format", "logit_bias", "n"} & config.keys()


def test_structured_output_sends_json_mime_type_and_schema():
    config = to_body(request(SCHEMA))["config"]
    assert config["response_mime_type"] == "application/json"
    assert config["response_json_schema"] == SCHEMA


def test_parse_answer_skips_thoughts_and_counts_them_as_output():
    completion = parse_result(case("gemini_answer.json"))
    assert json.loads(completion.text) == {"sentiment": "negative", "score": 1}
    assert completion.input_tokens == 200
    assert completion.cached_input_tokens == 64
    assert completion.output_tokens == 12 + 30
    assert completion.finish_reason == "STOP"
    assert completion.model == "gemini-2.5-flash"


def test_parse_accepts_snake_case_dumps():
    data = {
        "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finish_reason": "STOP"}],
        "usage_metadata": {"prompt_token_count": 3, "candidates_token_count": 1},
    }
    completion = parse_result(data)
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ("hi", 3, 1)


@pytest.mark.parametrize("name", ["gemini_blocked_prompt.json", "gemini_safety_finish.json"])
def test_safety_blocks_are_content_refused(name):
    with pytest.raises(ContentRefusedError):
        parse_result(case(name))


def test_no_candidates_without_a_block_is_transient():
    with pytest.raises(TransientProviderError):
        parse_result({"usageMetadata": {}})


def test_per_minute_429_is_rate_limited_with_retry_info_delay():
    body = case("gemini_429_per_minute.json")
    error = error_for(429, body, body["error"]["message"])
    assert type(error) is RateLimitedError
    assert error.retry_after == 23.0


def test_per_day_429_is_quota_exhausted_even_with_a_delay():
    body = case("gemini_429_per_day.json")
    assert type(error_for(429, body, body["error"]["message"])) is QuotaExhaustedError


def test_quota_failure_without_retry_info_is_quota_exhausted():
    body = case("gemini_429_per_minute.json")
    body["error"]["details"] = [d for d in body["error"]["details"] if not d["@type"].endswith("RetryInfo")]
    assert type(error_for(429, body, "quota")) is QuotaExhaustedError


def test_exceeded_your_current_quota_without_details_is_quota_exhausted():
    message = (
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
    )
    body = {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}}
    assert type(error_for(429, body, message)) is QuotaExhaustedError


def test_exceeded_your_current_quota_with_a_per_minute_retry_is_a_rate_limit():
    body = case("gemini_429_per_minute.json")  # the same words, with a QuotaFailure per minute and RetryInfo
    body["error"]["message"] = "You exceeded your current quota, please check your plan and billing details."
    assert type(error_for(429, body, body["error"]["message"])) is RateLimitedError


def test_bare_429_is_a_rate_limit():
    error = error_for(
        429,
        {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}},
        "Resource exhausted",
    )
    assert type(error) is RateLimitedError and error.retry_after is None


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "Internal error encountered.", TransientProviderError),
        (503, "The model is overloaded. Please try again later.", TransientProviderError),
        (400, 'Invalid JSON payload received. Unknown name "foo"', InvalidRequestError),
        (
            400,
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ContextLengthError,
        ),
        (403, "Permission denied on resource project.", AuthenticationError),
    ],
)
def test_error_mapping(status, message, expected):
    assert type(error_for(status, {"error": {"code": status, "message": message}}, message)) is expected


def test_invalid_key_is_an_authentication_error():
    body = case("gemini_400_bad_key.json")
    assert type(error_for(400, body, body["error"]["message"])) is AuthenticationError


def test_retry_delay_parsing():
    assert retry_delay([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]) == 1.5
    assert retry_delay([{"@type": "other"}]) is None


# --- client configuration -------------------------------------------------------------------


@pytest.fixture
def no_google_env(monkeypatch):
    for name in (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_VERTEX_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_developer_api_key_from_gemini_then_google_variable(no_google_env):
    config = ProviderConfig("gemini", api_key_env="GEMINI_API_KEY", timeout_s=30)
    no_google_env.setenv("GOOGLE_API_KEY", "google-key-123456")
    kwargs = client_kwargs(config, INFO)
    assert kwargs["api_key"] == "google-key-123456"
    assert kwargs["http_options"] == {"timeout": 30000, "retry_options": {"attempts": 1}}
    no_google_env.setenv("GEMINI_API_KEY", "gemini-key-123456")
    assert client_kwargs(config, INFO)["api_key"] == "gemini-key-123456"


def test_missing_developer_key_names_the_variable(no_google_env):
    with pytest.raises(NoApiKeyError, match="GEMINI_API_KEY"):
        client_kwargs(ProviderConfig("gemini"), INFO)


def test_vertex_ai_config_needs_no_api_key(no_google_env):
    config = ProviderConfig(
        "gemini",
        api_key_env="GEMINI_API_KEY",
        base_url="https://proxy.example/gemini",
        options={"vertexai": True, "project": "my-project", "location": "europe-west4", "api_version": "v1"},
    )
    kwargs = client_kwargs(config, INFO)
    assert kwargs == {
        "vertexai": True,
        "project": "my-project",
        "location": "europe-west4",
        "http_options": {
            "timeout": 60000,
            "retry_options": {"attempts": 1},
            "base_url": "https://proxy.example/gemini",
            "api_version": "v1",
        },
    }


def test_vertex_ai_from_the_sdk_environment_variable(no_google_env):
    no_google_env.setenv("GOOGLE_GENAI_USE_VERTEXAI", "true")
    assert client_kwargs(ProviderConfig("gemini"), INFO)["vertexai"] is True


def test_vertex_ai_client_is_built_without_network(no_google_env):
    from google import genai

    config = ProviderConfig("gemini", options={"vertexai": True, "project": "my-project", "location": "us-central1"})
    client = genai.Client(**client_kwargs(config, INFO))
    assert client.vertexai
    assert client._api_client.project == "my-project"
    assert client._api_client.location == "us-central1"


TOOL = {"name": "record", "description": "Record it.", "parameters_json_schema": SCHEMA}
REST_CONFIGS = [
    {},
    {"temperature": 0, "max_output_tokens": 50},
    {"temperature": 0.2, "top_p": 1, "top_k": 40, "stop_sequences": ["END"], "seed": 3, "presence_penalty": 0},
    {"frequency_penalty": 0.5, "candidate_count": 1, "response_logprobs": True, "logprobs": 2},
    {"response_mime_type": "application/json", "response_json_schema": SCHEMA, "max_output_tokens": 10},
    {
        "tools": [{"function_declarations": [TOOL]}],
        "tool_config": {"function_calling_config": {"mode": "ANY", "allowed_function_names": ["record"]}},
    },
    {
        "tools": [{"function_declarations": [{**TOOL, "description": None}]}],
        "tool_config": {"function_calling_config": {"mode": "AUTO"}},
    },
    {"thinking_config": {"thinking_budget": 0, "include_thoughts": False}, "labels": {"team": "a"}},
    {"cached_content": "cachedContents/abc", "temperature": 1.5},
]


@pytest.mark.parametrize("config", REST_CONFIGS)
def test_the_rest_config_is_the_sdks_byte_for_byte(config):
    """The plain-HTTP path converts common configs itself (no google-genai import): names, order
    and types exactly as the SDK's config type gives them."""
    from batchor.providers.gemini.batch import rest_request
    from batchor.providers.gemini.rest_config import rest_config

    sdk = {k: v for k, v in rest_request({"contents": [], "config": config}).items() if k != "contents"}
    assert json.dumps(rest_config(config)) == json.dumps(sdk)


@pytest.mark.parametrize(
    "config",
    [
        {"temperature": "0.5"},
        {"temperature": True},
        {"max_output_tokens": 5.0},
        {"bogus": 1},
        {"thinking_config": {"thinking_level": "LOW"}},
    ],
)
def test_a_config_it_does_not_know_is_left_to_the_sdk(config):
    from batchor.providers.gemini.rest_config import rest_config

    assert rest_config(config) is None


def test_a_plain_http_gemini_body_needs_no_google_genai():
    """Importing google-genai costs a realtime apply more than a CPU-second of start-up."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom batchor.providers.base import LLMRequest\n"
        "from batchor.providers.gemini.realtime import rest_body, to_body\n"
        f"schema = {SCHEMA!r}\n"
        "messages = ({'role': 'system', 'content': 'Classify.'}, {'role': 'user', 'content': 'great'})\n"
        "request = LLMRequest('k', 'gemini-2.5-flash', messages, {'max_tokens': 50, 'temperature': 0}, schema, 's')\n"
        "rest = rest_body(to_body(request))\n"
        "print(rest['generationConfig']['maxOutputTokens'], 'google.genai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["50", "False"]
