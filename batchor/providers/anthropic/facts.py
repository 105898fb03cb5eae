"""Anthropic's facts for planning (providers/facts.py): attachments, image tokens, no embeddings,
context windows, prompt-cache write rates."""

from __future__ import annotations

import math

from batchor.providers.facts import IMAGE_TYPES, MB, PDF, MediaLimits, ProviderFacts
from batchor.providers.openai.facts import scaled

PDF_PAGE_TOKENS = 3_000  # text plus a page image, documented as 1,500-3,000 tokens a page
MAX_EDGE = 1568
MAX_PIXELS = 1_150_000


def image_tokens(width: int, height: int, pages: int) -> int:
    """Fit in 1568 px on the long side (and ~1.15 megapixels), then width x height / 750."""
    if pages:
        return pages * PDF_PAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > MAX_EDGE:
        w, h = scaled(w, h, MAX_EDGE / max(w, h))
    if w * h > MAX_PIXELS:
        w, h = scaled(w, h, math.sqrt(MAX_PIXELS / (w * h)))
    return max(1, math.ceil(w * h / 750))


FACTS = ProviderFacts(
    # 100 images, 5 MB each (base64), 8000 px a side (2000 px with over 20 images); PDFs 100
    # pages, 32 MB per request; images and PDFs by URL.
    media=MediaLimits(
        (*IMAGE_TYPES, PDF),
        100,
        32 * MB,
        max_file_bytes=5 * MB,
        max_pdf_pages=100,
        max_image_side=8000,
        url_types=(*IMAGE_TYPES, PDF),
        many_images_side=2000,
        max_pdf_request_bytes=32 * MB,
    ),
    image_tokens=image_tokens,
    embeddings=False,  # Anthropic points to a third party (Voyage AI) for embeddings
    context_windows=(("claude", 200_000),),
    # Published prompt-cache write multiples of the input rate (5 minutes, 1 hour), used where the
    # price table has no write price.
    cache_write_factors=(1.25, 2.0),
    prompt_cache=True,
)
