"""OpenAI (and OpenAI-compatible endpoints): Chat Completions or the Responses API.

`to_body`/`parse_result` are pure and tested on JSON (providers/openai/body.py); the SDK call is
in `complete`, wrapped by `_mapped_errors`. Responses are read raw (no SDK model parsing): cheaper
per call, and the same JSON the tests and the batch API see.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from batchor.errors import BaseUrlMissingError, ProviderError, RateLimitedError
from batchor.providers import base_url
from batchor.providers.base import (
    Completion,
    Embeddings,
    EmbedRequest,
    LLMRequest,
    ProviderConfig,
    read_api_key,
    unreadable_answer,
)
from batchor.providers.caching import flex_unavailable
from batchor.providers.embeddings import openai_body, parse_openai
from batchor.providers.errors_map import classify, parse_retry_after
from batchor.providers.http_post import TRANSPORT_HTTP, JsonPoster, transport_of
from batchor.providers.openai.body import parse_result as parse_result
from batchor.providers.openai.body import to_body as to_body
from batchor.providers.unreachable import transport_errors, unreachable

_MAX_CONNECTIONS = 4096  # the most `limits.concurrency` allows: connections open only when needed
_PATHS = {"chat": "/chat/completions", "responses": "/responses"}
_NO_KEY = "not-needed"  # the SDK insists on some key; servers without auth ignore it
_DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's


def rate_limit_headers(headers: Any) -> dict[str, float]:
    """x-ratelimit-* headers as numbers (requests/tokens limit and remaining), or the same passed
    on by a gateway (LiteLLM: `llm_provider-x-ratelimit-*`)."""
    found = {}
    for name in ("limit-requests", "remaining-requests", "limit-tokens", "remaining-tokens"):
        value = headers.get(f"x-ratelimit-{name}") or headers.get(f"llm_provider-x-ratelimit-{name}")
        if value is not None:
            try:
                found[name] = float(value)
            except ValueError:
                pass
    return found


class OpenAIProvider:
    name = "openai"

    def __init__(self, client: Any, *, api: str, strict: bool, first_party: bool, secret: str | None) -> None:
        self.client, self.api, self.strict, self.first_party = client, api, strict, first_party
        self._secret = secret
        self._response_type = _response_type()
        self._url = str(client.base_url)
        self._posts = _Posts()

    async def complete(self, request: LLMRequest) -> Completion:
        body = to_body(request, api=self.api, strict=self.strict, first_party=self.first_party)
        try:
            return await self._complete(body)
        except RateLimitedError as exc:
            if not (request.tier_fallback and body.get("service_tier") == "flex" and flex_unavailable(exc.message)):
                raise
        # No flex capacity and the spec allows the standard tier: priced at the tier the answer names.
        return await self._complete({k: v for k, v in body.items() if k != "service_tier"})

    async def _complete(self, body: dict[str, Any]) -> Completion:
        # The SDK's generic `request` (what its `post` calls) sends the body as built, so
        # server-specific parameters (top_k on vLLM, Ollama...) pass through untouched, and
        # returns the HTTP response unparsed: `create(...)` would first walk every parameter
        # through the SDK's type transforms and wrap the reply: a third of the client CPU per
        # request (see benchmarks/).
        data, headers = await self._send(_PATHS[self.api], body)
        completion = parse_result(data, api=self.api)
        completion.rate_limits = rate_limit_headers(headers)
        return completion

    async def embed(self, request: EmbedRequest) -> Embeddings:
        """One /v1/embeddings call for every text of `request`."""
        data, headers = await self._send("/embeddings", openai_body(request))
        answer = parse_openai(data, len(request.texts))
        answer.rate_limits = rate_limit_headers(headers)
        return answer

    async def _send(self, path: str, body: dict[str, Any]) -> tuple[Any, Any]:
        """The answer's JSON and headers, through the SDK."""
        async with _mapped_errors(self._secret, self._url):
            response = await self._post(path, body)
            return json.loads(response.content), response.headers  # bytes: no charset sniffing

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        options = self._posts.options(path, body)
        if options is None:  # an SDK without the options class `_Posts` copies: its public `post`
            return await self.client.post(path, body=body, cast_to=self._response_type)
        return await self.client.request(self._response_type, options)

    async def aclose(self) -> None:
        await self.client.close()


class _Posts:
    """The SDK's request options for POSTs of JSON bodies, each made from its path's template.

    `client.post` builds them with `FinalRequestOptions.construct`, which deep-copies every
    field's default (~0.15 ms, a tenth of the SDK's CPU per request); a copy of a template
    with the body set is the same object for a few microseconds. Each carries its own
    idempotency key, as `post` would: the SDK otherwise draws a uuid4 per request (a urandom
    call) for a header the OpenAI client does not send."""

    def __init__(self) -> None:
        self._templates: dict[str, Any] = {}
        self._prefix = f"batchor-{uuid.uuid4().hex[:12]}-"
        self._count = itertools.count()

    def options(self, path: str, body: dict[str, Any]) -> Any:
        """The options to send `body` to `path` with, or None when the SDK has no such class
        (it is the SDK's own, not public API: the caller then sends through `client.post`)."""
        template = self._templates.get(path)
        if template is None:
            try:
                from openai._models import FinalRequestOptions
            except ImportError:
                return None
            template = self._templates[path] = FinalRequestOptions.construct(method="post", url=path, json_data={})
        key = f"{self._prefix}{next(self._count)}"
        return template.model_copy(update={"json_data": body, "idempotency_key": key})


