"""Provider facts about prompt caching and flex processing, and the controls each API takes.

Flex (OpenAI `service_tier: "flex"`, on the models the price table lists a flex price for) bills
Batch API rates at realtime latency, and answers 429 "Resource Unavailable" when busy.

A step's requests share a prefix (the system prompt, the static head of the prompt template):
providers bill it far cheaper when they read it from their prompt cache. What each one needs:
- Anthropic caches only what a `cache_control` breakpoint marks, and only when the marked prefix
  reaches the model's minimum; a miss writes the prefix (billed 1.25x input for 5 minutes, 2x for
  an hour: `ttl: "1h"`), a hit reads it (0.1x). Usage: `cache_creation_input_tokens`,
  `cache_read_input_tokens` (and `cache_creation.ephemeral_{5m,1h}_input_tokens`).
- Bedrock's Converse API caches up to a `cachePoint` block (`{"type": "default"}`: five minutes)
  in the system prompt or a message, for Claude models (Anthropic's minimums; not Claude 3 Haiku
  or Claude 3.5 Sonnet) and Amazon Nova (from 1K tokens). Usage: `cacheReadInputTokens`,
  `cacheWriteInputTokens` (Claude's writes billed at the table's cache-write rate).
- OpenAI caches prompts of 1,024 tokens or more by itself, in 128-token steps, reported as
  `prompt_tokens_details.cached_tokens`; `prompt_cache_key` routes a step's requests to the same
  cache, `prompt_cache_retention: "24h"` keeps it longer on the models that offer it (the
  prompt-caching guide's list: GPT-4.1, GPT-5 to 5.4 and their codex variants; from GPT-5.5 on,
  24 hours is the only retention there is). Others answer 400, so `validate` refuses it for them.
  From GPT-5.6 on (`prompt_cache_options`, in the openai SDK's types) a request can mark where its
  reusable prefix ends (`prompt_cache_breakpoint` on a text part) and turn off the implicit
  breakpoint (`mode: explicit`); writes are reported (`prompt_tokens_details.cache_write_tokens`)
  and billed (1.25x input in the price table), and `prompt_cache_retention` is deprecated.
- Gemini 2.5 and later cache implicitly by prefix (`usageMetadata.cachedContentTokenCount`): the
  shared part first is all it takes. With `cache: {explicit: true}` a step's system prompt goes
  into an explicit context cache instead (`client.caches.create`, then `cached_content` on each
  request, which must then carry no system instruction): every request reads it at the cached
  rate; creating it bills its tokens once at the input rate, and storing it bills per token-hour
  (`GEMINI_STORAGE`) until it is deleted or expires. Batch lines name it too on the Developer API
  (google-genai 3.6's batch converter maps an inlined request's `config.cached_content` to the
  line's `cachedContent`; a file line is REST already), the cache then living a batch window
  (`BATCH_CACHE_TTL_S`); Vertex AI's batch prediction refuses `cachedContent`.

Minimums from the providers' documentation (Anthropic prompt caching, OpenAI prompt caching,
Gemini context caching pages, checked 2026-12; Gemini 2.5 Flash's 1,024 is what its API enforces).
"""

from __future__ import annotations

import re
from typing import Any

from batchor.providers.base import CacheControl

