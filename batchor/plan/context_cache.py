"""Plan stage: Gemini explicit context caches (`cache: {explicit: true | auto}`).

A Gemini step whose system prompt is literal text and long enough to cache can put it in an
explicit context cache: the provider adapter creates it at the step's first request (a batch
step's: before its first job), every request reads it (`cached_content`), and the run deletes it
at its end (a batch step's: once its jobs are collected; providers/gemini). The plan prices what
that changes: every request reads the system prompt at the cached rate, and the cache costs its
tokens once at the input rate to create plus its storage per token-hour while the run holds it:
the run's expected duration (its requests at `ASSUMED_LATENCY_S` each, `concurrency` at a time;
a batch step's jobs `ASSUMED_BATCH_S`), and in the upper bound one more lifetime (a killed run
leaves it to expire; a batch step's cache lives a batch window).

With `auto` (the default on batch-mode steps, where the implicit cache misses many lines; in
realtime it misses only the first requests in flight, so there the default is none) the plan
decides per step: the cache pays where the reads it adds over the implicit
cache (every request instead of those after the run's first misses, or the measured hit rate) save
more than it costs to make and store; the step's `explicit_note` says what it weighed.
`explicit: true` on another provider is refused at `validate`; `auto` there simply uses none.
"""

from __future__ import annotations

from typing import Any

from batchor.errors import ExplicitCacheUnsupportedError
from batchor.humanize import money
from batchor.plan.model import StepPlan
from batchor.plan.prompt_cache import cache_tokens, explicit_key
from batchor.providers.caching import BATCH_CACHE_TTL_S, EXPLICIT_TTL_S, storage_usd_per_token_hour
from batchor.providers.facts import provider_facts

ASSUMED_LATENCY_S = 2.0  # one realtime request's time, for the time a run holds its cache
ASSUMED_BATCH_S = 2 * 3600.0  # a batch step's jobs, from the first create to the last collect


def check_explicit(provider: str, mode: str, explicit: bool | str | None, where: str) -> None:
    """`cache.explicit: true` needs Gemini (`auto` chooses none elsewhere)."""
    if explicit is not True:
        return
    if not provider_facts(provider).explicit_cache:
        raise ExplicitCacheUnsupportedError(
            f"{where}: explicit context caches are Gemini's; {provider} caches the shared prefix without one",
            hint="drop `cache.explicit`: batchor already sends the provider's own cache controls",
        )


def held_hours(step: StepPlan, requests: float) -> float:
    """How long a run of `requests` is expected to hold the step's cache, in hours (a batch step:
    until its jobs are collected, `ASSUMED_BATCH_S`)."""
    if step.mode == "batch":
        return ASSUMED_BATCH_S / 3600
    cache = step.prompt_cache
    concurrency = max(1, cache.concurrency if cache is not None else 1)
    return requests * ASSUMED_LATENCY_S / concurrency / 3600


def explicit_usd(step: StepPlan, price: Any, requests: float, *, upper: bool = False) -> float:
    """What the step's explicit context cache costs beyond the reads: its creation (its tokens at
    the input rate) and its storage while held (`upper`: and one more lifetime, left to expire)."""
    cache = step.prompt_cache
    if price is None or cache is None or not cache.sent or not cache.explicit:
        return 0.0
    hours = held_hours(step, requests)
    if upper:  # a killed run leaves it to expire: a batch step's lives a whole window
        hours = BATCH_CACHE_TTL_S / 3600 if step.mode == "batch" else hours + EXPLICIT_TTL_S / 3600
    storage = cache.system_tokens * hours * storage_usd_per_token_hour(step.model)
    return float(price.cost(cache.system_tokens, 0)) + storage


def choose_explicit(step: StepPlan, price: Any, requests: float) -> StepPlan:
    """`cache.explicit: auto`: the step with an explicit context cache where it is expected to cost
    less than the implicit cache alone, and a note saying why or why not."""
    cache = step.prompt_cache
    if cache is None or not cache.explicit_auto or cache.explicit or not cache.sent:
        return step
    why = _ineligible(step, price, requests)
    if cache.explicit_default and (why or step.mode != "batch"):
        return step  # unset: weighed on Gemini batch steps only, and said only there
    if why:
        return step.model_copy(update={"prompt_cache": cache.model_copy(update={"explicit_note": why})})
    learned = dict.fromkeys(("misses_per_run", "batch_hit_share", "read_per_hit", "write_per_miss"))
    explicit = cache.model_copy(
        update={**learned, "explicit": True, "key": explicit_key(cache.key), "source": "assumed"}
    )
    chosen = step.model_copy(update={"prompt_cache": explicit})
    implicit_reads, _ = cache_tokens(step, requests)
    explicit_reads, _ = cache_tokens(chosen, requests)
    nominal = round(requests * max(cache.tokens, cache.system_tokens))  # enough input for either's reads
    saved = price.cost(nominal, 0, cached_input_tokens=round(implicit_reads)) - price.cost(
        nominal, 0, cached_input_tokens=round(explicit_reads)
    )
    fees = explicit_usd(chosen, price, requests)
    weighed = (
        f"reads {money(saved)} cheaper than the implicit cache ({cache.source}); costs {money(fees)} to make "
        f"and store for ~{held_hours(step, requests) * 60:,.0f} min"
    )
    if cache.explicit_default:
        weighed += "; the default on batch steps, `cache: {explicit: false}` turns it off"
    if saved <= fees:
        return step.model_copy(
            update={"prompt_cache": cache.model_copy(update={"explicit_note": f"not used: {weighed}"})}
        )
    return chosen.model_copy(update={"prompt_cache": explicit.model_copy(update={"explicit_note": f"used: {weighed}"})})


def _ineligible(step: StepPlan, price: Any, requests: float) -> str:
    """Why `auto` cannot use an explicit cache for the step, or ''."""
    cache = step.prompt_cache
    if not provider_facts(step.provider).explicit_cache:
        return f"not used: explicit context caches are Gemini's, not {step.provider}'s"
    if step.mode == "batch" and step.provider_options.get("vertexai"):
        return "not used: Vertex AI's batch prediction refuses context caches"
    if cache is None or not cache.system_tokens:
        return "not used: the system prompt is not literal text long enough to cache"
    if price is None or requests <= 0:
        return "not used: nothing to send, or no price to weigh it by"
    return ""
