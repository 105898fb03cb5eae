"""Plain HTTP against each provider's SDK (providers/http_post.py): the same request sent both
ways to the fake, under every fault the fake can give a generation call, must be sent with the
same body and come back as the same answer or the same batchor error.

The SDK path is the reference: `transport: sdk` keeps it selectable, and these cells are where
it is still driven for generation (the other provider tests run on the default, plain HTTP).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from batchor import api
from batchor.errors import BatchorError, ModelOptionError
from batchor.providers import create_provider
from batchor.providers.anthropic.realtime import AnthropicHttpProvider
from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.gemini.realtime import GeminiHttpProvider
from batchor.providers.openai.realtime import OpenAIHttpProvider
from batchor.state import open_state
from tests.providers.helpers import SCHEMA, provider_spec

# (provider, model, options): every wire format a realtime step can send
ADAPTERS = {
    "openai-chat": ("openai", "gpt-4.1-mini", {"api": "chat"}),
    "openai-responses": ("openai", "gpt-4.1-mini", {"api": "responses"}),
    "anthropic": ("anthropic", "claude-haiku-4-5", {}),
    "anthropic-tool": ("anthropic", "claude-3-5-haiku-latest", {}),
    "gemini": ("gemini", "gemini-2.5-flash", {}),
}
HTTP_CLASSES = {"openai": OpenAIHttpProvider, "anthropic": AnthropicHttpProvider, "gemini": GeminiHttpProvider}
# What the fake can do to one generation call (`fail_matching`), plus a plain answer.
FAULTS = [
    None,
    400,
    401,
    403,
    404,
    408,
    409,
    429,
    500,
    503,
    529,
    "quota",
    "malformed",
    "garbled",
    "cut",
    "blocked",
    "empty",
    "tool_call",
]


def _base_url(fake: Any, provider: str) -> str:
    return {"openai": fake.openai_base_url, "anthropic": fake.anthropic_base_url, "gemini": fake.gemini_base_url}[
        provider
    ]


def _request(model: str, prompt: str, schema: dict[str, Any] | None) -> LLMRequest:
    messages = ({"role": "system", "content": "Classify."}, {"role": "user", "content": prompt})
    return LLMRequest("k1", model, messages, {"max_tokens": 50, "temperature": 0.2}, schema, "classify")


def _outcome(provider: str, options: dict[str, Any], base_url: str, request: LLMRequest, timeout_s: float) -> Any:
    """What one call gave, as comparable data: the answer's fields, or the error's."""
    adapter = create_provider(ProviderConfig(provider, base_url=base_url, timeout_s=timeout_s, options=options))
    http = isinstance(adapter, HTTP_CLASSES[provider])
    assert http == (options.get("transport") == "http"), type(adapter)

    async def call() -> Any:
        try:
            return _answer(await adapter.complete(request))
        except BatchorError as exc:
            billed = getattr(exc, "completion", None)
            return (
                type(exc).__name__,
                exc.code,
                getattr(exc, "status", None),
                getattr(exc, "retry_after", None),
                getattr(exc, "rate_limits", None),
                getattr(exc, "timed_out", False),
                exc.message,
                None if billed is None else _answer(billed),
            )
        finally:
            await adapter.aclose()

    return asyncio.run(call())


def _answer(completion: Any) -> dict[str, Any]:
    return {
        "text": completion.text,
        "tokens": (completion.input_tokens, completion.output_tokens, completion.cached_input_tokens),
        "cache_write": (completion.cache_write_tokens, completion.cache_write_1h_tokens),
        "finish": completion.finish_reason,
        "model": completion.model,
        "usage_known": completion.usage_known,
        "lost": completion.lost,
        "tier": completion.service_tier,
        "tool_calls": completion.tool_calls,
        "rate_limits": completion.rate_limits,
        "raw": completion.raw,
    }


def _both(fake: Any, target: str, prompt: str, *, schema: Any = SCHEMA, timeout_s: float = 10.0) -> list[Any]:
    """The outcome over plain HTTP, then through the SDK, with the body the fake received each time."""
    provider, model, options = ADAPTERS[target]
    seen = []
    for transport in ("http", "sdk"):
        before = len(fake.stats()["bodies"])
        outcome = _outcome(
            provider,
            {**options, "transport": transport},
            _base_url(fake, provider),
            _request(model, prompt, schema),
            timeout_s,
        )
        bodies = fake.stats()["bodies"][before:]
        seen.append((outcome, bodies))
    return seen


_DRAWN = {"id", "created", "created_at", "responseId"}
_DRAWN_TEXT = re.compile(r'(chatcmpl-|resp_|msg_|call_|toolu_)\w+|"(created|created_at)": ?\d+')


def _without_ids(value: Any) -> Any:
    """`value` with the ids and times the fake draws per answer set aside."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _DRAWN}
    if isinstance(value, (list, tuple)):
        return [_without_ids(v) for v in value]
    if isinstance(value, str):  # a body cut short keeps them in its text
        return _DRAWN_TEXT.sub("<drawn>", value)
    return value