# (model name prefix, smallest cacheable prefix in tokens): the first match wins.
_MINIMUMS: dict[str, tuple[tuple[str, int], ...]] = {
    "anthropic": (
        ("claude-opus-4-5", 4096),
        ("claude-opus-4-6", 4096),
        ("claude-haiku-4", 4096),
        ("claude-3-5-haiku", 2048),
        ("claude-3-haiku", 2048),
        ("claude-haiku-3", 2048),
        ("claude", 1024),
    ),
    "openai": (("", 1024),),
    "gemini": (
        ("gemini-2.5-flash-lite", 2048),
        ("gemini-2.5-flash", 1024),
        ("gemini-2.5-pro", 2048),
        ("gemini-1", 0),
        ("gemini-2.0", 0),
        ("gemini", 4096),
    ),
}
# Bedrock: Claude models as on Anthropic's API (by the id without `anthropic.`), but for those Bedrock
# never offered caching to; Amazon Nova from 1K tokens (Bedrock's prompt caching page).
_BEDROCK_MINIMUMS = (
    ("anthropic.claude-3-haiku", 0),
    ("anthropic.claude-3-sonnet", 0),
    ("anthropic.claude-3-opus", 0),
    ("anthropic.claude-3-5-sonnet", 0),  # preview customers only
    ("amazon.nova", 1024),
)
_BEDROCK_PROFILE = re.compile(r"^(?:us|eu|apac|us-gov|global|jp|au|ca)\.")
OPENAI_CACHE_STEP = 128  # OpenAI reports cached tokens in steps of this many, from its minimum
TTLS = {"anthropic": ("5m", "1h"), "openai": ("24h",), "bedrock": ("5m",)}  # `cache.ttl` values each provider takes
# OpenAI families that take `prompt_cache_retention: "24h"` (a dated snapshot of one takes it too);
# every model from GPT-5.5 on does (its only retention), see `extended_retention`.
_RETENTION_24H = frozenset({
    "gpt-4.1", "gpt-5", "gpt-5-codex", "gpt-5.1", "gpt-5.1-chat-latest", "gpt-5.1-codex",
    "gpt-5.1-codex-mini", "gpt-5.1-codex-max", "gpt-5.2", "gpt-5.3-codex", "gpt-5.4",
})  # fmt: skip
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?")
# Gemini explicit context caches: USD per million tokens stored per hour (Gemini API pricing), by
# model name prefix, the first match wins; the cache's lifetime, renewed while a run uses it.
GEMINI_STORAGE: tuple[tuple[str, float], ...] = (("gemini-2.5-pro", 4.5), ("gemini-3-pro", 4.5), ("gemini", 1.0))
EXPLICIT_TTL_S = 3600
BATCH_CACHE_TTL_S = 25 * 3600  # a batch step's context cache: a batch's 24-hour window and an hour to collect it
WRITES_BILLED = frozenset({"anthropic", "bedrock"})  # a miss writes the prefix at its own price
# OpenAI's flex tier answers 429 "Resource Unavailable" when it has no capacity: a wait, not a
# rate limit of the account, and never a reason to send at the standard tier unless allowed.
_FLEX_UNAVAILABLE = ("resource unavailable", "resource_unavailable")


def flex_unavailable(message: str) -> bool:
    """Whether a 429's message is flex processing's "Resource Unavailable"."""
    lowered = message.lower()
    return any(marker in lowered for marker in _FLEX_UNAVAILABLE)


def extended_retention(model: str) -> bool:
    """Whether OpenAI's `model` takes `prompt_cache_retention: "24h"`."""
    name = _SNAPSHOT.sub("", model.lower())
    version = _GPT_VERSION.match(name)
    if version and (int(version[1]), int(version[2] or 0)) >= (5, 5):
        return True
    return name in _RETENTION_24H


def cache_options(model: str) -> bool:
    """Whether OpenAI's `model` takes `prompt_cache_options` and `prompt_cache_breakpoint` (the
    openai SDK's types: gpt-5.6 and later), where cache writes are billed (1.25x input in the
    price table) and `prompt_cache_retention` is deprecated (24 hours is the only retention)."""
    version = _GPT_VERSION.match(_SNAPSHOT.sub("", model.lower()))
    return bool(version) and (int(version[1]), int(version[2] or 0)) >= (5, 6)  # type: ignore[index]


def writes_billed(provider: str, model: str) -> bool:
    """Whether a miss writes the prefix at a price of its own: Anthropic, OpenAI's gpt-5.6 on."""
    return provider in WRITES_BILLED or (provider == "openai" and cache_options(model))


def storage_usd_per_token_hour(model: str) -> float:
    """What storing one token in a Gemini explicit context cache costs per hour."""
    name = model.removeprefix("models/").lower()
    return next((usd for prefix, usd in GEMINI_STORAGE if name.startswith(prefix)), 1.0) / 1e6


def min_cacheable_tokens(provider: str, model: str) -> int:
    """The smallest prefix `model` caches, in tokens; 0 when it has no prompt cache batchor can use."""
    name = model.removeprefix("models/").lower()
    if provider == "bedrock":
        name = _BEDROCK_PROFILE.sub("", name)
        found = next((tokens for prefix, tokens in _BEDROCK_MINIMUMS if name.startswith(prefix)), None)
        if found is not None or not name.startswith("anthropic."):
            return found or 0
        provider, name = "anthropic", name.removeprefix("anthropic.")
    return next((tokens for prefix, tokens in _MINIMUMS.get(provider, ()) if name.startswith(prefix)), 0)


def readable_tokens(provider: str, prefix_tokens: int, model: str = "") -> int:
    """Tokens of a shared prefix a cache hit reads: OpenAI counts whole 128-token steps only (not
    at an explicit breakpoint, which models with `prompt_cache_options` are sent)."""
    if provider != "openai" or prefix_tokens < 1024 or cache_options(model):
        return prefix_tokens
    return prefix_tokens - (prefix_tokens - 1024) % OPENAI_CACHE_STEP


