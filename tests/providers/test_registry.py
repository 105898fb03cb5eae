"""The registry and adapter creation: keys read up front, presets, base URLs."""

from __future__ import annotations

import asyncio

import pytest

from batchor.errors import BaseUrlMissingError, NoApiKeyError, UnknownProviderError
from batchor.providers import REGISTRY, create_provider, provider_info
from batchor.providers.base import ProviderConfig

PRESETS = {  # name: (base URL, key variable) as each service documents them
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "vllm": ("http://localhost:8000/v1", None),
    "ollama": ("http://localhost:11434/v1", None),
    "llamacpp": ("http://localhost:8080/v1", None),
    "openai-compatible": (None, None),
}


def _create(provider: str, **config):
    info = provider_info(provider)
    config.setdefault("api_key_env", info.key_env)
    adapter = create_provider(ProviderConfig(provider, **config))
    asyncio.run(adapter.aclose())
    return adapter


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets(name):
    info = REGISTRY[name]
    assert (info.base_url, info.key_env) == PRESETS[name]
    assert info.adapter == "openai" and not info.first_party


@pytest.mark.parametrize(
    ("provider", "env"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
        ("groq", "GROQ_API_KEY"),
    ],
)
def test_missing_key_fails_at_create_time_naming_the_variable(monkeypatch, provider, env):
    for name in (env, "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(NoApiKeyError, match=env) as caught:
        _create(provider)
    assert caught.value.code == "no_api_key"
    # the hint's other variable is one the spec may name: another name needs allow_key_env
    assert "allow_key_env: true" in caught.value.hint


def _sent_to(adapter) -> tuple[str, str]:
    """Where an adapter sends, and the key it sends: its SDK client's, or its plain HTTP poster's."""
    poster = getattr(adapter, "_poster", None)
    if poster is None:
        return str(adapter.client.base_url), adapter.client.api_key
    header = poster.header("Authorization") or poster.header("x-goog-api-key") or ""
    return poster.base_url, header.removeprefix("Bearer ")


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_spec_key_variable_wins(monkeypatch, transport):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-other-123456")
    adapter = _create("anthropic", api_key_env="MY_CLAUDE_KEY", options={"transport": transport})
    assert _sent_to(adapter)[1] == "sk-ant-other-123456"


def test_openai_compatible_needs_a_base_url():
    with pytest.raises(BaseUrlMissingError, match="base_url") as caught:
        _create("openai-compatible")
    assert caught.value.code == "base_url_missing"


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_openai_compatible_with_base_url_and_no_key_never_sends_the_openai_key(monkeypatch, transport):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-123456")
    options = {"transport": transport}
    url, key = _sent_to(_create("openai-compatible", base_url="http://127.0.0.1:9/v1", options=options))
    assert url.startswith("http://127.0.0.1:9/v1") and key != "sk-real-openai-key-123456"
    url, key = _sent_to(_create("ollama", options=options))
    assert url.startswith("http://localhost:11434/v1") and key != "sk-real-openai-key-123456"


@pytest.mark.parametrize("transport", ["http", "sdk"])
def test_preset_base_url_wins_over_openai_base_url(monkeypatch, transport):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.invalid/v1")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-123456")
    adapter = _create("openrouter", options={"transport": transport})
    assert _sent_to(adapter)[0].startswith("https://openrouter.ai/api/v1")


def test_unknown_provider():
    with pytest.raises(UnknownProviderError):
        provider_info("nope")
