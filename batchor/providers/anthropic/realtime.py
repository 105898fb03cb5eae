"""Anthropic Messages API: the system prompt apart, structured output via `output_config`.

`to_body`/`parse_result` are pure and tested on JSON (the body is also what a Message Batches
request carries as `params`); the SDK call is in `complete`, wrapped by `_mapped_errors`.
The answer is read raw (no SDK model parsing).

Structured output is sent as `output_config.format` (a JSON schema the API enforces). A forced
tool call carrying the schema as `input_schema` is the fallback, used only where
`output_config` cannot work: models older than structured outputs (`_TOOL_ONLY_MODELS`), a
schema the API cannot enforce (`strict` False after adaptation: a tool schema is guidance, not
a grammar), or `options={"structured": "tool"}` in the ProviderConfig.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from batchor.errors import ProviderError, QuotaExhaustedError, redact
from batchor.providers.base import (
    Completion,
    LLMRequest,
    ProviderConfig,
    ToolCall,
    answer_tool,
    read_api_key,
    refused,
    unreadable_answer,
)
from batchor.providers.caching import anthropic_breakpoint
from batchor.providers.errors_map import classify, parse_retry_after
from batchor.providers.http_post import TRANSPORT_HTTP, JsonPoster, transport_of
from batchor.providers.media_parts import anthropic_blocks, with_parts
from batchor.providers.unreachable import transport_errors, unreachable

OUTPUT_CONFIG, TOOL = "output_config", "tool"
# Models released before structured outputs: they only follow a schema through a forced tool.
_TOOL_ONLY_MODELS = (
    "claude-2",
    "claude-instant",
    "claude-3",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2025",
    "claude-opus-4-0",
    "claude-opus-4-2025",
)
# Chat Completions parameters with no Messages API equivalent: dropped, so a spec written for
# OpenAI runs unchanged with `--model anthropic:...`.
_OPENAI_ONLY = frozenset({
    "seed", "response_format", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs",
    "top_logprobs", "n", "user", "store", "parallel_tool_calls", "reasoning_effort", "stream",
    "prediction", "modalities", "max_completion_tokens",
})  # fmt: skip
_QUOTA_CODES = ("billing_error", "spend_limit")  # error type / details.error_code fragments
_MAX_CONNECTIONS = 4096  # the most `limits.concurrency` allows: connections open only when needed
_DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's
_API_VERSION = "2023-06-01"  # the version header when the installed SDK's cannot be read
_REQUIRED = ("model", "max_tokens", "messages")  # typed SDK arguments; the rest goes in extra_body


def structured_mode(model: str, *, strict: bool = True, option: str | None = None) -> str:
    """`output_config` unless the model, the schema or an explicit option needs a forced tool."""
    if option in (OUTPUT_CONFIG, TOOL):
        return option
    if not strict or model.startswith(_TOOL_ONLY_MODELS):
        return TOOL
    return OUTPUT_CONFIG


def to_body(request: LLMRequest, *, structured: str = OUTPUT_CONFIG) -> dict[str, Any]:
    """The JSON body for POST /v1/messages."""
    params = _params(request.params)
    system = [m["content"] for m in request.messages if m["role"] == "system"]
    messages = with_parts(
        request,
        [{"role": m["role"], "content": m["content"]} for m in request.messages if m["role"] != "system"],
        "content",
        anthropic_blocks,
    )
    body: dict[str, Any] = {"model": request.model, "messages": messages, **params}
    if system:
        body["system"] = "\n\n".join(system)
    if request.schema is not None and structured == TOOL:
        name = _tool_name(request.schema_name)
        body["tools"] = [
            {
                "name": name,
                "description": "Record the answer in the required structure.",
                "input_schema": request.schema,
            }
        ]
        body["tool_choice"] = {"type": "tool", "name": name}
    elif request.schema is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": request.schema}}
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
        ]
        choice = request.tool_choice or "required"
        body["tool_choice"] = (
            {"type": "any" if choice == "required" else "auto"}
            if choice in ("required", "auto")
            else {
                "type": "tool",
                "name": choice,
            }
        )
    return anthropic_breakpoint(body, request.cache, len(system))


def _params(params: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in params.items() if k not in _OPENAI_ONLY and k != "stop"}
    if "max_tokens" not in out and "max_completion_tokens" in params:
        out["max_tokens"] = params["max_completion_tokens"]
    out["max_tokens"] = int(out.get("max_tokens") or 1024)
    stop = params.get("stop")
    if stop is not None and "stop_sequences" not in out:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    return out


_tool_name = answer_tool


def parse_result(data: dict[str, Any]) -> Completion:
    """A Completion from a Messages JSON body (a forced tool's `input` becomes the JSON text). Every
    `tool_use` block is also kept as a tool call: the judge tells the forced answer tool (named by
    `answer_tool`) from a tool the model called unasked."""
    texts, tool_input, calls = [], None, []
    for block in data.get("content") or []:
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(str(block.get("name") or "?"), block.get("input")))
            tool_input = block.get("input") if tool_input is None else tool_input
    text = json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else "".join(texts)
    usage = data.get("usage") or {}
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    split = usage.get("cache_creation") or {}
    completion = Completion(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=int(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=min(cache_write, int(split.get("ephemeral_1h_input_tokens") or 0)),
        finish_reason=data.get("stop_reason"),
        model=data.get("model"),
        raw=data,
        usage_known=bool(usage),
    )
    if data.get("stop_reason") == "refusal":
        raise refused("the model declined to answer (stop_reason: refusal)", completion)
    return completion


def rate_limit_headers(headers: Any) -> dict[str, float]:
    """anthropic-ratelimit-* headers as numbers, named like the OpenAI adapter's."""
    found = {}
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        for what in ("limit", "remaining"):
            value = headers.get(f"anthropic-ratelimit-{kind}-{what}")
            if value is not None:
                try:
                    found[f"{what}-{kind}"] = float(value)
                except ValueError:
                    pass
    return found


def error_for(
    status: int | None, body: Any, message: str, retry_after: float | None, rate_limits: dict[str, float] | None = None
) -> ProviderError:
    """Anthropic's quota signals (402 billing_error, 429 spend limits) first, then the shared map."""
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    details = error.get("details")
    details = details if isinstance(details, dict) else {}
    code = " ".join(str(x) for x in (error.get("type"), details.get("error_code")) if x)
    if status == 402 or any(marker in code for marker in _QUOTA_CODES):
        return QuotaExhaustedError(message, status=status)
    return classify(status, message, code or None, retry_after, rate_limits)


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, client: Any, *, strict: bool, option: str | None, secret: str) -> None:
        self.client, self.strict, self.option = client, strict, option
        self._secret = secret

    async def complete(self, request: LLMRequest) -> Completion:
        mode = structured_mode(request.model, strict=self.strict, option=self.option)
        data, headers = await self._send(to_body(request, structured=mode))
        completion = parse_result(data)
        completion.rate_limits = rate_limit_headers(headers)
        return completion

    async def _send(self, body: dict[str, Any]) -> tuple[Any, Any]:
        """The answer's JSON and headers, through the SDK."""
        # Only the three required fields go as typed arguments: the rest rides in extra_body, so
        # parameters the SDK does not type (top_k, temperature on newer SDKs) still pass through.
        required = {key: body.pop(key) for key in _REQUIRED}
        async with _mapped_errors(self._secret, str(self.client.base_url)):
            response = await self.client.messages.with_raw_response.create(**required, extra_body=body)
            return json.loads(await response.read()), response.headers

    async def aclose(self) -> None:
        await self.client.close()


