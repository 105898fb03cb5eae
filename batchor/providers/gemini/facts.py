"""Gemini's facts for planning (providers/facts.py): attachments, image tokens, embeddings,
context windows, its `models/` name prefix, and no embedding jobs on Vertex AI."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from batchor.providers.facts import MB, PDF, EmbedModel, GroupLimits, MediaLimits, ProviderFacts
from batchor.providers.keys import gemini_on_vertex

TILE_TOKENS = 258

_PRICES = "https://ai.google.dev/gemini-api/docs/pricing (Gemini Embedding; Batch API 50 % off)"


def image_tokens(width: int, height: int, pages: int) -> int:
    """258 when both sides are at most 384 px, else 258 per tile (tile side: the short side / 1.5
    clamped to 256..768). PDFs: 258 per page."""
    if pages:
        return pages * TILE_TOKENS
    if width <= 384 and height <= 384:
        return TILE_TOKENS
    tile = min(768.0, max(256.0, min(width, height) / 1.5))
    return TILE_TOKENS * math.ceil(width / tile) * math.ceil(height / tile)


def embed_batch_missing(options: Mapping[str, Any]) -> tuple[str, str] | None:
    """Embedding jobs (asyncBatchEmbedContent) are the Developer API's: Vertex AI has none."""
    if not gemini_on_vertex(options):
        return None
    return (
        "Gemini embedding jobs exist on the Developer API only, not on Vertex AI",
        "Gemini embeddings on Vertex AI run realtime",
    )


FACTS = ProviderFacts(
    # Inline data up to 20 MB per request, PNG/JPEG/WebP (no GIF), 3,000 images, PDFs up to 1,000
    # pages; no plain https:// URLs.
    media=MediaLimits(("image/png", "image/jpeg", "image/webp", PDF), 3000, 20 * MB, max_pdf_pages=1000),
    image_tokens=image_tokens,
    embed_models=(EmbedModel("gemini", "gemini-embedding-001", 3072, True, 2048, 0.15, _PRICES),),
    embed_group=GroupLimits(100, None),  # batchEmbedContents: "at most 100 requests can be in one batch"
    context_windows=(("gemini", 1_048_576),),
    model_prefix="models/",
    prompt_cache=True,
    explicit_cache=True,
    embed_batch_missing=embed_batch_missing,
)
