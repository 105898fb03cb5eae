"""Plan stage: what batchor knows about embedding models (sizes, limits, prices).

The price table (genai-prices) lists these models but has no per-token price for them, so the
prices are kept here, each with where it comes from. Only input tokens are billed; Batch APIs
bill half. A model this table does not know is accepted on a self-hosted server (vllm, ollama,
llamacpp: free) or with `price:` / `custom: true` on the model block, like any model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from batchor.errors import SpecError
from batchor.plan.known_models import FREE_FORM
from batchor.plan.prices import BATCH_DISCOUNT, ModelPrice


@dataclass(frozen=True)
class EmbedModel:
    provider: str
    name: str
    size: int  # vector length when `dimensions` is not set
    shortens: bool  # accepts `dimensions` (OpenAI) / `output_dimensionality` (Gemini)
    max_input_tokens: int  # per text
    input_per_mtok: float
    source: str  # where the price was read


_OPENAI_PRICES = "https://platform.openai.com/docs/pricing (embeddings; Batch API 50 % off)"
_GEMINI_PRICES = "https://ai.google.dev/gemini-api/docs/pricing (Gemini Embedding; Batch API 50 % off)"
MODELS: dict[tuple[str, str], EmbedModel] = {
    (m.provider, m.name): m
    for m in (
        EmbedModel("openai", "text-embedding-3-small", 1536, True, 8191, 0.02, _OPENAI_PRICES),
        EmbedModel("openai", "text-embedding-3-large", 3072, True, 8191, 0.13, _OPENAI_PRICES),
        EmbedModel("openai", "text-embedding-ada-002", 1536, False, 8191, 0.10, _OPENAI_PRICES),
        EmbedModel("gemini", "gemini-embedding-001", 3072, True, 2048, 0.15, _GEMINI_PRICES),
    )
}


@dataclass(frozen=True)
class GroupLimits:
    """How many texts one realtime call may carry, as each API documents or enforces it."""

    inputs: int
    tokens: int | None  # all inputs of one call together


# OpenAI: "input ... cannot exceed 2048 dimensions" (array items) and 300,000 tokens summed over
# all inputs of one request. Gemini batchEmbedContents: "at most 100 requests can be in one batch".
# OpenAI-compatible servers: OpenAI's limits, which vLLM and Ollama accept.
GROUP_LIMITS = {
    "openai": GroupLimits(2048, 300_000),
    "gemini": GroupLimits(100, None),
    "mock": GroupLimits(2048, 300_000),
}
_DEFAULT_GROUP = GroupLimits(2048, 300_000)


def group_limits(provider: str, adapter: str, group_size: int | None) -> GroupLimits:
    """The provider's limits, lowered by the step's `group_size`."""
    limits = GROUP_LIMITS.get(provider) or GROUP_LIMITS.get(adapter) or _DEFAULT_GROUP
    return GroupLimits(min(limits.inputs, group_size or limits.inputs), limits.tokens)


NO_EMBEDDINGS = frozenset({"anthropic"})  # Anthropic points to a third party (Voyage AI) for embeddings


def embed_model(provider: str, name: str) -> EmbedModel | None:
    return MODELS.get((provider, name.removeprefix("models/") if provider == "gemini" else name))


def check_embed_model(
    provider: str, name: str, dimensions: int | None, *, custom: bool, priced: bool, where: str
) -> int | None:
    """The vector size the step will produce (None: unknown until the answers come), or a
    `SpecError` naming the fix: not an embedding model, or `dimensions` the model cannot give."""
    if provider in NO_EMBEDDINGS:
        raise SpecError(
            f"{where}: {provider} has no embeddings API, so an `embed:` step cannot use it",
            hint="give the step its own model block with provider openai (text-embedding-3-small), "
            "gemini (gemini-embedding-001) or an OpenAI-compatible server (vllm, ollama)",
        )
    known = embed_model(provider, name)
    if known is None:
        if provider in FREE_FORM or provider == "openai-compatible" or custom or priced:
            return dimensions
        listed = ", ".join(m.name for m in MODELS.values() if m.provider == provider) or "none"
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
