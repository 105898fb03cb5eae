"""Provider registry: one word in the spec picks an adapter, a key variable and a base URL.

SDKs are imported lazily inside each adapter module, so planning and validation never import
them and never need a key.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from batchor.errors import UnknownProviderError
from batchor.providers.base import Provider, ProviderConfig


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    adapter: str  # package under batchor.providers (its `realtime` and `batch` modules)
    key_env: str | None  # default API key variable (None: no key needed)
    base_url: str | None = None  # default base URL (OpenAI-compatible presets)
    first_party: bool = True  # False: base_url is part of the request identity
    batch: bool = False
    structured: str = "json_schema"  # how structured output is sent
    base_url_env: str | None = None  # the base-URL variable its SDK reads (first-party providers only)
    official_url: str | None = None  # the SDK's default base URL: writing it out is the same endpoint
    prices: str | None = None  # its provider id in the price table (genai-prices); None: not listed there
    facts: str | None = None  # folder whose facts.py describes it to planning (providers/facts.py)
    schema: str | None = "openai"  # whose JSON Schema subset its structured outputs take (schema_adapt.py)
    self_hosted: bool = False  # a server the user runs: serves any model it loads, bills nothing per token
    bare: bool = False  # an endpoint that could be any server: only the spec can say its models and prices


_COMPAT = "openai"  # OpenAI-compatible endpoints reuse the OpenAI adapter
MOCK = "mock"  # the offline rehearsal provider `--mock` answers with
# Presets: endpoints and key variables as each service documents them. Self-hosted servers
# (vllm, ollama, llamacpp) and a bare `openai-compatible` endpoint need no key by default; set
# `api_key_env` when yours does (OPENAI_API_KEY is never sent to another server on its own).

REGISTRY: dict[str, ProviderInfo] = {
    "openai": ProviderInfo(
        "openai",
        "openai",
        "OPENAI_API_KEY",
        batch=True,
        base_url_env="OPENAI_BASE_URL",
        official_url="https://api.openai.com/v1",
        prices="openai",
        facts="openai",
    ),
    "anthropic": ProviderInfo(
        "anthropic",
        "anthropic",
        "ANTHROPIC_API_KEY",
        batch=True,
        structured="output_config json_schema (forced tool for older models)",
        base_url_env="ANTHROPIC_BASE_URL",
        official_url="https://api.anthropic.com",
        prices="anthropic",
        facts="anthropic",
        schema="anthropic",
    ),
    "gemini": ProviderInfo(
        "gemini",
        "gemini",
        "GEMINI_API_KEY",
        batch=True,  # or GOOGLE_API_KEY
        structured="response_json_schema",
        base_url_env="GOOGLE_GEMINI_BASE_URL",
        official_url="https://generativelanguage.googleapis.com",
        prices="google",
        facts="gemini",
        schema="gemini",
    ),
    # Azure OpenAI: `name` is the deployment; the endpoint is the resource's: Azure has no default one.
    "azure": ProviderInfo(
        "azure", "azure", "AZURE_OPENAI_API_KEY", batch=True, base_url_env="AZURE_OPENAI_ENDPOINT", facts="azure"
    ),
    # Amazon Bedrock's Converse API: credentials and region from AWS's usual sources, not one key variable.
    "bedrock": ProviderInfo(
        "bedrock",
        "bedrock",
        None,
        batch=True,  # batch inference: S3 files and an IAM role from the model block's options
        structured="outputConfig json_schema (forced tool for other models)",
        base_url_env="AWS_ENDPOINT_URL_BEDROCK_RUNTIME",  # default: the region's bedrock-runtime endpoint
        prices="aws",
        schema="anthropic",  # Bedrock's structured outputs take Claude's subset
        facts="bedrock",
    ),
    MOCK: ProviderInfo(MOCK, "mock", None, structured="generated locally", facts="mock", schema=None),
    "openai-compatible": ProviderInfo("openai-compatible", _COMPAT, None, first_party=False, bare=True),
    "openrouter": ProviderInfo(
        "openrouter", _COMPAT, "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1", False, prices="openrouter"
    ),
    "xai": ProviderInfo("xai", _COMPAT, "XAI_API_KEY", "https://api.x.ai/v1", False, prices="x-ai"),
    "together": ProviderInfo(
        "together", _COMPAT, "TOGETHER_API_KEY", "https://api.together.xyz/v1", False, prices="together"
    ),
    "groq": ProviderInfo("groq", _COMPAT, "GROQ_API_KEY", "https://api.groq.com/openai/v1", False, prices="groq"),
    "vllm": ProviderInfo("vllm", _COMPAT, None, "http://localhost:8000/v1", False, self_hosted=True),
    "ollama": ProviderInfo("ollama", _COMPAT, None, "http://localhost:11434/v1", False, self_hosted=True),
    "llamacpp": ProviderInfo("llamacpp", _COMPAT, None, "http://localhost:8080/v1", False, self_hosted=True),
}


# Providers whose SDK finds its credentials itself (a chain of sources, not one key variable).
CREDENTIAL_CHAINS = {"bedrock": "AWS credentials"}
# Key variables a provider's own SDK or documentation also reads, besides `key_env`.
_OTHER_KEY_ENVS = {"gemini": ("GOOGLE_API_KEY",), "azure": ("AZURE_OPENAI_AD_TOKEN",)}


def provider_key_envs(name: str) -> tuple[str, ...]:
    """The variable names a spec may give as `api_key_env` for this provider without saying
    `allow_key_env: true`: the provider's own (a spec must not send, say, AWS_SECRET_ACCESS_KEY)."""
    info = REGISTRY.get(name)
    own = (info.key_env,) if info and info.key_env else ()
    return own + _OTHER_KEY_ENVS.get(name, ())


def provider_info(name: str) -> ProviderInfo:
    try:
        return REGISTRY[name]
    except KeyError:
        from batchor.providers.clouds import unknown_provider_help  # imports keys, which imports this

        message, hint = unknown_provider_help(name, REGISTRY)
        raise UnknownProviderError(message, hint=hint) from None


def base_url(provider: str, spec_url: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """The one base-URL rule: the spec's `base_url`, else the preset's, else (a first-party
    provider only) the base-URL variable its SDK reads; None leaves the SDK's own default. Planning
    keys requests by it (plan/endpoint.py) and the adapters send to it, so the two cannot differ."""
    info = provider_info(provider)
    if spec_url or info.base_url:
        return spec_url or info.base_url
    if info.first_party and info.base_url_env:
        return env.get(info.base_url_env) or None
    return None


def create_provider(config: ProviderConfig) -> Provider:
    """Instantiate the adapter for a resolved provider config (imports its SDK now)."""
    info = provider_info(config.provider)
    module = importlib.import_module(f"batchor.providers.{info.adapter}.realtime")
    provider: Provider = module.create(config, info)
    return provider
