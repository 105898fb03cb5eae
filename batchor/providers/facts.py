"""What planning knows of each provider, as data: attachment limits, image token rules, embedding
models, context windows of its model families, prompt-cache write rates and rules, whether it has
flex processing, whether it answers offline, whether its model names are deployments.

Each provider's facts live in its own folder (`providers/<folder>/facts.py`, a `FACTS` object),
named by its registry entry (`ProviderInfo.facts`); a provider without a folder of facts (an
OpenAI-compatible preset) has the empty description, and planning holds its requests to OpenAI's
attachment rules. The plan stage reads these through `provider_facts(name)`, never a table of
its own, so adding a provider is one folder and one registry entry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF = "application/pdf"
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
    max_pdf_request_bytes: int | None = None  # base64 PDF content of one request


@dataclass(frozen=True)
class EmbedModel:
    provider: str
    name: str
    size: int  # vector length when `dimensions` is not set
    shortens: bool  # accepts `dimensions` (OpenAI) / `output_dimensionality` (Gemini)
    max_input_tokens: int  # per text
    input_per_mtok: float
    source: str  # where the price was read


@dataclass(frozen=True)
class GroupLimits:
    """How many texts one realtime call may carry, as each API documents or enforces it."""

    inputs: int
    tokens: int | None  # all inputs of one call together


ImageTokens = Callable[[int, int, int], int]  # (width, height, pages) -> input tokens
TtlCheck = Callable[[str, str], None]  # (model, where): raises when the model lacks the cache lifetime
# A model block's options -> None, or (why `mode: batch` is refused, what `auto` notes as it runs realtime).
OptionsRule = Callable[[Mapping[str, Any]], tuple[str, str] | None]


@dataclass(frozen=True)
class ProviderFacts:
    """One provider's facts; the empty description is an OpenAI-compatible server's."""

    media: MediaLimits | None = None  # None: held to OpenAI's
    image_tokens: ImageTokens | None = None  # None: OpenAI's rule
    embed_models: tuple[EmbedModel, ...] = ()
    embed_group: GroupLimits | None = None  # None: OpenAI's limits, which vLLM and Ollama accept
    embeddings: bool = True  # False: the provider has no embeddings API
    context_windows: tuple[tuple[str, int], ...] = ()  # model-name prefix -> context window (tokens)
    cache_write_factors: tuple[float, float] = (1.0, 1.0)  # prompt-cache writes (5 min, 1 h) x input rate
    model_prefix: str = ""  # a prefix the provider's model names may carry (gemini's `models/`)
    prompt_cache: bool = False  # takes cache controls for a shared prefix (providers/caching.py)
    explicit_cache: bool = False  # has explicit context caches (`cache.explicit`)
    exact_tokens: bool = False  # its models count tokens as tiktoken does: plan counts are exact
    schema_billed: bool = False  # bills the structured-output schema as input tokens
    flex: bool = False  # has flex processing (`mode: flex`) for the models the price table gives a flex price
    offline: bool = False  # answers inside batchor (the mock): no endpoint, no key, no bill, any model name
    deployments: bool = False  # a model block's name is a deployment's, serving the model `options.model` names
    check_cache_ttl: TtlCheck | None = None  # refuses a `cache.ttl` the model does not offer (None: any model)
    embed_batch_missing: OptionsRule | None = None  # why its embedding jobs cannot run with these options


EMPTY = ProviderFacts()


@cache
def provider_facts(name: str) -> ProviderFacts:
    """The facts of the provider `name` (the empty description for one without a facts folder)."""
    from batchor.providers import REGISTRY

    info = REGISTRY.get(name)
    if info is None or info.facts is None:
        return EMPTY
    facts: ProviderFacts = importlib.import_module(f"batchor.providers.{info.facts}.facts").FACTS
    return facts


def all_facts() -> list[ProviderFacts]:
    """Every registered provider's facts, in registry order (each folder once)."""
    from batchor.providers import REGISTRY

    folders = dict.fromkeys(info.facts for info in REGISTRY.values() if info.facts is not None)
    return [provider_facts(next(n for n, i in REGISTRY.items() if i.facts == folder)) for folder in folders]


def table_model(provider: str, model: str) -> str:
    """The model's name as price tables and model lists spell it (without the provider's prefix)."""
    prefix = provider_facts(provider).model_prefix
    return model.removeprefix(prefix) if prefix else model
