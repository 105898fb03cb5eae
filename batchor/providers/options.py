"""What each provider reads from the spec's `model.options`, so a misspelt option fails before any call.

The adapters read these keys (gemini/realtime.py `client_kwargs`, gemini/batch.py `INLINE_OPTION`,
anthropic/realtime.py `structured`, the batch engine `keep_provider_files`); anything else would be
silently ignored, so planning refuses it and lists the options the provider knows.
`api` and `strict` are not options: they come from `model.api` and the adapted schema.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from batchor.errors import ModelOptionError
from batchor.providers import REGISTRY
from batchor.providers.clouds import option_missing


@dataclass(frozen=True)
class ProviderOption:
    name: str
    kind: type  # bool, str or int
    help: str
    choices: tuple[str, ...] = ()


_KEEP_FILES = ProviderOption(
    "keep_provider_files",
    bool,
    "keep batch input and result files at the provider (default: deleted once the answers are stored)",
)
_TRANSPORT = ProviderOption(
    "transport",
    str,
    "how realtime requests are sent: `http` (default: plain HTTP, a third of the CPU per request) or "
    "the provider's official `sdk`; batches and files always go through the SDK",
    ("http", "sdk"),
)
# Adapters whose realtime requests can go over plain HTTP: OpenAI's (OpenAI and every
# OpenAI-compatible preset), Anthropic's, Gemini's Developer API (Vertex AI and Azure keep their
# SDKs' sign-in). By adapter, so a new OpenAI-compatible registry entry gets it with no edit here.
_PLAIN_HTTP_ADAPTERS = frozenset({"openai", "anthropic", "gemini"})
_OPTIONS: dict[str, tuple[ProviderOption, ...]] = {
    "openai": (_KEEP_FILES,),
    "anthropic": (
        ProviderOption(
            "structured",
            str,
            "how a schema is sent: `output_config` (default for current models) or a forced `tool` call",
            ("output_config", "tool"),
        ),
    ),
    "azure": (
        ProviderOption("api_version", str, "the Azure OpenAI api-version query parameter (default 2024-10-21)"),
        ProviderOption("model", str, "the OpenAI model the deployment serves, for prices and token counts"),
        ProviderOption(
            "auth",
            str,
            "`api_key` (AZURE_OPENAI_API_KEY, default) or `entra_id` (an Entra ID token in AZURE_OPENAI_AD_TOKEN)",
            ("api_key", "entra_id"),
        ),
        _KEEP_FILES,
    ),
    "bedrock": (
        ProviderOption("region", str, "the AWS region, e.g. us-east-1 (default: AWS_REGION or the profile's)"),
        ProviderOption("batch_s3", str, "batch mode: the s3://bucket/prefix where job files are written and read"),
        ProviderOption("role_arn", str, "batch mode: the IAM service role Bedrock assumes to read and write batch_s3"),
        ProviderOption(
            "batch_min_records",
            int,
            "batch mode: the fewest records Bedrock takes in one job (default 100, its quota); fewer run realtime",
        ),
        ProviderOption(
            "structured",
            str,
            "how a schema is sent: `output_config` (Bedrock structured outputs: default for current Claude "
            "models) or a forced `tool` call (default for other models)",
            ("output_config", "tool"),
        ),
        _KEEP_FILES,
    ),
    "gemini": (
        ProviderOption(
            "vertexai", bool, "use Vertex AI (Application Default Credentials) instead of the Developer API key"
        ),
        ProviderOption("project", str, "Vertex AI: the Google Cloud project"),
        ProviderOption("location", str, "Vertex AI: the region, e.g. us-central1"),
        ProviderOption(
            "batch_gcs", str, "Vertex AI batch mode: the gs://bucket/prefix where job files are written and read"
        ),
        ProviderOption(
            "api_version",
            str,
            "API version to call, e.g. v1beta or v1 (gateways that route by "
            "version); part of the request identity for a non-official base_url",
        ),
        ProviderOption(
            "batch_inline_max_bytes",
            int,
            "batches above this size go as an uploaded JSONL file instead of inline (at most about 20 MB)",
        ),
        _KEEP_FILES,
    ),
}


def provider_options(provider: str) -> tuple[ProviderOption, ...]:
    """The options `provider` reads (only `transport` for OpenAI-compatible endpoints, none for the mock)."""
    return _OPTIONS.get(provider, ()) + ((_TRANSPORT,) if _plain_http(provider) else ())


def check_options(provider: str, options: dict[str, Any], where: str) -> None:
    """Raise `model_option` for a key `provider` does not read or a value of the wrong kind."""
    known = {o.name: o for o in provider_options(provider)}
    for key, value in options.items():
        option = known.get(key)
        if option is None:
            option_missing(provider, str(key))
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
            guess = f" (did you mean '{close[0]}'?)" if close else ""
            raise ModelOptionError(
                f"{where}.{key}: provider '{provider}' has no option '{key}'{guess}", hint=_known_hint(provider, known)
            )
        problem = _value_problem(option, value)
        if problem:
            raise ModelOptionError(f"{where}.{key}: {problem}", hint=f"{key}: {option.help}")


def _value_problem(option: ProviderOption, value: Any) -> str | None:
    if option.choices and value not in option.choices:
        return f"{value!r} is not one of {', '.join(option.choices)}"
    if option.kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        return f"{value!r} must be a whole number >= 1"
    if not isinstance(value, option.kind):
        return f"{value!r} must be {'true or false' if option.kind is bool else 'text'}"
    return None


def _known_hint(provider: str, known: dict[str, ProviderOption]) -> str:
    if not known:
        return f"remove model.options: provider '{provider}' takes none"
    return f"use one of {provider}'s options: " + "; ".join(f"`{o.name}`: {o.help}" for o in known.values())


def _plain_http(provider: str) -> bool:
    info = REGISTRY.get(provider)
    return info is not None and info.adapter in _PLAIN_HTTP_ADAPTERS
