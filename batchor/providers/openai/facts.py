"""OpenAI's facts for planning (providers/facts.py): attachments, image tokens, embeddings,
context windows, flex processing, which models keep a prompt cache 24 hours. OpenAI-compatible
servers without facts of their own are held to the attachment rules."""

from __future__ import annotations

import math

from batchor.errors import CacheRetentionUnsupportedError
from batchor.providers.caching import extended_retention
from batchor.providers.facts import IMAGE_TYPES, MB, PDF, EmbedModel, GroupLimits, MediaLimits, ProviderFacts

PDF_PAGE_TOKENS = 1_000  # PDFs: extracted text plus one page image per page, estimated a page

_PRICES = "https://platform.openai.com/docs/pricing (embeddings; Batch API 50 % off)"


def image_tokens(width: int, height: int, pages: int) -> int:
    """Detail high/auto: fit in 2048x2048, scale the short side down to 768, then 85 + 170 per
    512-px tile."""
    if pages:
        return pages * PDF_PAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = scaled(w, h, 2048 / max(w, h))
    if min(w, h) > 768:
        w, h = scaled(w, h, 768 / min(w, h))
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def check_retention(model: str, where: str) -> None:
    """`cache.ttl` (`prompt_cache_retention: 24h`) only on the models that offer extended retention."""
    if not extended_retention(model):
        raise CacheRetentionUnsupportedError(
            f"{where}: openai:{model} has no extended prompt-cache retention (`prompt_cache_retention: 24h`)",
            hint="leave `cache.ttl` out (the cache still works, kept minutes rather than hours), "
            "or use a model that offers it: gpt-4.1, gpt-5, gpt-5.1 to gpt-5.4, gpt-5.5 and later",
        )


def scaled(w: float, h: float, factor: float) -> tuple[float, float]:
    return math.floor(w * factor), math.floor(h * factor)


FACTS = ProviderFacts(
    # Chat Completions: images (non-animated GIF) by URL or data URI, PDFs as base64 `file` parts
    # (no URLs); 500 images, 50 MB of images; PDFs 100 pages / 32 MB per request.
    media=MediaLimits(
        (*IMAGE_TYPES, PDF), 500, 50 * MB, max_pdf_pages=100, url_types=IMAGE_TYPES, max_pdf_request_bytes=32 * MB
    ),
    image_tokens=image_tokens,
    embed_models=(
        EmbedModel("openai", "text-embedding-3-small", 1536, True, 8191, 0.02, _PRICES),
        EmbedModel("openai", "text-embedding-3-large", 3072, True, 8191, 0.13, _PRICES),
        EmbedModel("openai", "text-embedding-ada-002", 1536, False, 8191, 0.10, _PRICES),
    ),
    # "input ... cannot exceed 2048 dimensions" (array items) and 300,000 tokens summed over all
    # inputs of one request.
    embed_group=GroupLimits(2048, 300_000),
    context_windows=(
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("chatgpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
    ),
    prompt_cache=True,
    exact_tokens=True,
    schema_billed=True,
    flex=True,
    check_cache_ttl=check_retention,
)
