"""One base-URL rule (`providers.base_url`): what planning keys requests by, what the adapters send
to and what messages name are the same URL, for the official providers, presets and Azure."""

from __future__ import annotations

import asyncio

import pytest
from conftest import make_spec

from batchor import api
from batchor.engine.reachability import endpoint_of
from batchor.plan.trust import _host
from batchor.providers import base_url, create_provider
from batchor.providers.base import ProviderConfig

ENV = {"OPENAI_BASE_URL": "http://env.invalid/v1", "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com"}


@pytest.mark.parametrize(
    ("provider", "spec_url", "expected"),
    [
        ("openai", "http://spec.invalid/v1", "http://spec.invalid/v1"),  # the spec wins
        ("openai", None, "http://env.invalid/v1"),  # then the SDK's variable
        ("anthropic", None, None),  # nothing set: the SDK's default
        ("openrouter", None, "https://openrouter.ai/api/v1"),  # a preset, never OPENAI_BASE_URL
        ("openrouter", "http://mine.invalid/v1", "http://mine.invalid/v1"),
        ("openai-compatible", None, None),  # no default endpoint: the adapter refuses it
        ("azure", None, "https://res.openai.azure.com"),
    ],
)
def test_the_rule(provider, spec_url, expected):
    assert base_url(provider, spec_url, ENV) == expected


def _step(folder, provider: str, model: str):
    plan = api.plan(str(make_spec(folder, rows=1, provider=provider, model=model)), save=False)
    return plan.header.steps[0]


def test_messages_name_a_presets_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-123456")
    step = _step(tmp_path, "openrouter", "openai/gpt-4.1-mini")
    assert endpoint_of(step) == "https://openrouter.ai/api/v1"  # was "the openrouter API"
    assert _host(step) == "openrouter.ai"


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_planning_and_the_client_agree(tmp_path, monkeypatch, transport):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456")
    step = _step(tmp_path, "openai", "gpt-4.1-mini")
    options = {"transport": transport}
    adapter = create_provider(
        ProviderConfig("openai", base_url=step.base_url, api_key_env="OPENAI_API_KEY", options=options)
    )
    asyncio.run(adapter.aclose())
    sent_to = adapter._poster.base_url if transport == "http" else str(adapter.client.base_url)
    assert step.endpoint == "http://127.0.0.1:9/v1" == sent_to.rstrip("/")
    assert endpoint_of(step) == step.endpoint
