"""The provider seam: what the engine needs from any LLM API, and nothing more.

An adapter turns a provider-neutral `LLMRequest` into one SDK call and the answer back into a
`Completion`. Translation is pure (`to_body`/`parse_result` in each module, tested on JSON);
the SDK call sits in one place per adapter, wrapped by the adapter's error mapping so the
engine only ever sees `batchor.errors.ProviderError` subclasses.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from batchor.errors import ContentRefusedError, NoApiKeyError, TransientProviderError
from batchor.schema.tools import Tool


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with the first user message: its bytes, or a URL the provider fetches itself."""

    media_type: str  # image/png, image/jpeg, image/gif, image/webp, application/pdf
    data: bytes | None = None
    url: str | None = None

    @property
    def is_pdf(self) -> bool:
        return self.media_type == "application/pdf"

    def base64(self) -> str:
        return base64.b64encode(self.data or b"").decode("ascii")

    def data_uri(self) -> str:
        return f"data:{self.media_type};base64,{self.base64()}"


@dataclass(frozen=True, slots=True)
class CacheControl:
    """Where a request's shared prefix ends, for the provider's prompt cache (providers/caching.py):
    the first `messages` messages and `chars` characters of the next one are the same for every
    row of the step. Not part of the request key: the answer does not depend on the cache."""

    key: str  # the step's cache key (OpenAI prompt_cache_key)
    messages: int
    chars: int
    ttl: str | None = None  # Anthropic 5m (default) | 1h; OpenAI 24h (extended retention)
    explicit: bool = False  # Gemini: the system prompt in an explicit context cache (providers/gemini)


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One request exactly as planned (the request key is a hash of these fields)."""

    key: str
    model: str
    messages: tuple[dict[str, str], ...]  # [{"role": "system"|"user", "content": str}]
    params: dict[str, Any]  # temperature, max_tokens, top_p, seed, ...
    schema: dict[str, Any] | None = None  # JSON schema for structured output, None for text
    schema_name: str = "output"
    attachments: tuple[Attachment, ...] = ()  # after the text of the first user message, in order
    tools: tuple[Tool, ...] = ()  # functions the answer calls (a tool step: `schema` is then None)
    tool_choice: str | None = None  # required | auto | a tool's name
    # How it is sent, not what is asked (neither is in the request key):
    cache: CacheControl | None = None  # the shared prefix to mark for the provider's prompt cache
    service_tier: str | None = None  # flex: OpenAI's flex processing
    tier_fallback: bool = False  # flex without capacity (429 resource unavailable): send at the standard tier


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function the model asked to call instead of (or beside) answering: its name and arguments
    (parsed JSON; the raw text when the provider sent arguments that are not JSON)."""

    name: str
    arguments: Any = None


@dataclass(slots=True)
class Completion:
    """A provider's answer, normalised."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # of input_tokens, read from the prompt cache
    cache_write_tokens: int = 0  # of input_tokens, written to the prompt cache (Anthropic bills them higher)
    cache_write_1h_tokens: int = 0  # of cache_write_tokens, written for an hour
    service_tier: str | None = None  # the tier that served it, as the provider reports it (OpenAI: flex, default)
    finish_reason: str | None = None
    model: str | None = None  # model name the provider reports
    usage_known: bool = True  # False: the response carried no usage (cost is then an estimate)
    raw: dict[str, Any] | None = None  # raw response body, kept for audit when enabled
    rate_limits: dict[str, float] = field(default_factory=dict)  # parsed ratelimit headers
    lost: bool = False  # the answer was cut off in transit: its length is unknown too (see `answer_cut`)
    # Tool calls (OpenAI `tool_calls`, Anthropic `tool_use`, Gemini `functionCall`): a tool step's answer,
    # else calls batchor did not ask for; a forced tool carrying a structured answer is the answer's text.
    tool_calls: tuple[ToolCall, ...] = ()


TRUNCATED_FINISH_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS", "max_output_tokens"})


def is_truncated(completion: Completion) -> bool:
    """Cut off by the token limit: OpenAI `length` (Responses: incomplete, max_output_tokens),
    Anthropic `max_tokens`, Gemini `MAX_TOKENS`."""
    return completion.finish_reason in TRUNCATED_FINISH_REASONS


def answer_tool(schema_name: str) -> str:
    """The name of the tool a structured answer is forced through (Anthropic's fallback), from the
    request's `schema_name` (the step's name): the one tool call that is the answer, not a call."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in schema_name)
    return cleaned[:64] or "output"


# Tokens a provider adds to every request that carries tools, besides the definitions: Anthropic's
# tool-use system prompt (its pricing table: 346 with tool_choice auto, 313 with any or one tool).
_TOOL_PROMPT_TOKENS = {"anthropic": {"auto": 346, "required": 313}}
TOOL_FRAMING_TOKENS = 12  # per tool: the wrapper each definition is rendered in (type, name, braces)


