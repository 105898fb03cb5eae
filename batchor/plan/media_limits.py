"""Each provider's documented limits on attachments, checked at plan time per request.

The limits themselves are provider facts (`providers/<name>/facts.py`); an OpenAI-compatible
server without facts of its own is held to OpenAI's.

A request over a limit would be refused by the provider after a paid round trip (or sink a whole
Batch API file), so its row fails before any call with the limit it broke.
"""

from __future__ import annotations

from typing import Any

from batchor.providers.facts import PDF, MediaLimits, provider_facts

__all__ = ["MediaLimits", "file_problem", "limits_for", "request_problem"]

_MANY_IMAGES = 20


def limits_for(provider: str) -> MediaLimits:
    """A provider's limits (OpenAI-compatible servers are held to OpenAI's)."""
    limits = provider_facts(provider).media or provider_facts("openai").media
    assert limits is not None
    return limits


def file_problem(limits: MediaLimits, ref: dict[str, Any], provider: str) -> str | None:
    """Why one described attachment cannot be sent to `provider`, or None."""
    kind = ref["media_type"]
    if kind not in limits.types:
        return f"{provider} does not accept {kind} attachments (accepted: {', '.join(limits.types)})"
    if "url" in ref and kind not in limits.url_types:
        return (
            f"{provider} does not fetch {kind} from a URL; batchor never downloads files itself: "
            "download it and give its path"
        )
    size = _base64_size(ref)
    if limits.max_file_bytes is not None and kind != PDF and size > limits.max_file_bytes:
        return f"{size:,} bytes once base64-encoded, over {provider}'s {limits.max_file_bytes:,}-byte limit per image"
    side = max(int(ref.get("width") or 0), int(ref.get("height") or 0))
    if limits.max_image_side is not None and side > limits.max_image_side:
        return f"{side} px on its long side, over {provider}'s {limits.max_image_side}-px limit"
    pages = int(ref.get("pages") or 0)
    if limits.max_pdf_pages is not None and pages > limits.max_pdf_pages:
        return f"{pages} pages, over {provider}'s {limits.max_pdf_pages}-page limit per request"
    return None


def request_problem(limits: MediaLimits, refs: list[dict[str, Any]], provider: str) -> str | None:
    """Why a request's attachments together break `provider`'s limits, or None."""
    if len(refs) > limits.max_files:
        return f"{len(refs)} attachments, over {provider}'s limit of {limits.max_files} per request"
    total = sum(_base64_size(r) for r in refs)
    if total > limits.max_request_bytes:
        return f"attachments total {total:,} bytes base64-encoded, over {provider}'s {limits.max_request_bytes:,}"
    pdf_bytes = sum(_base64_size(r) for r in refs if r["media_type"] == PDF)
    cap = limits.max_pdf_request_bytes
    if cap is not None and pdf_bytes > cap:
        return f"PDFs total {pdf_bytes:,} bytes base64-encoded, over {provider}'s {cap:,} per request"
    side = max((max(int(r.get("width") or 0), int(r.get("height") or 0)) for r in refs), default=0)
    if limits.many_images_side is not None and len(refs) > _MANY_IMAGES and side > limits.many_images_side:
        return (
            f"{len(refs)} attachments with one {side} px on its long side: over {_MANY_IMAGES} images, "
            f"{provider} takes at most {limits.many_images_side} px a side"
        )
    pages = sum(int(r.get("pages") or 0) for r in refs)
    if limits.max_pdf_pages is not None and pages > limits.max_pdf_pages:
        return f"PDFs total {pages} pages, over {provider}'s {limits.max_pdf_pages}-page limit per request"
    return None


def _base64_size(ref: dict[str, Any]) -> int:
    return 0 if "url" in ref else (int(ref.get("bytes") or 0) + 2) // 3 * 4
