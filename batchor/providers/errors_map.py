"""Shared translation of HTTP failures into batchor's provider error classes.

Each adapter extracts (status, message, code, retry-after) from its SDK's exception and calls
`classify`; the decision of what is transient lives here once.
"""

from __future__ import annotations

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


def classify(status: int | None, message: str, code: str | None = None,
             retry_after: float | None = None) -> ProviderError:
    text = f"{code or ''} {message}".lower()
    if any(marker in text for marker in _QUOTA_MARKERS):
        return QuotaExhaustedError(message, status=status)
    if status == 429:
        return RateLimitedError(message, status=status, retry_after=retry_after)
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


def parse_retry_after(headers: object) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        import email.utils
        import time

        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None
