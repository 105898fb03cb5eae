"""Plan stage: Gemini explicit context caches (`cache: {explicit: true}`).

A realtime Gemini step whose system prompt is literal text and long enough to cache can put it in
an explicit context cache: the provider adapter creates it at the step's first request, every
request reads it (`cached_content`), and the run deletes it at its end (providers/gemini). The
plan prices what that changes: every request reads the system prompt at the cached rate, and the
cache costs its tokens once at the input rate to create plus its storage per token-hour for its
lifetime (one hour, renewed while the run lasts: the plan prices one). Batch-mode steps and other
providers are refused at `validate`: batch lines get Gemini's implicit cache.
"""

from __future__ import annotations

from typing import Any

from batchor.errors import ExplicitCacheUnsupportedError
from batchor.plan.model import StepPlan
from batchor.providers.caching import EXPLICIT_TTL_S, storage_usd_per_token_hour
from batchor.providers.facts import provider_facts


def check_explicit(provider: str, mode: str, explicit: bool, where: str) -> None:
    """`cache.explicit` needs Gemini and a realtime step."""
    if not explicit:
        return
    if not provider_facts(provider).explicit_cache:
        raise ExplicitCacheUnsupportedError(
            f"{where}: explicit context caches are Gemini's; {provider} caches the shared prefix without one",
            hint="drop `cache.explicit`: batchor already sends the provider's own cache controls",
        )
    if mode == "batch":
        raise ExplicitCacheUnsupportedError(
            f"{where}: explicit context caches are used in realtime only, and this step runs in batch mode",
            hint="drop `cache.explicit` (batch lines get Gemini's implicit cache), or run the step "
            "in realtime (`mode: realtime`)",
        )


def explicit_usd(step: StepPlan, price: Any) -> float:
    """What the step's explicit context cache costs beyond the reads: its creation (its tokens at
    the input rate) and one lifetime of storage."""
    cache = step.prompt_cache
    if price is None or cache is None or not cache.sent or not cache.explicit:
        return 0.0
    storage = cache.system_tokens * EXPLICIT_TTL_S / 3600 * storage_usd_per_token_hour(step.model)
    return float(price.cost(cache.system_tokens, 0)) + storage
