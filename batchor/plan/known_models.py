"""Plan stage: is the spec's model one that exists? A misspelt model fails before any call.

A model must be in the price table (genai-prices, which also lists the provider's models it has
no per-token price for), or the spec says what it costs (`price:`) or that it is `custom: true`
(a fine-tune, a gateway alias, a new model). Self-hosted servers (vllm, ollama, llamacpp) serve
whatever they load, so any name is theirs; the mock answers any name. A bare `openai-compatible`
endpoint could be anything, so its model always needs `price:` or `custom: true`.
"""

from __future__ import annotations

import difflib
from functools import lru_cache

from batchor.errors import UnknownModelError
from batchor.plan.price_cache import remembered
from batchor.plan.prices import BARE_PROVIDERS, LISTED_PROVIDERS, table_provider_id
from batchor.providers import REGISTRY
from batchor.providers.clouds import bedrock_id_help, bedrock_model_id
from batchor.providers.facts import provider_facts, table_model

FREE_FORM = frozenset(n for n, info in REGISTRY.items() if info.self_hosted or provider_facts(n).offline)  # any name
_CUSTOM_HINT = (
    "or, if the model exists but the table lacks it, add `price: {input_per_mtok: ..., "
    "output_per_mtok: ...}` or `custom: true` to the model block"
)


def check_model(provider: str, model: str, *, custom: bool, priced: bool, where: str, serves: bool = False) -> None:
    """Raise `model_unlisted` for a model neither listed nor declared by the spec; `serves`: the
    name is an Azure deployment's, which may serve a model of another name."""
    if provider in FREE_FORM or custom or priced:
        return
    if provider in BARE_PROVIDERS:
        raise UnknownModelError(
            f"{where}: model '{model}' on an openai-compatible endpoint: batchor cannot know what it costs",
            hint="add `price: {input_per_mtok: ..., output_per_mtok: ...}` (0 and 0 for a free server) or "
            "`custom: true` (unpriced: --max-cost then refuses) to the model block",
        )
    if table_knows(provider, model):
        return
    raise UnknownModelError(
        f"{where}: model '{model}' is not one of {provider}'s known models{_suggestion(provider, model)}",
        hint=(
            f"name the model the deployment serves: `options: {{model: gpt-4.1-mini}}` (`batchor prices --provider "
            f"{provider}` lists them), {_CUSTOM_HINT}"
            if serves
            else f"fix the name (`batchor prices --provider {provider}` lists them), {_CUSTOM_HINT}"
        ),
    )


def table_knows(provider: str, model: str) -> bool:
    """Whether the price table matches `model` for `provider` (dated ids and aliases included)."""
    return _matched_id(provider, model) is not None


@lru_cache(maxsize=1024)
def _matched_id(provider: str, model: str) -> str | None:
    """The table's id for the model, kept on disk for the next plan (plan/price_cache.py)."""
    found = remembered(f"matched|{provider}|{model}", lambda: _matched_in_table(provider, model))
    return found if isinstance(found, str) else None


def _matched_in_table(provider: str, model: str) -> str | None:
    from genai_prices import data_snapshot

    ref = table_model(provider, model)
    try:
        found_provider, info = data_snapshot.get_snapshot().find_provider_model(
            ref, None, table_provider_id(provider), None
        )
    except LookupError:
        return None
    return str(info.id) if found_provider.id == table_provider_id(provider) else None


def _suggestion(provider: str, model: str) -> str:
    """' (did you mean ...?)': close names of the same provider, or the provider that has this model."""
    if bedrock_model_id(model):  # the table's google entry lists Claude too: not a hint to use gemini
        return bedrock_id_help(model)
    close = difflib.get_close_matches(model.lower(), _model_ids(provider), n=3, cutoff=0.6)
    if close:
        return f" (did you mean {' or '.join(repr(c) for c in close)}?)"
    elsewhere = [p for p in LISTED_PROVIDERS if p != provider and table_knows(p, model)]
    if elsewhere:
        return f" (it is a model of {' and '.join(elsewhere)}: did you mean `provider: {elsewhere[0]}`?)"
    return ""


@lru_cache(maxsize=32)
def _model_ids(provider: str) -> list[str]:
    from genai_prices import data_snapshot

    wanted = table_provider_id(provider)
    table = next((p for p in data_snapshot.get_snapshot().providers if p.id == wanted), None)
    return [m.id for m in table.models] if table else []
