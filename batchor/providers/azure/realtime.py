"""Azure OpenAI: the OpenAI adapter over the openai SDK's Azure client.

A model block's `name` is the deployment (sent as the body's `model`; the SDK puts it in the
path, `/openai/deployments/<name>/chat/completions?api-version=...`). The endpoint is the
resource's (`base_url`, else AZURE_OPENAI_ENDPOINT); the credential is an API key
(AZURE_OPENAI_API_KEY, sent as `api-key`) or, with `auth: entra_id`, a Microsoft Entra ID
access token read from AZURE_OPENAI_AD_TOKEN (sent as a bearer token). Requests are Chat
Completions with `max_tokens` and without OpenAI-only fields (`prompt_cache_key`, `service_tier`).
"""

from __future__ import annotations

from typing import Any

from batchor.errors import BaseUrlMissingError
from batchor.providers import base_url, provider_info
from batchor.providers.base import ProviderConfig, read_api_key
from batchor.providers.keys import default_key_env
from batchor.providers.openai.realtime import OpenAIProvider, _http_client

DEFAULT_API_VERSION = "2024-10-21"  # the GA version with Chat Completions, files and batches


class AzureProvider(OpenAIProvider):
    name = "azure"


def azure_client(config: ProviderConfig, *, pooled: bool) -> tuple[Any, str]:
    """The SDK's AsyncAzureOpenAI client for a model block, and the credential it sends (for
    redaction). The credential is read now, so a missing one fails before any request."""
    import openai

    endpoint = base_url("azure", config.base_url)
    if not endpoint:
        raise BaseUrlMissingError(
            "provider 'azure' needs the resource's endpoint",
            hint=f"set {provider_info('azure').base_url_env}=https://<resource>.openai.azure.com, "
            "or add `base_url:` to the model block",
        )
    env = config.api_key_env or default_key_env("azure", config.options) or ""
    secret = read_api_key(env, "azure")
    entra = config.options.get("auth") == "entra_id"
    client = openai.AsyncAzureOpenAI(
        azure_endpoint=endpoint,
        api_version=str(config.options.get("api_version") or DEFAULT_API_VERSION),
        max_retries=0,  # batchor retries; the SDK could create a batch twice
        timeout=config.timeout_s,
        api_key=None if entra else secret,
        azure_ad_token=secret if entra else None,  # sent instead of any key the SDK finds itself
        http_client=_http_client(openai, config.timeout_s) if pooled else None,
    )
    return client, secret


def create(config: ProviderConfig, info: Any) -> AzureProvider:
    client, secret = azure_client(config, pooled=True)
    return AzureProvider(
        client, api="chat", strict=bool(config.options.get("strict")), first_party=False, secret=secret
    )
