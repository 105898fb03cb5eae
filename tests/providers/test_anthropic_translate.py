"""Anthropic adapter, pure parts: request body, answer parsing, error mapping."""

from __future__ import annotations

import json

import pytest

from batchor.errors import (
    ContentRefusedError,
    ContextLengthError,
    InvalidRequestError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.providers.anthropic.realtime import (
    OUTPUT_CONFIG,
    TOOL,
    error_for,
    parse_result,
    rate_limit_headers,
    structured_mode,
    to_body,
)
from tests.providers.helpers import SCHEMA, case, request


def test_text_body_keeps_system_apart_and_passes_sampling_params():
    body = to_body(request(temperature=0, top_p=0.9, top_k=5, stop=["END"]))
    assert body["system"] == "Classify."
    assert body["messages"] == [{"role": "user", "content": "Review: great"}]
    assert body["max_tokens"] == 50
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0, 0.9, 5)
    assert body["stop_sequences"] == ["END"]
    assert "output_config" not in body and "tools" not in body


def test_openai_only_params_are_dropped_without_error():
    body = to_body(
        request(
            seed=7,
            frequency_penalty=0.5,
            presence_penalty=0.1,
            logit_bias={"1": 2},
            response_format={"type": "json_object"},
            n=1,
        )
    )
    for name in ("seed", "frequency_penalty", "presence_penalty", "logit_bias", "response_format", "n"):
        assert name not in body


def test_a_single_stop_string_becomes_a_list():
    assert to_body(request(stop="###"))["stop_sequences"] == ["###"]


def test_no_system_message_means_no_system_field():
    assert "system" not in to_body(request(system=None))


def test_structured_output_uses_output_config():
    body = to_body(request(SCHEMA))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "tools" not in body


def test_tool_mode_forces_one_tool_carrying_the_schema():
    body = to_body(request(SCHEMA), structured=TOOL)
    assert body["tools"][0]["name"] == "classify"
    assert body["tools"][0]["input_schema"] == SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": "classify"}
    assert "output_config" not in body


@pytest.mark.parametrize(
    ("model", "strict", "option", "mode"),
    [
        ("claude-haiku-4-5", True, None, OUTPUT_CONFIG),
        ("claude-sonnet-4-5-20250929", True, None, OUTPUT_CONFIG),
        ("claude-opus-4-1", True, None, OUTPUT_CONFIG),
        ("claude-3-5-haiku-latest", True, None, TOOL),
        ("claude-3-7-sonnet-20250219", True, None, TOOL),
        ("claude-sonnet-4-20250514", True, None, TOOL),
        ("claude-haiku-4-5", False, None, TOOL),  # schema the API cannot enforce: guidance via a tool
        ("claude-haiku-4-5", True, "tool", TOOL),
        ("claude-3-5-haiku-latest", True, "output_config", OUTPUT_CONFIG),
    ],
)
def test_structured_mode_choice(model, strict, option, mode):
    assert structured_mode(model, strict=strict, option=option) == mode


def test_parse_text_answer_with_cache_usage():
    completion = parse_result(case("anthropic_message.json"))
    assert json.loads(completion.text) == {"sentiment": "positive", "score": 4}
    # input_tokens excludes cache reads and writes; all three are input the model read
    assert completion.input_tokens == 120 + 30 + 50
    assert completion.cached_input_tokens == 50
    assert completion.output_tokens == 14
    assert completion.finish_reason == "end_turn"
    assert completion.model == "claude-haiku-4-5-20251001"
    assert completion.raw["id"] == "msg_01ABC"


def test_parse_tool_answer_returns_the_tool_input_as_json():
    completion = parse_result(case("anthropic_tool_use.json"))
    assert json.loads(completion.text) == {"sentiment": "mixed", "score": 3}
    assert completion.finish_reason == "tool_use"


def test_refusal_is_content_refused():
    with pytest.raises(ContentRefusedError):
        parse_result(case("anthropic_refusal.json"))


def test_rate_limit_headers_are_read():
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-tokens-remaining": "9000",
        "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:00Z",
    }
    assert rate_limit_headers(headers) == {
        "limit-requests": 50.0,
        "remaining-requests": 49.0,
        "remaining-tokens": 9000.0,
    }


def _body(kind: str, message: str, error_code: str | None = None) -> dict:
    error = {"type": kind, "message": message}
    if error_code:
        error["details"] = {"error_code": error_code}
    return {"type": "error", "error": error}


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, _body("rate_limit_error", "Number of requests has exceeded your rate limit"), RateLimitedError),
        (402, _body("billing_error", "Your credit balance is too low"), QuotaExhaustedError),
        (
            400,
            _body("invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
            QuotaExhaustedError,
        ),
        (
            429,
            _body(
                "rate_limit_error", "You have reached your specified API usage limits.", "enforced_spend_limit_reached"
            ),
            QuotaExhaustedError,
        ),
        (529, _body("overloaded_error", "Overloaded"), TransientProviderError),
        (500, _body("api_error", "Internal server error"), TransientProviderError),
        (400, _body("invalid_request_error", "max_tokens: Field required"), InvalidRequestError),
        (400, _body("invalid_request_error", "prompt is too long: 214000 tokens > 200000 maximum"), ContextLengthError),
    ],
)
def test_error_mapping(status, body, expected):
    error = error_for(status, body, body["error"]["message"], 2.0)
    assert type(error) is expected
    if expected is RateLimitedError:
        assert error.retry_after == 2.0
