"""Google Gemini through google-genai: the Developer API by key, or Vertex AI by config.

`to_body` builds the SDK's `generate_content` arguments (model, contents, config) and
`parse_result` reads the REST JSON answer; both are pure and tested on JSON (gemini/body.py). The SDK call is in
`complete`, wrapped by `_mapped_errors`; the answer is read raw from `sdk_http_response.body`
(the SDK skips building its response model), the same JSON a batch result line holds.

Connection, from the ProviderConfig:
- Developer API (default): key from GEMINI_API_KEY, else GOOGLE_API_KEY (or `api_key_env`);
  base URL from `base_url`, else GOOGLE_GEMINI_BASE_URL (read by the SDK).
- Vertex AI: `options={"vertexai": True, "project": ..., "location": ...}` (or the SDK's
  GOOGLE_GENAI_USE_VERTEXAI / GOOGLE_CLOUD_PROJECT / GOOGLE_CLOUD_LOCATION variables);
  credentials come from Application Default Credentials, so no key is read.
- `options={"api_version": "v1beta"}` picks an API version other than the SDK's default.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from typing import Any

from batchor.errors import (
    AuthenticationError,
    ContextLengthError,
    NoApiKeyError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    redact,
)
from batchor.providers import provider_info
from batchor.providers.base import (
    CacheFeeSink,
    Completion,
    Embeddings,
    EmbedRequest,
    LLMRequest,
    ProviderConfig,
    read_api_key,
    unreadable_answer,
)
from batchor.providers.embeddings import gemini_arguments, parse_gemini
from batchor.providers.errors_map import classify
from batchor.providers.gemini.body import parse_result as parse_result
from batchor.providers.gemini.body import to_body as to_body
from batchor.providers.gemini.context import ContextCaches
from batchor.providers.gemini.rest_config import rest_config
from batchor.providers.http_post import TRANSPORT_HTTP, JsonPoster, transport_of
from batchor.providers.keys import GEMINI_KEY_ENVS, gemini_on_vertex
from batchor.providers.unreachable import transport_errors, unreachable

KEY_ENVS = GEMINI_KEY_ENVS
EMBEDDINGS_API = "embeddings"  # ProviderConfig options["api"] of an embedding step
_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"  # the SDK's, for the Developer API
_API_VERSION = "v1"  # the SDK's default for the Developer API (GOOGLE_AI_API_DEFAULT_VERSION)


def error_for(status: int | None, body: Any, message: str) -> ProviderError:
    """A Google error body as a batchor error: RESOURCE_EXHAUSTED is a rate limit or a quota."""
    error = body.get("error", body) if isinstance(body, dict) else {}
    error = error if isinstance(error, dict) else {}
    details = [d for d in error.get("details") or [] if isinstance(d, dict)]
    if status == 429:
        return _resource_exhausted(message, details)
    lowered = message.lower()
    if any(d.get("reason") == "API_KEY_INVALID" for d in details) or "api key not valid" in lowered:
        return AuthenticationError(message, status=status)
    if status == 400 and "token count" in lowered and "exceed" in lowered:
        return ContextLengthError(message, status=status)
    return classify(status, message, error.get("status"))


_QUOTA_TEXT = "exceeded your current quota"


def _resource_exhausted(message: str, details: list[dict[str, Any]]) -> ProviderError:
    """A per-minute limit carries a RetryInfo delay; a spent daily (or billing) quota does not,
    or names a per-day quota, or says "You exceeded your current quota" with no details at all:
    waiting seconds will not help, so the run pauses. A bare "Resource has been exhausted (e.g.
    check quota)" stays a rate limit (it is what per-minute limits send on Vertex AI)."""
    delay = retry_delay(details)
    quota_ids = [
        str(v.get("quotaId", ""))
        for d in details
        if str(d.get("@type", "")).endswith("QuotaFailure")
        for v in d.get("violations") or []
        if isinstance(v, dict)
    ]
    if any("PerDay" in q for q in quota_ids) or (quota_ids and delay is None):
        return QuotaExhaustedError(message, status=429)
    if not details and _QUOTA_TEXT in message.lower():  # "You exceeded your current quota", nothing else
        return QuotaExhaustedError(message, status=429)
    return RateLimitedError(message, status=429, retry_after=delay)


def retry_delay(details: list[dict[str, Any]]) -> float | None:
    """Seconds from a google.rpc.RetryInfo detail (`"retryDelay": "1.5s"`), if any."""
    for detail in details:
        if str(detail.get("@type", "")).endswith("RetryInfo"):
            try:
                return max(0.0, float(str(detail.get("retryDelay", "")).removesuffix("s")))
            except ValueError:
                return None
    return None


