"""Which environment variables can hold the API key a model block needs.

Asked before any call (no SDK imported, no key read), so CI can say which secrets a set of specs
needs and which are missing instead of failing on the first request of a paid run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from batchor.providers import provider_info

GEMINI_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")  # the order providers/gemini/realtime.py reads them in
AZURE_TOKEN_ENV = "AZURE_OPENAI_AD_TOKEN"  # a Microsoft Entra ID access token (the openai SDK's name)


def key_envs(provider: str, api_key_env: str | None, options: Mapping[str, Any]) -> tuple[str, ...]:
    """The variables any one of which is enough (empty: this block needs no key).

    `api_key_env` is the name the plan pinned: the spec's own, else the provider's default. Gemini
    reads GEMINI_API_KEY, then GOOGLE_API_KEY; on Vertex AI it uses Application Default Credentials
    unless the spec names a key variable of its own (express mode)."""
    info = provider_info(provider)
    own = api_key_env if api_key_env and api_key_env != info.key_env else None
    if provider == "gemini":
        if own:
            return (own,)
        return () if gemini_on_vertex(options) else GEMINI_KEY_ENVS
    if provider == "azure" and not own:
        return (default_key_env(provider, options) or "",)
    return (api_key_env,) if api_key_env else ()


def default_key_env(provider: str, options: Mapping[str, Any]) -> str | None:
    """The variable a model block reads its credential from when the spec names none: Azure's
    Entra ID token (`auth: entra_id`) or its API key; else the provider's key variable."""
    if provider == "azure" and options.get("auth") == "entra_id":
        return AZURE_TOKEN_ENV
    return provider_info(provider).key_env


def gemini_on_vertex(options: Mapping[str, Any]) -> bool:
    """Vertex AI (the spec's `vertexai` option, else GOOGLE_GENAI_USE_VERTEXAI), not the Developer API."""
    if "vertexai" in options:
        return bool(options["vertexai"])
    return os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in ("1", "true")
