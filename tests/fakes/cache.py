"""Prompt caching as each provider reports it, and the fake's own bill at cache prices.

- Anthropic caches only up to a ``cache_control`` breakpoint, and only when that prefix reaches
  the model's minimum (1,024 tokens; 2,048 for Claude 3.x Haiku; 4,096 for Haiku 4.5 and Opus
  4.5/4.6): a miss writes it (``cache_creation_input_tokens``, split by ``ttl`` into
  ``cache_creation.ephemeral_5m/1h_input_tokens``), a hit within its lifetime reads it
  (``cache_read_input_tokens``); ``input_tokens`` is what is left.
- Bedrock's Converse caches up to its last ``cachePoint`` block as Anthropic does (Claude's
  minimums; Amazon Nova's 1K; none for Claude 3 Haiku and 3.5 Sonnet), reported as
  ``cacheReadInputTokens`` and ``cacheWriteInputTokens``.
- OpenAI caches by itself from 1,024 tokens, in 128-token steps, once a machine has seen the
  prefix (``prompt_tokens_details.cached_tokens``). From GPT-5.6, with ``prompt_cache_options:
  {mode: explicit}``, only up to a ``prompt_cache_breakpoint``: a miss writes that prefix
  (``cache_write_tokens``, billed), a hit reads it. Requests with the same ``prompt_cache_key``
  go to one machine; without one they are spread over ``OPENAI_MACHINES``, so each machine
  misses once more.
- Gemini 2.5+ caches implicitly (``usageMetadata.cachedContentTokenCount``) from 1,024 tokens
  (2.5 Flash), 2,048 (2.5 Pro, Flash-Lite), 4,096 (3.x).
- A batch's rows are run by parallel workers: one row in ``BATCH_COLD_EVERY`` meets a worker
  that has not seen the prefix (a miss, a write where misses write).

Usage is tallied per (provider, model, batch, tier) in ``Stats.usage`` as input (uncached),
cache reads, writes (5 minutes, 1 hour) and output, and Gemini context caches' creation tokens and
storage token-hours, so a test prices the fake's bill itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from .answers import estimate_tokens

OPENAI_MACHINES = 8
BATCH_COLD_EVERY = 4
_ANTHROPIC_MIN = (("claude-opus-4-5", 4096), ("claude-opus-4-6", 4096), ("claude-haiku-4", 4096))
_ANTHROPIC_MIN += (("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048), ("claude", 1024))
_GEMINI_MIN = (("gemini-2.5-flash-lite", 2048), ("gemini-2.5-flash", 1024), ("gemini-2.5-pro", 2048))
_BEDROCK_UNCACHED = tuple(f"anthropic.claude-3-{m}" for m in ("haiku", "sonnet", "opus", "5-sonnet"))
_TTL_S = {"5m": 300.0, "1h": 3600.0}
_RECENT = 16  # prompts each OpenAI machine / Gemini model remembers


@dataclass(slots=True)
class Context:
    """A Gemini explicit context cache (gemini_cache_routes.py)."""

    name: str
    model: str
    text: str
    tokens: int
    created: float
    expires: float
    display_name: str = ""
    billed_to: float = 0.0  # storage billed up to this time


_GONE = "CachedContent not found (or permission denied)"


@dataclass(slots=True)
class CacheUsage:
    read: int = 0
    write: int = 0
    write_1h: int = 0


class PromptCaches:
    """What each provider has cached, shared by realtime calls and batch rows."""

    def __init__(self) -> None:
        self.anthropic: dict[str, float] = {}  # prefix hash -> expiry (monotonic seconds)
        self.recent: dict[str, list[str]] = {}  # machine -> its last prompts
        self.spread = 0  # OpenAI calls without a prompt_cache_key so far
        self.contexts: dict[str, Context] = {}  # Gemini explicit context caches by name

    def live(self, stats: Any, name: str) -> Context | None:
        """The context cache `name` while it lives (an expired one is billed and forgotten)."""
        context = self.contexts.get(name)
        if context is not None and context.expires <= time.time():
            bill_storage(stats, context, context.expires)
            del self.contexts[name]
            stats.contexts_held.pop(name, None)
            return None
        return context

    def resolve(self, stats: Any, call: Any) -> tuple[Any, tuple[int, str] | None]:
        """`call` reading the context cache it names (its text first), or the error Gemini answers."""
        name = call.body.get("cachedContent") or call.body.get("cached_content")
        if call.provider != "gemini" or not name:
            return call, None
        context = self.live(stats, str(name))
        if context is None:
            return call, (403, _GONE)
        if call.body.get("systemInstruction") or call.body.get("system_instruction"):
            return call, (400, "CachedContent can not be used with GenerateContent request setting system_instruction")
        if context.model != call.model.removeprefix("models/"):
            return call, (400, f"Model {call.model} does not match the cached content's model {context.model}")
        return replace(call, input_text=f"{context.text}\n{call.input_text}"), None

    def usage(self, call: Any, total: int, batch_row: int | None = None) -> CacheUsage:
        cold = batch_row is not None and batch_row % BATCH_COLD_EVERY == 0
        if call.provider in ("anthropic", "bedrock"):
            minimum = anthropic_minimum(call.model) if call.provider == "anthropic" else bedrock_minimum(call.model)
            return self._anthropic(call.model, call.body, total, cold, minimum) if minimum else CacheUsage()
        if call.provider == "openai" and (call.body.get("prompt_cache_options") or {}).get("mode") == "explicit":
            return self._marked(f"openai|{call.model}", 1024, {"messages": call.body.get("messages")}, total, cold)
        if call.provider == "openai":
            key = call.body.get("prompt_cache_key")
            if key is None:
                self.spread += 1
            machine = f"openai|{call.model}|{key if key is not None else self.spread % OPENAI_MACHINES}"
            return CacheUsage(read=self._implicit(machine, call.input_text, total, 1024, 128, cold))
        model = call.model.removeprefix("models/")
        context = self.contexts.get(str(call.body.get("cachedContent") or "")) if call.provider == "gemini" else None
        if context is not None:  # an explicit cache: read by every request, however it runs
            return CacheUsage(read=min(context.tokens, total - 1))
        if call.provider == "gemini" and model.startswith(("gemini-2.5", "gemini-3")):
            minimum = gemini_minimum(model)
            return CacheUsage(read=self._implicit(f"gemini|{model}", call.input_text, total, minimum, 1, cold))
        return CacheUsage()

    def _anthropic(self, model: str, body: dict[str, Any], total: int, cold: bool, minimum: int) -> CacheUsage:
        return self._marked(model, minimum, body, total, cold, "cache_control")

    def _marked(
        self, model: str, minimum: int, body: dict[str, Any], total: int, cold: bool, field: str = ""
    ) -> CacheUsage:
        """A cache of the prefix up to a marked breakpoint (Anthropic `cache_control`, Converse's
        `cachePoint`, OpenAI's `prompt_cache_breakpoint` from GPT-5.6): a hit reads it, a miss writes it."""
        prefix, ttl = breakpoint_prefix(body, field or "prompt_cache_breakpoint")
        tokens = estimate_tokens(prefix) if prefix is not None else 0
        if prefix is None or tokens < minimum or tokens >= total:
            return CacheUsage()
        digest = hashlib.sha256(f"{model}\x1f{prefix}".encode()).hexdigest()
        now = time.monotonic()
        hit = not cold and self.anthropic.get(digest, 0.0) > now
        self.anthropic[digest] = max(self.anthropic.get(digest, 0.0), now + _TTL_S.get(ttl, 300.0))
        if hit:
            return CacheUsage(read=tokens)
        return CacheUsage(write=tokens, write_1h=tokens if ttl == "1h" else 0)

    def _implicit(self, machine: str, text: str, total: int, minimum: int, step: int, cold: bool) -> int:
        seen = self.recent.setdefault(machine, [])
        shared = 0 if cold else max((len(os.path.commonprefix([text, old])) for old in seen), default=0)
        seen.append(text)
        del seen[:-_RECENT]
        tokens = min(shared // 4, total - 1)
        if tokens < minimum:
            return 0
        return tokens - (tokens - minimum) % step


def anthropic_minimum(model: str) -> int:
    return next(n for start, n in _ANTHROPIC_MIN if model.startswith(start) or start == "claude")


def bedrock_minimum(model: str) -> int:
    """A Bedrock model's smallest cached prefix: Claude's as on Anthropic's API, Nova's 1K; 0 for
    models Bedrock has no prompt caching for (Claude 3 Haiku, Claude 3.5 Sonnet, Llama, ...)."""
    bare = re.sub(r"^(?:us|eu|apac|global)\.", "", model)
    if bare.startswith("amazon.nova"):
        return 1024
    if not bare.startswith("anthropic.") or bare.startswith(_BEDROCK_UNCACHED):
        return 0
    return anthropic_minimum(bare.removeprefix("anthropic."))


def gemini_minimum(model: str) -> int:
    """The smallest prefix a Gemini model caches (implicitly or in a context cache)."""
    return next((n for prefix, n in _GEMINI_MIN if model.startswith(prefix)), 4096)


def bill_storage(stats: Any, context: Context, until: float) -> None:
    """Add a context cache's storage from what was billed to `until` (token-hours), in total and
    to its model's usage (`usage_row`), which the fake's bill prices."""
    start = max(context.created, context.billed_to)
    hours = context.tokens * max(0.0, min(until, context.expires) - start) / 3600
    stats.context_caches["storage_token_hours"] += hours
    usage_row(stats, f"gemini|{context.model}|realtime|standard")["context_storage_token_hours"] += hours
    context.billed_to = max(start, until)


def held_storage(context: Context) -> dict[str, Any]:
    """What a live context cache will still be billed if nobody deletes it: storage to its expiry."""
    start = max(context.created, context.billed_to)
    hours = context.tokens * max(0.0, context.expires - start) / 3600
    return {"key": f"gemini|{context.model}|realtime|standard", "storage_token_hours": hours}


def usage_row(stats: Any, key: str) -> dict[str, Any]:
    """The usage tally of one provider|model|mode|tier (tokens by kind, context-cache token-hours)."""
    kinds = ("input", "cache_read", "cache_write", "cache_write_1h", "output", "context_create")
    row = stats.usage.setdefault(key, dict.fromkeys(kinds, 0))
    row.setdefault("context_storage_token_hours", 0.0)
    return row


def breakpoint_prefix(body: dict[str, Any], field: str = "cache_control") -> tuple[str | None, str]:
    """The text up to (and with) the last block marked `cache_control` (or up to Converse's last
    `cachePoint` block), joined as the fake joins
    a call's input text (system, then each message's text parts), and the breakpoint's ttl."""
    parts: list[str] = []
    found: tuple[str | None, str] = (None, "5m")
    system = body.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system or [])
    groups = [blocks] + [
        [{"type": "text", "text": m["content"]}] if isinstance(m.get("content"), str) else list(m.get("content") or [])
        for m in body.get("messages") or []
    ]
    for group in groups:
        texts: list[str] = []
        for block in group:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            mark = (
                (block.get(field) or (field == "cache_control" and block.get("cachePoint")))
                if isinstance(block, dict)
                else None
            )
            if mark:
                found = ("\n".join([*parts, "\n".join(texts)]), str(mark.get("ttl") or "5m"))
        if texts:
            parts.append("\n".join(texts))
    return found


def tally(stats: Any, call: Any, answer: Any, batch: bool) -> None:
    """Add one billed answer to the fake's usage, per (provider, model, batch, tier)."""
    tier = "flex" if call.body.get("service_tier") == "flex" else "standard"
    key = f"{call.provider}|{call.model}|{'batch' if batch else 'realtime'}|{tier}"
    row = usage_row(stats, key)
    cached = answer.cache_read + answer.cache_write
    row["input"] += answer.input_tokens - cached
    row["cache_read"] += answer.cache_read
    row["cache_write"] += answer.cache_write - answer.cache_write_1h
    row["cache_write_1h"] += answer.cache_write_1h
    row["output"] += answer.output_tokens
