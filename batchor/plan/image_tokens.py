"""Input tokens of attachments, per provider's documented rule (kept apart from text counting).

- OpenAI (detail high/auto): fit in 2048x2048, scale the short side down to 768, then
  85 + 170 per 512-px tile. PDFs: extracted text plus one page image per page, estimated at
  ~1,000 tokens a page.
- Anthropic: fit in 1568 px on the long side (and ~1.15 megapixels), then width x height / 750.
  PDFs: text plus a page image, documented as 1,500-3,000 tokens a page: 3,000 counted.
- Gemini: 258 when both sides are at most 384 px, else 258 per tile (tile side: the short side
  / 1.5 clamped to 256..768). PDFs: 258 per page.
Every rule but Gemini's is approximate, so a step with attachments has estimated counts.
"""

from __future__ import annotations

import math
from typing import Any

from batchor.plan.media_info import PDF

OPENAI_PDF_PAGE = 1_000
ANTHROPIC_PDF_PAGE = 3_000
GEMINI_TILE = 258
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000


def attachment_tokens(provider: str, ref: dict[str, Any]) -> int:
    """Input tokens of one described attachment (0 for URLs, whose size is unknown, and errors)."""
    if "error" in ref or "url" in ref:
        return 0
    rules = _RULES.get(provider, openai_tokens)
    if ref["media_type"] == PDF:
        return rules(0, 0, int(ref.get("pages") or 1))
    return rules(int(ref["width"]), int(ref["height"]), 0)


def openai_tokens(width: int, height: int, pages: int) -> int:
    if pages:
        return pages * OPENAI_PDF_PAGE
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = _scaled(w, h, 2048 / max(w, h))
    if min(w, h) > 768:
        w, h = _scaled(w, h, 768 / min(w, h))
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_tokens(width: int, height: int, pages: int) -> int:
    if pages:
        return pages * ANTHROPIC_PDF_PAGE
    w, h = float(width), float(height)
    if max(w, h) > ANTHROPIC_MAX_EDGE:
        w, h = _scaled(w, h, ANTHROPIC_MAX_EDGE / max(w, h))
    if w * h > ANTHROPIC_MAX_PIXELS:
        w, h = _scaled(w, h, math.sqrt(ANTHROPIC_MAX_PIXELS / (w * h)))
    return max(1, math.ceil(w * h / 750))


def gemini_tokens(width: int, height: int, pages: int) -> int:
    if pages:
        return pages * GEMINI_TILE
    if width <= 384 and height <= 384:
        return GEMINI_TILE
    tile = min(768.0, max(256.0, min(width, height) / 1.5))
    return GEMINI_TILE * math.ceil(width / tile) * math.ceil(height / tile)


def _scaled(w: float, h: float, factor: float) -> tuple[float, float]:
    return math.floor(w * factor), math.floor(h * factor)


_RULES = {"openai": openai_tokens, "anthropic": anthropic_tokens, "gemini": gemini_tokens}
