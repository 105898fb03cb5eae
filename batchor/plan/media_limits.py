"""Each provider's documented limits on attachments, checked at plan time per request.

A request over a limit would be refused by the provider after a paid round trip (or sink a whole
Batch API file), so its row fails before any call with the limit it broke.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchor.plan.media_info import IMAGE_TYPES, PDF

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaLimits:
    """What one provider accepts in one request."""

    types: tuple[str, ...]
    max_files: int
    max_request_bytes: int  # base64 payload of all attachments together
    max_file_bytes: int | None = None  # one file's base64 size
    max_pdf_pages: int | None = None
    max_image_side: int | None = None
    url_types: tuple[str, ...] = ()  # types the provider fetches itself from an https:// URL
    many_images_side: int | None = None  # long-side limit once a request has more than 20 images


# OpenAI Chat Completions: images (non-animated GIF) by URL or data URI, PDFs as base64 `file`
# parts (no URLs); 500 images, 50 MB of images; PDFs 100 pages / 32 MB per request.
# Anthropic: 100 images, 5 MB each (base64), 8000 px a side (2000 px with over 20 images);
# PDFs 100 pages, 32 MB per request; images and PDFs by URL. Gemini: inline data up to 20 MB per
# request, PNG/JPEG/WebP (no GIF), 3,000 images, PDFs up to 1,000 pages; no plain https:// URLs.
LIMITS: dict[str, MediaLimits] = {
    "openai": MediaLimits((*IMAGE_TYPES, PDF), 500, 50 * MB, max_pdf_pages=100, url_types=IMAGE_TYPES),
    "anthropic": MediaLimits(
        (*IMAGE_TYPES, PDF),
        100,
        32 * MB,
        max_file_bytes=5 * MB,
        max_pdf_pages=100,
        max_image_side=8000,
        url_types=(*IMAGE_TYPES, PDF),
        many_images_side=2000,
    ),
    "gemini": MediaLimits(("image/png", "image/jpeg", "image/webp", PDF), 3000, 20 * MB, max_pdf_pages=1000),
}
_PDF_MAX_BYTES = 32 * MB  # OpenAI and Anthropic: PDF content per request
_MANY_IMAGES = 20


def limits_for(provider: str) -> MediaLimits:
    """A provider's limits (OpenAI-compatible servers are held to OpenAI's)."""
    return LIMITS.get(provider, LIMITS["openai"])


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
    if provider != "gemini" and pdf_bytes > _PDF_MAX_BYTES:
        return f"PDFs total {pdf_bytes:,} bytes base64-encoded, over {provider}'s {_PDF_MAX_BYTES:,} per request"
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