class AnthropicHttpProvider(AnthropicProvider):
    """The same requests as `AnthropicProvider`, posted with plain aiohttp (no SDK import at all)."""

    def __init__(self, poster: JsonPoster, *, strict: bool, option: str | None, secret: str) -> None:
        self.strict, self.option, self._secret, self._poster = strict, option, secret, poster

    async def _send(self, body: dict[str, Any]) -> tuple[Any, Any]:
        answer = await self._poster.post("v1/messages", body)
        if answer.status >= 400:
            error, text = answer.error_body()
            found = (error.get("error") or {}).get("message") if isinstance(error, dict) else None
            message = (
                found if isinstance(found, str) and found else f"{answer.status} {text or 'status code (no body)'}"
            )
            headers = answer.headers
            raise error_for(
                answer.status,
                error,
                redact(message, [self._secret]),
                parse_retry_after(headers),
                rate_limit_headers(headers),
            )
        return answer.json(), answer.headers

    async def aclose(self) -> None:
        await self._poster.aclose()


def _plain_headers(secret: str) -> dict[str, str]:
    """The credential and API version the installed SDK sends (its `anthropic-version` is the wire
    format `to_body` and `parse_result` are checked against), read without importing the SDK."""
    return {"Authorization": f"Bearer {secret}", "anthropic-version": _sdk_api_version()}


