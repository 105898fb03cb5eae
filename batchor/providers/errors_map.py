"""Shared translation of HTTP failures into batchor's provider error classes.

Each adapter extracts (status, message, code, retry-after) from its SDK's exception and calls
`classify`; the decision of what is transient lives here once.
"""

from __future__ import annotations

import math

from batchor.errors import (
    AuthenticationError,
    ContentRefusedError,
    ContextLengthError,
    InvalidRequestError,
    ModelNotFoundError,
    ProviderError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)

_QUOTA_MARKERS = ("insufficient_quota", "billing", "credit balance", "quota exceeded", "exceeded your current quota")
_CONTEXT_MARKERS = ("context_length", "context length", "maximum context", "too many tokens", "prompt is too long")


def classify(
    status: int | None,
    message: str,
    code: str | None = None,
    retry_after: float | None = None,
    rate_limits: dict[str, float] | None = None,
) -> ProviderError:
    text = f"{code or ''} {message}".lower()
    if any(marker in text for marker in _QUOTA_MARKERS):
        return QuotaExhaustedError(message, status=status)
    if status == 429:
        return RateLimitedError(message, status=status, retry_after=retry_after, rate_limits=rate_limits)
    if status is None or status >= 500 or status in (408, 409):
        return TransientProviderError(message, status=status, retry_after=retry_after)
    if status in (401, 403):
        return AuthenticationError(message, status=status)
    if status == 404 and "model" in text:
        return ModelNotFoundError(message, status=status)
    if any(marker in text for marker in _CONTEXT_MARKERS):
        return ContextLengthError(message, status=status)
    if "content_filter" in text or "content policy" in text or "safety" in text:
        return ContentRefusedError(message, status=status)
    return InvalidRequestError(message, status=status)


# Seconds to wait, by header and unit, in order of preference. Gateways (LiteLLM) pass the
# upstream provider's header on as `llm_provider-<name>`.
_RETRY_AFTER_HEADERS = (
    ("retry-after-ms", 1000.0),
    ("retry-after", 1.0),
    ("llm_provider-retry-after-ms", 1000.0),
    ("llm_provider-retry-after", 1.0),
)


def parse_retry_after(headers: object) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date), or the same
    headers passed on by a gateway (`llm_provider-retry-after-ms`, `llm_provider-retry-after`)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, per_second in _RETRY_AFTER_HEADERS:
        value = get(name)
        seconds = _seconds(str(value).strip(), per_second) if value else None
        if seconds is not None:
            return seconds
    return None


def _seconds(value: str, per_second: float) -> float | None:
    """A number of `1 / per_second` seconds, or (for a header in seconds) an HTTP date."""
    try:
        seconds = float(value) / per_second
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except ValueError:
        pass
    if per_second != 1.0:
        return None
    import email.utils
    import time

    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, parsed.timestamp() - time.time())