def openai_fields(control: CacheControl | None, model: str = "", *, marked: bool = True) -> dict[str, Any]:
    """`prompt_cache_key` (one per step) and, when asked, the extended retention; on models with
    `prompt_cache_options`, explicit breakpoints only (`openai_breakpoint` marks the shared prefix's
    end, so a miss writes that prefix and not each row's own text) and no deprecated retention."""
    if control is None:
        return {}
    fields: dict[str, Any] = {"prompt_cache_key": control.key}
    if cache_options(model):  # `marked`: the body carries the breakpoint (without one, explicit mode caches nothing)
        fields.update({"prompt_cache_options": {"mode": "explicit"}} if marked else {})
    elif control.ttl == "24h":
        fields["prompt_cache_retention"] = "24h"
    return fields


def openai_breakpoint(messages: list[dict[str, Any]], control: CacheControl | None, model: str) -> list[dict[str, Any]]:
    """Chat `messages` with a `prompt_cache_breakpoint` where the shared prefix ends (models with
    `prompt_cache_options` only): on the last wholly shared message, or on the shared head of the
    next one (split into a text part of its own)."""
    if control is None or not cache_options(model):
        return messages
    mark, turns = {"mode": "explicit"}, list(messages)
    if control.chars and control.messages < len(turns):
        turn = turns[control.messages]
        turns[control.messages] = {**turn, "content": _split_head(turn["content"], control.chars, mark, _OPENAI_MARK)}
    elif 0 < control.messages <= len(turns):
        turn = turns[control.messages - 1]
        turns[control.messages - 1] = {**turn, "content": _mark_last(turn["content"], mark, _OPENAI_MARK)}
    return turns


def anthropic_breakpoint(body: dict[str, Any], control: CacheControl | None, systems: int) -> dict[str, Any]:
    """`body` with a `cache_control` breakpoint where the shared prefix ends: on the system prompt,
    or inside the first turn (its shared head becomes a text block of its own). `systems`: how many
    of the request's messages were system messages (they became `body["system"]`)."""
    if control is None:
        return body
    mark = {"type": "ephemeral", **({"ttl": control.ttl} if control.ttl == "1h" else {})}
    turn = control.messages - systems  # turns wholly shared
    turns = list(body["messages"])
    if control.chars and 0 <= turn < len(turns):
        turns[turn] = {**turns[turn], "content": _split_head(turns[turn]["content"], control.chars, mark)}
    elif 0 < turn <= len(turns):
        turns[turn - 1] = {**turns[turn - 1], "content": _mark_last(turns[turn - 1]["content"], mark)}
    elif turn == 0 and body.get("system"):
        return {**body, "system": [{"type": "text", "text": body["system"], "cache_control": mark}]}
    else:
        return body
    return {**body, "messages": turns}


def bedrock_cache_point(body: dict[str, Any], control: CacheControl | None, systems: int) -> dict[str, Any]:
    """Converse `body` with a `cachePoint` block where the shared prefix ends: after the system
    prompt, or inside the first turn (its shared head becomes a text block of its own). Bedrock
    keeps it for its default five minutes (no `ttl` is sent)."""
    if control is None:
        return body
    point = {"cachePoint": {"type": "default"}}
    turn, turns = control.messages - systems, list(body["messages"])
    if control.chars and 0 <= turn < len(turns) and "text" in turns[turn]["content"][0]:
        blocks = turns[turn]["content"]
        text = blocks[0]["text"]
        head, rest = (text[: control.chars], text[control.chars :]) if text[control.chars :].strip() else (text, "")
        split = [{"text": head}, point, *([{"text": rest}] if rest else [])]
        turns[turn] = {**turns[turn], "content": split + blocks[1:]}
    elif 0 < turn <= len(turns):
        turns[turn - 1] = {**turns[turn - 1], "content": [*turns[turn - 1]["content"], point]}
    elif turn == 0 and body.get("system"):
        return {**body, "system": [*body["system"], point]}
    else:
        return body
    return {**body, "messages": turns}


_OPENAI_MARK = "prompt_cache_breakpoint"


def _split_head(content: Any, chars: int, mark: dict[str, Any], field: str = "cache_control") -> Any:
    """The content with its first `chars` characters as a marked text block of their own."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if not blocks or blocks[0].get("type") != "text":
        return content
    text = blocks[0]["text"]
    head, rest = text[:chars], text[chars:]
    if not rest.strip():  # a text block must not be blank: the whole text is the head
        head, rest = text, ""
    split = [{**blocks[0], "text": head, field: mark}]
    if rest:
        split.append({"type": "text", "text": rest})
    return split + blocks[1:]


def _mark_last(content: Any, mark: dict[str, Any], field: str = "cache_control") -> Any:
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return [*blocks[:-1], {**blocks[-1], field: mark}] if blocks else content
