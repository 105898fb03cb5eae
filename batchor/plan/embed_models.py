"""Plan stage: what batchor knows about embedding models (sizes, limits, prices).

The price table (genai-prices) lists these models but has no per-token price for them, so each
provider's facts (`providers/<name>/facts.py`) keep their prices, each with where it comes from.
Only input tokens are billed; Batch APIs bill half. A model this table does not know is accepted
on a self-hosted server (vllm, ollama, llamacpp: free) or with `price:` / `custom: true` on the
model block, like any model.
"""

from __future__ import annotations

from datetime import UTC, datetime

from batchor.errors import SpecError
from batchor.plan.known_models import FREE_FORM
from batchor.plan.prices import BARE_PROVIDERS, BATCH_DISCOUNT, ModelPrice
from batchor.providers.facts import EmbedModel, GroupLimits, provider_facts, table_model

__all__ = ["EmbedModel", "GroupLimits", "check_embed_model", "embed_model", "embed_price", "group_limits"]


_DEFAULT_GROUP = GroupLimits(2048, 300_000)  # OpenAI's, which vLLM and Ollama accept


def group_limits(provider: str, adapter: str, group_size: int | None) -> GroupLimits:
    """The provider's limits (providers/<name>/facts.py), lowered by the step's `group_size`."""
    limits = provider_facts(provider).embed_group or provider_facts(adapter).embed_group or _DEFAULT_GROUP
    return GroupLimits(min(limits.inputs, group_size or limits.inputs), limits.tokens)


def embed_model(provider: str, name: str) -> EmbedModel | None:
    ref = table_model(provider, name)
    return next((m for m in provider_facts(provider).embed_models if m.name == ref), None)


def check_embed_model(
    provider: str, name: str, dimensions: int | None, *, custom: bool, priced: bool, where: str
) -> int | None:
    """The vector size the step will produce (None: unknown until the answers come), or a
    `SpecError` naming the fix: not an embedding model, or `dimensions` the model cannot give."""
    if not provider_facts(provider).embeddings:
        raise SpecError(
            f"{where}: {provider} has no embeddings API, so an `embed:` step cannot use it",
            hint="give the step its own model block with provider openai (text-embedding-3-small), "
            "gemini (gemini-embedding-001) or an OpenAI-compatible server (vllm, ollama)",
        )
    known = embed_model(provider, name)
    if known is None:
        if provider in FREE_FORM or provider in BARE_PROVIDERS or custom or priced:
            return dimensions
        listed = ", ".join(m.name for m in provider_facts(provider).embed_models) or "none"
        raise SpecError(
            f"{where}: '{name}' is not an embedding model batchor knows for {provider} (known: {listed})",
            hint="use one of those, or add `price: {input_per_mtok: ..., output_per_mtok: 0}` or "
            "`custom: true` to the step's model block",
        )
    if dimensions is None:
        return known.size
    if not known.shortens:
        raise SpecError(
            f"{where}: {name} cannot shorten its vectors: remove `dimensions` (it always gives {known.size})"
        )
    if dimensions > known.size:
        raise SpecError(
            f"{where}: dimensions {dimensions} is more than {name} gives ({known.size})",
            hint=f"use at most {known.size}",
        )
    return dimensions


def embed_price(provider: str, name: str, at: datetime | None = None) -> ModelPrice | None:
    """The price of an embedding model from this table (input only; batch at half)."""
    known = embed_model(provider, name)
    if known is None:
        return None
    day = (at or datetime.now(UTC)).date().isoformat()
    rate = known.input_per_mtok
    return ModelPrice(
        provider,
        name,
        rate,
        0.0,
        None,
        rate * BATCH_DISCOUNT,
        0.0,
        source=known.source,
        as_of=day,
        notes=("embedding model: input tokens only",),
    )