@pytest.mark.parametrize("fault", FAULTS, ids=str)
@pytest.mark.parametrize("target", sorted(ADAPTERS))
def test_a_generation_call_gives_the_same_outcome_over_http_and_through_the_sdk(fake, target, fault):
    prompt = f"Review {fault}: the battery lasts two days"
    fake.configure(fail_matching={} if fault is None else {prompt: fault}, retry_after_s=0.25)
    (http, http_bodies), (sdk, sdk_bodies) = _both(fake, target, prompt)
    assert _without_ids(http) == _without_ids(sdk)
    assert http_bodies == sdk_bodies and len(http_bodies) == 1  # the same JSON went out, once each
    if fault is None:
        assert isinstance(http, dict) and json.loads(http["text"]).keys() == {"sentiment", "score"}
    elif isinstance(fault, int):
        assert isinstance(http, tuple) and http[2] == fault  # an error of that status, not an answer


@pytest.mark.parametrize("target", ["openai-chat", "anthropic", "gemini"])
def test_text_answers_and_rate_limit_headers_are_the_same_both_ways(fake, target):
    fake.configure(rpm=100_000)  # the fake then sends its rate-limit headers
    (http, http_bodies), (sdk, sdk_bodies) = _both(fake, target, "Review: great", schema=None)
    assert _without_ids(http) == _without_ids(sdk)
    assert http_bodies == sdk_bodies
    assert http["text"].startswith("echo: ")


@pytest.mark.parametrize("target", ["openai-chat", "anthropic", "gemini"])
def test_an_unreachable_endpoint_is_the_same_error_both_ways(fake, target):
    provider, model, options = ADAPTERS[target]
    url = "http://127.0.0.1:9/v1" if provider == "openai" else "http://127.0.0.1:9"
    outcomes = [
        _outcome(provider, {**options, "transport": t}, url, _request(model, "Review", SCHEMA), 5.0)
        for t in ("http", "sdk")
    ]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1] == "provider_unreachable" and "connection refused" in outcomes[0][6]


@pytest.mark.slow  # waits for the client's timeout, twice per provider
@pytest.mark.parametrize("target", ["openai-chat", "anthropic", "gemini"])
def test_a_call_that_times_out_is_the_same_error_both_ways(fake, target):
    fake.configure(fail_matching={"Review slow": "timeout"}, timeout_hold_s=5.0)
    (http, _), (sdk, _) = _both(fake, target, "Review slow", timeout_s=0.5)
    assert http == sdk and http[5] is True  # timed out, counted towards an unresponsive endpoint


def test_an_unknown_transport_is_refused_at_plan_time(fake, workdir):
    spec = provider_spec(workdir, "openai", "gpt-4.1-mini", options={"transport": "curl"})
    with pytest.raises(ModelOptionError, match="transport"):
        api.plan(spec, state=str(workdir / "state.duckdb"))


FAULTED_ROWS = {
    "review number 1": 503,
    "review number 2": 400,
    "review number 3": "garbled",
    "review number 4": "blocked",
}


def _ledger(state: Path) -> tuple[list[tuple], list[tuple]]:
    store = open_state(str(state))
    try:
        rows = store.execute(
            "SELECT request_key, status, error_code, attempts, output FROM results ORDER BY request_key"
        )
        attempts = store.execute(
            "SELECT request_key, attempt, outcome, status_code, error, input_tokens, output_tokens, cost_usd, "
            "estimated FROM attempts ORDER BY request_key, attempt"
        )
        return rows, attempts
    finally:
        store.close()


@pytest.mark.parametrize("target", ["openai-chat", "anthropic", "gemini"])
def test_an_apply_records_the_same_rows_and_ledger_over_http_and_through_the_sdk(fake, workdir, target):
    provider, model, options = ADAPTERS[target]
    fake.configure(fail_matching=FAULTED_ROWS, retry_after_s=0.01)
    ledgers = []
    for transport in ("http", "sdk"):
        folder = workdir / transport
        folder.mkdir()
        block = {"options": {"transport": transport}} | ({"api": options["api"]} if "api" in options else {})
        spec = provider_spec(folder, provider, model, rows=8, **block)
        outcome = api.apply(
            spec,
            state=str(folder / "state.duckdb"),
            output=folder / "out.csv",
            handle_signals=False,
            limits={"max_attempts": 2},
        )
        assert outcome.status == "partial", outcome.stop_reason
        ledgers.append(_ledger(folder / "state.duckdb"))
    assert ledgers[0] == ledgers[1]
    rows, attempts = ledgers[0]
    failed = sorted(code for _, status, code, *_ in rows if status == "failed")
    assert failed == sorted(["invalid_request", "content_refused", "provider_unavailable", "provider_unavailable"])
    assert len(attempts) == len(rows) + 2  # the 503 and the garbled answer were asked twice
