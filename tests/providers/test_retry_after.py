"""How long a 429 asks to wait, from the provider's headers or a gateway's (LiteLLM passes the
upstream's on as `llm_provider-retry-after[-ms]`), and the 429's rate-limit headers; then the
same through each real SDK against the fake."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from batchor.errors import RateLimitedError
from batchor.providers import create_provider
from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.errors_map import parse_retry_after
from batchor.providers.openai.realtime import rate_limit_headers


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the precise one first
        ({"llm_provider-retry-after": "4"}, 4.0),
        ({"llm_provider-retry-after-ms": "250"}, 0.25),
        ({"llm_provider-retry-after-ms": "250", "llm_provider-retry-after": "1"}, 0.25),
        ({"retry-after": "2", "llm_provider-retry-after": "7"}, 2.0),  # the gateway's own wait first
        ({"retry-after-ms": "soon", "retry-after": "5"}, 5.0),  # a bad value falls through
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "tomorrow"}, None),
        ({"llm_provider-retry-after-ms": "x"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers, seconds):
    assert parse_retry_after(headers) == seconds


def test_retry_after_as_an_http_date():
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": later}) <= 31
    assert 28 <= parse_retry_after({"llm_provider-retry-after": later}) <= 31


def test_gateway_rate_limit_headers_are_read():
    assert rate_limit_headers(
        {"llm_provider-x-ratelimit-limit-requests": "500", "llm_provider-x-ratelimit-remaining-requests": "0"}
    ) == {"limit-requests": 500.0, "remaining-requests": 0.0}
    assert rate_limit_headers({"x-ratelimit-limit-requests": "60", "llm_provider-x-ratelimit-limit-requests": "9"}) == {
        "limit-requests": 60.0
    }


MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5"}


def rate_limited(provider: str, calls: int = 1) -> RateLimitedError:
    """The 429 of the last of `calls` requests (the ones before must be answered)."""
    adapter = create_provider(ProviderConfig(provider))
    request = LLMRequest(
        key="k",
        model=MODELS[provider],
        params={"max_tokens": 20},
        messages=({"role": "user", "content": "please THROTTLE me"},),
    )

    async def call() -> None:
        try:
            for _ in range(calls):
                await adapter.complete(request)
        finally:
            await adapter.aclose()

    with pytest.raises(RateLimitedError) as caught:
        asyncio.run(call())
    return caught.value


@pytest.mark.parametrize("provider", MODELS)
@pytest.mark.parametrize("style", ["provider", "gateway"])
def test_each_sdk_reports_the_wait_of_a_429(fake, provider, style):
    fake.configure(fail_matching={"THROTTLE": 429}, retry_after_s=2.5, retry_after_style=style)
    error = rate_limited(provider)
    assert error.retry_after == 2.5
    assert error.rate_limits == {}  # a 429 that says nothing about the limit


@pytest.mark.parametrize("provider", MODELS)
def test_a_429_of_a_spent_limit_carries_the_limit_headers(fake, provider):
    fake.configure(rpm=6, burst_s=1.0)  # one request per 10 s: the second one is refused
    error = rate_limited(provider, calls=2)
    assert error.rate_limits["limit-requests"] == 6
    assert error.rate_limits["remaining-requests"] == 0
    assert error.retry_after and error.retry_after > 5