def tool_prompt_tokens(provider: str, choice: str | None) -> int:
    """The provider's own prompt for tool use (0 where it bills none beyond the definitions)."""
    table = _TOOL_PROMPT_TOKENS.get(provider, {})
    return table.get("auto" if choice == "auto" else "required", 0)


def tool_arguments(value: Any) -> Any:
    """A tool call's arguments as JSON: OpenAI sends them as a JSON string, the others as objects."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def refused(message: str, completion: Completion) -> ContentRefusedError:
    """A refusal that was still billed: the error carries the answer's usage for the ledger."""
    error = ContentRefusedError(message)
    error.completion = completion
    return error


def unreadable_answer(exc: ValueError) -> TransientProviderError:
    """A 200 whose body is not JSON (cut short, a proxy's page): the provider answered, so it billed
    the call. Retried like any transient error, the attempt is recorded at an estimate (usage
    unknown: the body's length stands in for the answer's)."""
    body = exc.doc if isinstance(exc, json.JSONDecodeError) else getattr(exc, "object", b"")
    text = body if isinstance(body, str) else bytes(body).decode("utf-8", "replace")
    error = TransientProviderError(f"provider sent invalid JSON: {exc}", status=200)
    error.completion = Completion(text=text, usage_known=False)
    return error


def answer_cut(message: str) -> TransientProviderError:
    """The provider sent its status line and part of the body, then the connection dropped: it ran
    the call, so it billed it. Retried like any transient error, the attempt is recorded at an
    estimate (usage and length unknown: the plan's input count and expected output stand in)."""
    error = TransientProviderError(message)
    error.completion = Completion(text="", usage_known=False, lost=True)
    return error


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Connection settings resolved from the spec; the key itself is read from env at call time."""

    provider: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 60.0
    options: dict[str, Any] = field(default_factory=dict)  # provider-specific (api: responses)


@dataclass(frozen=True, slots=True)
class EmbedRequest:
    """Many texts embedded in one call (their order is the order of the vectors back)."""

    model: str
    texts: tuple[str, ...]
    dimensions: int | None = None  # asked for (a model that can shorten its vectors); None: the model's size
    size: int | None = None  # the size the plan expects (the mock makes vectors of it)


@dataclass(slots=True)
class Embeddings:
    """A provider's answer to an `EmbedRequest`: one vector per text, and what the call billed."""

    vectors: list[list[float] | None]  # in the texts' order; None: the answer lacks that text's vector
    input_tokens: int = 0  # the whole call's
    usage_known: bool = True  # False: the response carried no usage (Gemini): cost is an estimate
    model: str | None = None
    rate_limits: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Embedder(Protocol):
    """A provider that embeds texts (OpenAI /v1/embeddings and compatible servers, Gemini, mock)."""

    async def embed(self, request: EmbedRequest) -> Embeddings:
        """Embed every text in one call; raise a ProviderError subclass on failure."""
        ...


@dataclass(frozen=True, slots=True)
class CacheFee:
    """A provider-side cache a run holds, as the provider bills it (Gemini explicit context caches):
    its tokens once at the input rate when made, and storage per token-hour from `created_at` to
    `held_until` (epoch seconds: its expiry while it lives, the time it was deleted once gone)."""

    key: str  # the step's cache key (`CacheControl.key`): which step it serves
    name: str  # the provider's name for it
    model: str
    tokens: int
    created_at: float
    held_until: float
    deleted: bool = False


CacheFeeSink = Callable[[CacheFee], None]


@runtime_checkable
class HoldsCaches(Protocol):
    """An adapter that makes caches billed apart from requests: it reports each one made, renewed
    or deleted to the sink the engine gives it (which records the fee in the ledger)."""

    def report_cache_fees(self, sink: CacheFeeSink) -> None: ...


@runtime_checkable
class Provider(Protocol):
    name: str

    async def complete(self, request: LLMRequest) -> Completion:
        """Send one request; raise a ProviderError subclass on failure."""
        ...

    async def aclose(self) -> None: ...


def read_api_key(env_var: str, provider: str) -> str:
    """The key from the environment, or a `no_api_key` error naming the variable to set."""
    value = os.environ.get(env_var, "").strip()
    if not value:
        raise NoApiKeyError(
            f"No API key for provider '{provider}': environment variable {env_var} is not set.",
            hint=f"set {env_var}, or name another variable in the model block (`api_key_env: OTHER_VAR` "
            "with `allow_key_env: true`), or rehearse offline with `--mock`",
        )
    return value
