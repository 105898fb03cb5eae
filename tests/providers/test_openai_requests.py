"""The OpenAI adapter's requests, over plain HTTP and through the SDK from one options template
(providers/openai/realtime.py `_Posts`), against the fake server."""

from __future__ import annotations

import asyncio
import json

import pytest
from openai._models import FinalRequestOptions

from batchor.providers import create_provider
from batchor.providers.base import LLMRequest, ProviderConfig
from batchor.providers.openai.realtime import OpenAIProvider, _Posts
from tests.fakes.answers import prompt_key
from tests.providers.helpers import SCHEMA


def _request(number: int) -> LLMRequest:
    messages = ({"role": "system", "content": "Classify."}, {"role": "user", "content": f"Review {number}"})
    return LLMRequest(f"k{number}", "gpt-4.1-mini", messages, {"max_tokens": 20 + number}, SCHEMA, "classify")


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_requests_in_flight_together_each_send_their_own_body(fake, transport):
    options = {"api": "chat", "transport": transport}
    provider = create_provider(ProviderConfig("openai", base_url=fake.openai_base_url, options=options))
    assert isinstance(provider, OpenAIProvider)

    async def send_all() -> list:
        try:
            return await asyncio.gather(*(provider.complete(_request(n)) for n in range(24)))
        finally:
            await provider.aclose()

    answers = asyncio.run(send_all())
    stats = fake.stats()
    assert stats["by_prompt"] == {prompt_key(f"Review {n}"): 1 for n in range(24)}
    sent = {body["messages"][1]["content"]: body for body in stats["bodies"]}
    for number in range(24):  # the body of each request, none of another's
        if f"Review {number}" in sent:
            assert sent[f"Review {number}"]["max_completion_tokens"] == 20 + number
    assert all(json.loads(answer.text).keys() == {"sentiment", "score"} for answer in answers)
    assert all(answer.input_tokens > 0 and answer.usage_known for answer in answers)


def _fields(options: FinalRequestOptions) -> dict[str, str]:
    """Every field but the idempotency key, by repr (the SDK's NOT_GIVEN markers compare by identity)."""
    return {name: repr(value) for name, value in options.model_dump().items() if name != "idempotency_key"}


def test_options_are_those_post_builds_with_a_key_of_their_own():
    posts = _Posts()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    first, second = posts.options("/chat/completions", body), posts.options("/chat/completions", {"model": "other"})
    built = FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=body)
    assert _fields(first) == _fields(built)
    assert first.json_data is body and second.json_data == {"model": "other"}
    assert first.idempotency_key and second.idempotency_key and first.idempotency_key != second.idempotency_key
    assert posts.options("/responses", body).url == "/responses" and first.url == "/chat/completions"
    assert first.json_data is body  # the template is never changed


def test_an_sdk_without_the_options_class_sends_through_its_public_post(fake, monkeypatch):
    """`_Posts` copies a class the SDK does not export; an SDK that renames it still answers."""
    import openai._models

    monkeypatch.delattr(openai._models, "FinalRequestOptions")
    options = {"api": "chat", "transport": "sdk"}
    provider = create_provider(ProviderConfig("openai", base_url=fake.openai_base_url, options=options))

    async def send() -> object:
        try:
            return await provider.complete(_request(1))
        finally:
            await provider.aclose()

    answer = asyncio.run(send())
    assert json.loads(answer.text).keys() == {"sentiment", "score"}
    assert fake.stats()["bodies"][0]["max_completion_tokens"] == 21