class GeminiProvider:
    name = "gemini"

    def __init__(self, client: Any, *, secret: str | None) -> None:
        self.client = client
        self._secret = secret
        self._url = _base_url(client)
        self._contexts = ContextCaches(client, lambda: _mapped_errors(self._secret, self._url))

    def report_cache_fees(self, sink: CacheFeeSink) -> None:
        self._contexts.sink = sink

    async def complete(self, request: LLMRequest) -> Completion:
        body = to_body(request)
        if request.cache is not None and request.cache.explicit:
            await self._contexts.use(body, request.cache.key)
        return parse_result(await self._send(body))

    async def _send(self, body: dict[str, Any]) -> Any:
        """The answer's JSON, through the SDK."""
        body["config"]["should_return_http_response"] = True  # raw body, no SDK model parsing
        async with _mapped_errors(self._secret, self._url):
            response = await self.client.aio.models.generate_content(**body)
            return json.loads(response.sdk_http_response.body or "{}")

    async def embed(self, request: EmbedRequest) -> Embeddings:
        """One batchEmbedContents call (the SDK's `embed_content` with a list) for every text."""
        async with _mapped_errors(self._secret, self._url):
            response = await self.client.aio.models.embed_content(**gemini_arguments(request))
        usage = getattr(response, "usage_metadata", None)
        tokens = getattr(usage, "prompt_token_count", None) if usage is not None else None
        return parse_gemini(response.embeddings, len(request.texts), tokens)

    async def aclose(self) -> None:
        await self._contexts.delete_all()
        await self.client.aio.aclose()
        self.client.close()


class GeminiHttpProvider(GeminiProvider):
    """The same requests as `GeminiProvider` (Developer API), posted with plain aiohttp: the SDK's
    config type still checks and names the parameters, once per distinct config."""

    def __init__(self, poster: JsonPoster, *, secret: str, api_version: str, config: ProviderConfig) -> None:
        self._poster, self._secret, self._api_version = poster, secret, api_version
        self._url = poster.label
        self._config = config
        self._explicit: GeminiProvider | None = None  # explicit context caches go through the SDK
        self._fees: CacheFeeSink | None = None

    def report_cache_fees(self, sink: CacheFeeSink) -> None:
        self._fees = sink
        if self._explicit is not None:
            self._explicit.report_cache_fees(sink)

    async def complete(self, request: LLMRequest) -> Completion:
        if request.cache is not None and request.cache.explicit:  # created and kept by the SDK's client
            if self._explicit is None:
                sdk = replace(self._config, options={**self._config.options, "transport": "sdk"})
                self._explicit = create(sdk, provider_info(sdk.provider))
                if self._fees is not None:
                    self._explicit.report_cache_fees(self._fees)
            return await self._explicit.complete(request)
        return parse_result(await self._send(to_body(request)))

    async def _send(self, body: dict[str, Any]) -> Any:
        model = body["model"] if body["model"].startswith(("models/", "tunedModels/")) else f"models/{body['model']}"
        with _config_errors():
            rest = rest_body(body)
        answer = await self._poster.post(f"{self._api_version}/{model}:generateContent", rest)
        if answer.status >= 400:
            error, text = answer.error_body()
            error = error if isinstance(error, dict) else {"message": text, "status": answer.reason}
            found = error.get("message", (error.get("error") or {}).get("message"))
            message = str(found or f"{answer.status} {error.get('status')}. {error}")
            raise error_for(answer.status, error, redact(message, [self._secret or ""]))
        return answer.json()

    async def embed(self, request: EmbedRequest) -> Embeddings:
        raise NotImplementedError  # built with the SDK provider (create: embeddings keep the SDK)

    async def aclose(self) -> None:
        await self._poster.aclose()
        if self._explicit is not None:
            await self._explicit.aclose()