@functools.cache
def _sdk_api_version() -> str:
    spec = importlib.util.find_spec("anthropic")
    folder = Path(spec.origin).parent if spec and spec.origin else None
    try:
        text = (folder / "_constants.py").read_text(encoding="utf-8") if folder else ""
    except OSError:
        text = ""
    found = re.search(r'^ANTHROPIC_API_VERSION\s*=\s*"([^"]+)"', text, re.MULTILINE)
    return found.group(1) if found else _API_VERSION


@asynccontextmanager
async def _mapped_errors(secret: str, url: str | None = None) -> AsyncIterator[None]:
    """SDK errors as batchor's; `url` (the client's base URL) names where a connection failed."""
    import anthropic

    try:
        yield
    except anthropic.APIStatusError as exc:
        message = redact(str(exc.api_message or exc.message or exc), [secret])
        headers = exc.response.headers
        raise error_for(
            exc.status_code, exc.body, message, parse_retry_after(headers), rate_limit_headers(headers)
        ) from None
    except anthropic.APIConnectionError as exc:  # APITimeoutError included
        raise unreachable(exc, url, secret) from None
    except transport_errors() as exc:  # a streamed body (batch results) read after the SDK's call
        raise unreachable(exc, url, secret) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise unreadable_answer(exc) from None


def _http_client(anthropic: Any, timeout_s: float) -> Any:
    """The SDK's aiohttp-backed client: far less CPU per request than its httpx default (see
    benchmarks/), with a connection kept for every request a spec may have in flight."""
    from anthropic._constants import DEFAULT_CONNECTION_LIMITS

    limits = type(DEFAULT_CONNECTION_LIMITS)(  # the Limits class of the SDK's httpx flavour
        max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_CONNECTIONS
    )
    return anthropic.DefaultAioHttpClient(limits=limits, timeout=timeout_s)


def create(config: ProviderConfig, info: Any) -> AnthropicProvider:
    """The client; the key is read now, so a missing one fails before any request.

    The base URL is `config.base_url`, else ANTHROPIC_BASE_URL (read by the SDK itself). The SDK
    never retries (`max_retries=0`): the engine owns retries and rate-limit waits. Requests go
    over plain HTTP unless the model block's options say `transport: sdk`.
    """
    secret = read_api_key(config.api_key_env or info.key_env, config.provider)
    option = config.options.get("structured")
    strict = bool(config.options.get("strict", True))
    if transport_of(config.options) == TRANSPORT_HTTP:
        base_url = config.base_url or os.environ.get("ANTHROPIC_BASE_URL") or _DEFAULT_BASE_URL
        poster = JsonPoster(base_url, _plain_headers(secret), config.timeout_s, secret)
        return AnthropicHttpProvider(poster, strict=strict, option=option, secret=secret)
    import anthropic

    client = anthropic.AsyncAnthropic(
        api_key=secret,
        base_url=config.base_url or None,
        max_retries=0,
        timeout=config.timeout_s,
        http_client=_http_client(anthropic, config.timeout_s),
    )
    return AnthropicProvider(client, strict=strict, option=option, secret=secret)
