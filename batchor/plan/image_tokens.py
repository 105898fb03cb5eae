"""Input tokens of attachments, per provider's documented rule (kept apart from text counting).

Each rule is a provider fact (`image_tokens` in `providers/<name>/facts.py`): OpenAI's tiles,
Anthropic's pixel area, Gemini's 258-token tiles; a provider without a rule of its own counts as
OpenAI. Every rule but Gemini's is approximate, so a step with attachments has estimated counts.
"""

from __future__ import annotations

from typing import Any

from batchor.plan.media_info import PDF
from batchor.providers.facts import provider_facts


def attachment_tokens(provider: str, ref: dict[str, Any]) -> int:
    """Input tokens of one described attachment (0 for URLs, whose size is unknown, and errors)."""
    if "error" in ref or "url" in ref:
        return 0
    rules = provider_facts(provider).image_tokens or provider_facts("openai").image_tokens
    assert rules is not None
    if ref["media_type"] == PDF:
        return rules(0, 0, int(ref.get("pages") or 1))
    return rules(int(ref["width"]), int(ref["height"]), 0)