def rest_body(body: dict[str, Any]) -> dict[str, Any]:
    """The REST request for `to_body`'s arguments: the config's REST form is built once per
    distinct config (the system instruction, which changes by row, is set apart)."""
    config = dict(body.get("config") or {})
    system = config.pop("system_instruction", None)
    rest = {"contents": body["contents"], **_rest_config(json.dumps(config, default=str))}  # order kept: a
    # schema's property order is the order the model answers in
    if isinstance(system, str):
        rest["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}  # as the SDK sends it
    elif system is not None:
        rest["systemInstruction"] = system
    return rest


@functools.lru_cache(maxsize=64)
def _rest_config(config: str) -> dict[str, Any]:
    """Converted here when it can be (rest_config.py: no SDK import), else by the SDK's config type."""
    loaded = json.loads(config)
    converted = rest_config(loaded)
    if converted is not None:
        return converted
    from batchor.providers.gemini.batch import rest_request

    return {k: v for k, v in rest_request({"contents": [], "config": loaded}).items() if k != "contents"}


@contextmanager
def _config_errors() -> Iterator[None]:
    """A parameter the SDK's config type does not know, as the SDK path reports it."""
    import pydantic

    try:
        yield
    except pydantic.ValidationError as exc:
        raise _params_error(exc) from None


def _params_error(exc: Any) -> ProviderError:
    """A pydantic ValidationError of the SDK's config type as an `invalid_request` error."""
    from batchor.errors import InvalidRequestError

    errors = exc.errors()
    where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
    reason = errors[0]["msg"] if errors else None
    return InvalidRequestError(
        f"Gemini rejected the request parameters: {where}: {reason}",
        hint="check model.params against GenerateContentConfig",
    )


@asynccontextmanager
async def _mapped_errors(secret: str | None, url: str | None = None) -> AsyncIterator[None]:
    """SDK errors as batchor's; `url` (the API's base URL) names where a connection failed."""
    import pydantic
    from google.auth import exceptions as auth_errors
    from google.genai import errors as genai_errors

    try:
        yield
    except genai_errors.APIError as exc:
        message = redact(str(exc.message or exc), [secret or ""])
        raise error_for(exc.code, exc.details, message) from None
    except pydantic.ValidationError as exc:  # a param the SDK's config model does not know
        raise _params_error(exc) from None
    except auth_errors.GoogleAuthError as exc:
        raise AuthenticationError(f"Google credentials failed: {redact(str(exc), [secret or ''])}") from None
    except _unreachable_errors() as exc:
        raise unreachable(exc, url, secret) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise unreadable_answer(exc) from None


def _base_url(client: Any) -> str | None:
    """Where the SDK sends requests (spec `base_url`, GOOGLE_GEMINI_BASE_URL, Vertex AI's regional
    host or the default), for error messages. The SDK keeps it on its private client: if that
    moves, messages fall back to the failed request's host."""
    options = getattr(getattr(client, "_api_client", None), "_http_options", None)
    url = getattr(options, "base_url", None)
    return url if isinstance(url, str) and url else None


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    """What a call raises when the endpoint cannot be reached (aiohttp's timeout is a bare TimeoutError)."""
    return (TimeoutError, *transport_errors())


def client_kwargs(config: ProviderConfig, info: Any) -> dict[str, Any]:
    """Arguments for `genai.Client`: Vertex AI when configured, else the Developer API key.

    The SDK never retries (one attempt): the engine owns retries and rate-limit waits.
    """
    options = config.options
    http: dict[str, Any] = {"timeout": int(config.timeout_s * 1000), "retry_options": {"attempts": 1}}
    if config.base_url:
        http["base_url"] = config.base_url
    if options.get("api_version"):
        http["api_version"] = options["api_version"]
    if not gemini_on_vertex(options):
        return {"api_key": developer_key(config, info), "http_options": http}
    kwargs: dict[str, Any] = {"vertexai": True, "http_options": http}
    kwargs.update({k: options[k] for k in ("project", "location") if options.get(k)})
    if config.api_key_env and config.api_key_env != info.key_env:  # Vertex AI express mode
        kwargs["api_key"] = read_api_key(config.api_key_env, config.provider)
    return kwargs


def developer_key(config: ProviderConfig, info: Any) -> str:
    """`api_key_env` when the spec names one; else GEMINI_API_KEY, then GOOGLE_API_KEY."""
    if config.api_key_env and config.api_key_env != info.key_env:
        return read_api_key(config.api_key_env, config.provider)
    for env in KEY_ENVS:
        if os.environ.get(env, "").strip():
            return read_api_key(env, config.provider)
    return read_api_key(KEY_ENVS[0], config.provider)  # raises, naming the variable to set


def create(config: ProviderConfig, info: Any) -> GeminiProvider:
    """The Developer API over plain HTTP (unless `transport: sdk`); Vertex AI (signed in through
    Application Default Credentials) and embeddings through the SDK."""
    plain = transport_of(config.options) == TRANSPORT_HTTP and config.options.get("api") != EMBEDDINGS_API
    if plain and not gemini_on_vertex(config.options):
        return _plain(config, info)
    from google import genai
    from google.auth import exceptions as auth_errors

    kwargs = client_kwargs(config, info)
    try:
        client = genai.Client(**kwargs)
    except (ValueError, auth_errors.GoogleAuthError) as exc:
        raise NoApiKeyError(
            f"cannot set up Gemini on Vertex AI: {exc}",
            hint="set `project` and `location` (or GOOGLE_CLOUD_PROJECT and "
            "GOOGLE_CLOUD_LOCATION) and run `gcloud auth application-default login`",
        ) from None
    return GeminiProvider(client, secret=kwargs.get("api_key"))


def _plain(config: ProviderConfig, info: Any) -> GeminiHttpProvider:
    """Where the SDK would send (spec `base_url`, GOOGLE_GEMINI_BASE_URL, Google's host) and the
    API version it would use (the option, GOOGLE_GENAI_API_VERSION, v1beta)."""
    secret = developer_key(config, info)
    base_url = config.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or _DEFAULT_BASE_URL
    version = config.options.get("api_version") or os.environ.get("GOOGLE_GENAI_API_VERSION") or _API_VERSION
    version = "v1beta" if version == "beta" else version
    poster = JsonPoster(base_url, {"x-goog-api-key": secret}, config.timeout_s, secret)
    return GeminiHttpProvider(poster, secret=secret, api_version=str(version), config=config)
