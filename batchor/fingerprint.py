"""Fingerprints: one canonical JSON and one request key for everything batchor hashes.

The request key is the cache identity of a request: a hash over exactly what is sent (provider,
model, params, messages, schema). Display names, paths and concurrency never enter it, so the same
request asked by any spec or run is answered once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Stable JSON: sorted keys, no whitespace, UTF-8 kept (not ASCII-escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def request_key(
    provider: str,
    model: str,
    params: dict[str, Any],
    messages: list[dict[str, str]] | tuple[dict[str, str], ...],
    schema: dict[str, Any] | None,
) -> str:
    """Content hash of a request; 32 hex chars, safe as any provider's batch custom_id."""
    return request_key_from_parts(request_prefix(provider, model, params, schema), messages)


def request_prefix(provider: str, model: str, params: dict[str, Any], schema: dict[str, Any] | None) -> str:
    """The per-step part of the request key, computed once per step rather than per row."""
    return canonical_json({"provider": provider, "model": model, "params": params, "schema": schema})


def request_key_from_parts(prefix: str, messages: Any) -> str:
    return request_key_from_json(prefix, canonical_json(list(messages)))


def request_key_from_json(prefix: str, messages_json: str) -> str:
    """The request key when the messages' canonical JSON is already at hand (the hot path)."""
    return hashlib.sha256((prefix + "\x1f" + messages_json).encode("utf-8")).hexdigest()[:32]