def _response_type() -> type:
    """The `Response` class of the httpx flavour the SDK runs on (httpx, or httpx2 in newer
    SDKs): passed as `cast_to`, the SDK hands back the HTTP response as is."""
    import openai

    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        package = cls.__module__.partition(".")[0]
        if cls.__name__ == "AsyncClient" and package in ("httpx", "httpx2"):
            response_type: type = importlib.import_module(package).Response
            return response_type
    raise TypeError("the OpenAI SDK's HTTP client is neither httpx nor httpx2")


def _http_client(openai: Any, timeout_s: float) -> Any:
    """The SDK's aiohttp-backed client (the `openai[aiohttp]` extra): at zero latency it sends
    about 1.7x the requests per CPU second of the default httpx transport (see benchmarks/).
    Its pool keeps a connection alive for every request a spec may have in flight (the SDK's
    default keeps 100: with `concurrency` above that, connections were closed and reopened)."""
    from openai._constants import DEFAULT_CONNECTION_LIMITS  # an instance of the SDK's httpx flavour

    limits = type(DEFAULT_CONNECTION_LIMITS)(
        max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_CONNECTIONS
    )
    return openai.DefaultAioHttpClient(limits=limits, timeout=timeout_s)


@asynccontextmanager
async def _mapped_errors(secret: str | None, url: str | None = None) -> AsyncIterator[None]:
    """SDK errors as batchor's; `url` (the client's base URL) names where a connection failed."""
    import openai

    try:
        yield
    except openai.APIStatusError as exc:
        raise status_error(exc.status_code, exc.body, str(exc), exc.response.headers, secret) from None
    except openai.APIConnectionError as exc:  # timeouts too: the SDK reports some refusals as timeouts
        raise unreachable(exc, url, secret) from None
    except transport_errors() as exc:  # a streamed body (batch results) read after the SDK's call
        raise unreachable(exc, url, secret) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise unreadable_answer(exc) from None


def status_error(status: int, body: Any, fallback: str, headers: Any, secret: str | None) -> ProviderError:
    """An error status as batchor's error, from the body's `error` object (the SDK's `exc.body`
    is that object already); `fallback` is the message when the body names none."""
    from batchor.errors import redact

    body = body if isinstance(body, dict) else {}
    error = body.get("error", body)
    error = error if isinstance(error, dict) else {}
    message = redact(str(error.get("message") or fallback), [secret or ""])
    code = error.get("code")
    return classify(status, message, code, parse_retry_after(headers), rate_limit_headers(headers))


class OpenAIHttpProvider(OpenAIProvider):
    """The same requests as `OpenAIProvider`, posted with plain aiohttp (no SDK import at all)."""

    def __init__(self, poster: JsonPoster, *, api: str, strict: bool, first_party: bool, secret: str | None) -> None:
        self.api, self.strict, self.first_party = api, strict, first_party
        self._secret, self._poster = secret, poster

    async def _send(self, path: str, body: dict[str, Any]) -> tuple[Any, Any]:
        answer = await self._poster.post(path, body)
        if answer.status >= 400:
            error, text = answer.error_body()
            fallback = f"Error code: {answer.status}" if isinstance(error, dict) else text
            raise status_error(
                answer.status, error, fallback or f"Error code: {answer.status}", answer.headers, self._secret
            )
        return answer.json(), answer.headers

    async def aclose(self) -> None:
        await self._poster.aclose()


def _plain_headers(secret: str) -> dict[str, str]:
    """What the SDK sends besides the body: the bearer key, and the organization and project the
    SDK reads from OPENAI_ORG_ID and OPENAI_PROJECT_ID."""
    headers = {"Authorization": f"Bearer {secret}", "User-Agent": f"batchor/{_version()}"}
    for env, name in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(env):
            headers[name] = os.environ[env]
    return headers


def _version() -> str:
    from batchor.version import __version__

    return __version__


def create(config: ProviderConfig, info: Any) -> OpenAIProvider:
    """The client; the key is read now, so a missing one fails before any request.

    Base URL: the spec's `base_url`, else the preset's, else (provider `openai` only)
    OPENAI_BASE_URL. A plain `openai-compatible` endpoint has no default: it must say where.
    Requests go over plain HTTP unless the model block's options say `transport: sdk`.
    Servers without a key variable (vllm, ollama, llamacpp, openai-compatible unless
    `api_key_env` is set) get a placeholder key, never OPENAI_API_KEY: that key must not
    travel to another server.
    """
    key_env = config.api_key_env or info.key_env
    secret = read_api_key(key_env, config.provider) if key_env else _NO_KEY
    url = base_url(config.provider, config.base_url)
    if url is None and not info.first_party:
        raise BaseUrlMissingError(
            f"provider '{config.provider}' needs a base URL: it has no default endpoint",
            hint="add `base_url: http://host:port/v1` to the model block (or use a preset such as "
            "vllm, ollama, openrouter)",
        )
    api, strict = config.options.get("api") or "chat", bool(config.options.get("strict"))
    redacted = None if secret == _NO_KEY else secret
    if transport_of(config.options) == TRANSPORT_HTTP:
        sent_to = url or _DEFAULT_BASE_URL
        label = sent_to.rstrip("/") + "/"  # the SDK's form of it
        poster = JsonPoster(sent_to, _plain_headers(secret), config.timeout_s, redacted, label=label)
        return OpenAIHttpProvider(poster, api=api, strict=strict, first_party=info.first_party, secret=redacted)
    import openai

    client = openai.AsyncOpenAI(
        api_key=secret,
        base_url=url,
        max_retries=0,
        timeout=config.timeout_s,
        http_client=_http_client(openai, config.timeout_s),
    )
    return OpenAIProvider(client, api=api, strict=strict, first_party=info.first_party, secret=redacted)
