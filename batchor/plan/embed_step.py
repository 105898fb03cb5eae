"""Plan stage: an embedding step (`embed:`) pinned as a `StepPlan` of kind `embed`.

Its request per row is the rendered text as one user message, so the one render -> key path
(plan/request.py) serves it unchanged: the same text under the same model and `dimensions` is
the same request key, cached and never paid for twice. Only input tokens are priced (no answer
tokens: `max_tokens` 0); the text is counted without chat overhead.
"""

from __future__ import annotations

from typing import Any

from batchor.errors import SpecError
from batchor.fingerprint import request_prefix
from batchor.plan.context import context_window
from batchor.plan.embed_models import check_embed_model, embed_model, embed_price
from batchor.plan.endpoint import key_identity, step_endpoint
from batchor.plan.mode import initial_mode
from batchor.plan.model import StepPlan
from batchor.plan.prices import lookup_price
from batchor.plan.tokens import get_counter
from batchor.providers import MOCK, ProviderInfo, provider_info
from batchor.providers.facts import provider_facts
from batchor.providers.options import check_options
from batchor.spec.load import LoadedSpec
from batchor.spec.model import EmbedStep, ModelSpec

EMBEDDINGS_API = "embeddings"  # StepPlan.api of an embedding step: the adapters' /v1/embeddings


def embed_step_plan(
    loaded: LoadedSpec, name: str, step: EmbedStep, model: ModelSpec, deps: list[str], mock: bool, mode: str
) -> StepPlan:
    """The step's plan: model checked to be an embedding model, its vector size, its price."""
    where = f"{loaded.where('steps', name)}: steps.{name}"
    size = check_embed_model(
        model.provider,
        model.name,
        step.dimensions,
        custom=model.custom,
        priced=model.price is not None,
        where=f"{where}.model",
    )
    if model.options:
        check_options(model.provider, model.options, f"{where}.model.options")
    provider = MOCK if mock else model.provider
    info = provider_info(provider)
    params = {"dimensions": step.dimensions} if step.dimensions is not None else {}
    endpoint = step_endpoint(provider, model.base_url, model.options)
    mode, note = _mode(
        model.provider, mode, info, step.deadline or loaded.spec.limits.deadline, f"steps.{name}", model.options
    )
    known = embed_model(model.provider, model.name)
    return StepPlan(
        name=name,
        provider=provider,
        model=model.name,
        api=EMBEDDINGS_API,
        base_url=model.base_url,
        endpoint=endpoint,
        api_key_env=model.api_key_env or info.key_env,
        provider_options=dict(model.options),
        params=params,
        prompt=step.embed,
        when=step.when,
        depends_on=deps,
        mode=mode,
        mode_note=note,
        price=_price(model, provider),
        token_count_exact=get_counter(provider, model.name).exact,
        token_upper_factor=get_counter(provider, model.name).upper_factor,
        max_tokens=0,
        context_window=context_window(model.name, model.context_window or (known.max_input_tokens if known else None)),
        expected_output_tokens=0,
        output_source="embedding: no output tokens",
        key_prefix=request_prefix(
            key_identity(provider, endpoint), model.name, {**params, "_api": EMBEDDINGS_API}, None
        ),
        kind="embed",
        dimensions=size,
        group_size=step.group_size,
    )


def _price(model: ModelSpec, provider: str) -> dict[str, Any] | None:
    if provider_facts(provider).offline:
        price = lookup_price(provider, model.name)
    elif model.price is not None:
        price = lookup_price(provider, model.name, override=model.price.model_dump(exclude_none=True))
    else:
        price = embed_price(provider, model.name) or lookup_price(provider, model.name)
    return price.to_dict() if price else None


def _mode(
    provider: str, requested: str, info: ProviderInfo, deadline: str | None, where: str, options: dict[str, Any]
) -> tuple[str, str | None]:
    """Batch embeddings: OpenAI's Batch API on /v1/embeddings, Gemini's embeddings jobs
    (asyncBatchEmbedContent); the provider's facts say when its options rule them out (Gemini on
    Vertex AI has none)."""
    rule = provider_facts(provider).embed_batch_missing
    missing = rule(options) if rule is not None and requested in ("batch", "auto") else None
    if missing:
        if requested == "batch":
            raise SpecError(f"{where}: {missing[0]}", hint="use `mode: realtime`")
        return "realtime", f"auto: {missing[1]}"
    return initial_mode(requested, info, deadline, where)
