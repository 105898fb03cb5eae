"""Which endpoint answers a step, as part of its requests' identity.

A local test server or a gateway alias answering under the same model name must never feed the
cache of the real provider, so the endpoint a request goes to (its normalised base URL, from the
spec, a preset, or the SDK's base-URL variable) is part of the request key. The official endpoint
(no base URL, or the provider's documented default written out) adds nothing, which is what every
key held before endpoints counted: existing caches stay valid.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from batchor.errors import KeyEnvNotAllowedError, StalePlanError, UrlCredentialsError
from batchor.plan.model import StepPlan
from batchor.plan.step_kind import SQL_PROVIDER
from batchor.providers import CREDENTIAL_CHAINS, provider_info, provider_key_envs
from batchor.providers import base_url as resolve_base_url
from batchor.providers.facts import provider_facts

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SECRET_WORDS = ("key", "token", "secret", "sig", "pass", "auth")


def normalise_url(url: str) -> str:
    """Scheme and host lower-cased, default port, trailing slash and credentials dropped;
    query parameters that may hold a secret are dropped (the key goes into plan files)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    netloc = (parts.hostname or "").lower()
    if parts.port is not None and parts.port != _DEFAULT_PORTS.get(scheme):
        netloc += f":{parts.port}"
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not any(word in k.lower() for word in _SECRET_WORDS)
    ]
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), urlencode(sorted(query)), ""))


def check_connection(model: Any, at: Callable[[str], str]) -> None:
    """A model block's connection holds no secret and sends only the provider's own key variable
    (unless the spec says `allow_key_env: true`); `at(key)` says where a key is in the spec."""
    if model.base_url:
        try:
            parts = urlsplit(model.base_url)
            credentials = parts.username is not None or parts.password is not None
        except ValueError:
            credentials = "@" in model.base_url
        if credentials:
            raise UrlCredentialsError(
                f"{at('base_url')}: the URL carries a user name or password, which plan files would keep",
                hint="remove `user:password@` from the URL and put the secret in the key variable (`api_key_env`)",
            )
    if model.api_key_env and model.provider in CREDENTIAL_CHAINS:
        raise KeyEnvNotAllowedError(
            f"{at('api_key_env')}: provider '{model.provider}' reads {CREDENTIAL_CHAINS[model.provider]} from "
            "their usual sources, not from one variable",
            hint="remove `api_key_env` (the provider's guide lists the sources it reads)",
        )
    own = provider_key_envs(model.provider)
    if model.api_key_env and not _offline(model.provider) and model.api_key_env not in own and not model.allow_key_env:
        theirs = " or ".join(own) if own else "none: this provider needs no key by default"
        raise KeyEnvNotAllowedError(
            f"{at('api_key_env')}: {model.api_key_env} is not a {model.provider} key variable ({theirs}); "
            "a spec sends another variable as the API key only when it says so",
            hint="use the provider's own variable, or add `allow_key_env: true` to the model block "
            "(plan and apply then show which variable is sent where)",
        )


def step_endpoint(
    provider: str, base_url: str | None, options: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> str | None:
    """The normalised endpoint of a step, or None for the provider's official endpoint (and for
    the local `mock` provider, which has none)."""
    if provider == SQL_PROVIDER or _offline(provider):
        return None
    info = provider_info(provider)
    url = resolve_base_url(provider, base_url, env)
    if not url:
        return None
    endpoint = normalise_url(url)
    if info.first_party and endpoint == info.official_url:
        return None
    if options.get("api_version"):  # a gateway may route API versions to different backends
        endpoint += f" api_version={options['api_version']}"
    return endpoint


def _offline(provider: str) -> bool:
    """The mock answers inside batchor: it has no endpoint and sends no key."""
    return provider_facts(provider).offline


def key_identity(provider: str, endpoint: str | None) -> str:
    """The provider part of the request key: the provider alone for its official endpoint."""
    return provider if endpoint is None else f"{provider}@{endpoint}"


def check_endpoints(steps: list[StepPlan], env: Mapping[str, str] = os.environ) -> None:
    """Refuse to apply a plan whose requests would now go to another endpoint than it keyed
    (a base-URL variable changed since `plan`): their answers would be cached as the wrong one's."""
    for step in steps:
        now = step_endpoint(step.provider, step.base_url, step.provider_options, env)
        if now != step.endpoint:
            variable = provider_info(step.provider).base_url_env or "the base URL"
            raise StalePlanError(
                f"steps.{step.name}: the plan was made for endpoint {_shown(step.endpoint)}, but "
                f"{variable} now sends its requests to {_shown(now)}",
                hint="plan again with the environment you apply with, or restore the variable",
            )


def _shown(endpoint: str | None) -> str:
    return endpoint or "the official one"
