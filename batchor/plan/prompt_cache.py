"""Plan stage: each step's shared prefix, and what the providers' prompt caches make of it.

Compile: `with_prompt_cache` finds the part of a step's requests that is the same for every row:
the system prompt when it is literal text (else its literal head), then the literal head of the
prompt template (up to its first `{{ }}` or `{% %}`). The system prompt is sent first, so that
part is the requests' common prefix. It counts its tokens and decides whether the provider's
cache controls are sent (the model's minimum is in providers/caching.py; `limits.prompt_cache:
off` sends none). None of this enters the request key: the answer does not depend on the cache.

Price: `cache_tokens(step, requests)` gives the tokens the plan expects to be read from and
written to the cache. Realtime: a run's first requests miss (those sent before the first answer
wrote the prefix: `limits.concurrency` of them until measured), the rest hit, so the misses of a
run do not grow with its size. Batch: the provider runs a batch's requests in parallel and hits a
share of them (assumed 50 % until measured). Both are learned from the ledger: the attempts of
earlier runs (pilots included) that sent the same prefix in the same mode (`history_key`). The
upper bound assumes no hit (and, where a miss writes the prefix, a write for every request).
"""

from __future__ import annotations

from typing import Any

from batchor.errors import CacheTtlError
from batchor.fingerprint import sha256_hex
from batchor.plan.model import PromptCache, StepPlan
from batchor.plan.tokens import get_counter
from batchor.providers.base import CacheControl
from batchor.providers.caching import TTLS, min_cacheable_tokens, readable_tokens, writes_billed
from batchor.providers.facts import provider_facts
from batchor.spec.model import CacheSpec
from batchor.spec.templates import StepTemplates
from batchor.state.cache_stats import CacheRun, prompt_cache_runs

BATCH_HIT_SHARE = 0.5  # a batch's requests assumed to hit, until a batch of the same prefix is measured


def with_prompt_cache(step: StepPlan, templates: StepTemplates, limits: Any, spec: CacheSpec) -> StepPlan:
    """`step` with its shared prefix and whether cache controls are sent for it."""
    messages, chars, text = shared_prefix(templates)
    if step.kind != "llm" or not text.strip():
        return step
    tokens = get_counter(step.provider, step.model).count(text)
    minimum = min_cacheable_tokens(step.provider, step.model) if provider_facts(step.provider).prompt_cache else 0
    note = ""
    if limits.prompt_cache in (False, "off"):
        note = "limits.prompt_cache: off"
    elif not minimum:
        note = f"{step.provider}:{step.model} has no prompt cache batchor uses"
    elif tokens < minimum:
        note = f"shorter than the {minimum:,} tokens {step.provider}:{step.model} caches"
    system = get_counter(step.provider, step.model).count(templates.static_head("system")[0]) if messages else 0
    offered = spec.explicit is not None or provider_facts(step.provider).explicit_cache  # unset: Gemini's default
    eligible = (
        spec.explicit is not False and offered and not note and system >= minimum
    )  # a literal system prompt long enough
    explicit = eligible and spec.explicit is True
    key = sha256_hex(f"{step.key_prefix}\x1f{text}")[:32]
    cache = PromptCache(
        messages=messages,
        chars=chars,
        tokens=tokens,
        minimum=minimum,
        sent=not note,
        note=note,
        ttl=spec.ttl,
        key=explicit_key(key) if explicit else key,
        explicit=explicit,
        system_tokens=system if eligible else 0,
        explicit_auto=spec.explicit in ("auto", None),
        explicit_default=spec.explicit is None,
        writes=writes_billed(step.provider, step.model),
        concurrency=int(limits.concurrency),
    )
    return step.model_copy(update={"prompt_cache": cache})


def explicit_key(key: str) -> str:
    """The cache key of a step whose system prompt is in an explicit context cache: its own, so the
    hit rates learned for it and for the implicit cache stay apart."""
    return sha256_hex(f"{key}\x1fexplicit")[:32]


def check_ttl(provider: str, model: str, ttl: str | None, where: str) -> None:
    """`cache.ttl` must be a lifetime the provider offers (Gemini's implicit cache takes none), and
    OpenAI's 24 hours one the model offers (others refuse `prompt_cache_retention`)."""
    offered = TTLS.get(provider)
    if ttl is None or offered is None:
        return
    if ttl in offered:
        model_check = provider_facts(provider).check_cache_ttl
        if model_check is not None:
            model_check(model, where)
        return
    raise CacheTtlError(
        f"{where}: {provider} keeps prompt caches for {' or '.join(offered)}, not {ttl}",
        hint=f"set `cache: {{ttl: {offered[-1]}}}` or leave it out for the provider's default",
    )


def shared_prefix(templates: StepTemplates) -> tuple[int, int, str]:
    """(messages wholly shared, characters shared of the next one, the shared text)."""
    system, whole = templates.static_head("system")
    if templates.system is not None and not whole:
        return 0, len(system), system
    head, _ = templates.static_head("prompt")
    if templates.system is None:
        return 0, len(head), head
    return 1, len(head), system + head


def cache_control(step: StepPlan) -> CacheControl | None:
    """The controls sent with each of the step's requests (None: nothing to mark)."""
    cache = step.prompt_cache
    if cache is None or not cache.sent:
        return None
    return CacheControl(cache.key, cache.messages, cache.chars, ttl=cache.ttl, explicit=cache.explicit)


def history_key(step: StepPlan) -> str | None:
    """What identifies a step's cache behaviour in the ledger: its prefix and its mode."""
    cache = step.prompt_cache
    if cache is None or not cache.sent:
        return None
    return f"{cache.key}:{'batch' if step.mode == 'batch' else 'realtime'}"


def with_cache_history(steps: list[StepPlan], state: Any) -> list[StepPlan]:
    """Each step's cache behaviour learned from earlier runs of its prefix, in either mode."""
    keys = [cache.key for cache in (s.prompt_cache for s in steps) if cache is not None and cache.sent]
    if state is None or not keys:
        return steps
    runs = prompt_cache_runs(state, [f"{k}:{mode}" for k in keys for mode in ("realtime", "batch")])
    return [_learned(s, runs) for s in steps]


def _learned(step: StepPlan, runs: dict[str, list[CacheRun]]) -> StepPlan:
    cache = step.prompt_cache
    if cache is None or not cache.sent:
        return step
    realtime, batch = runs.get(f"{cache.key}:realtime", []), runs.get(f"{cache.key}:batch", [])
    if not realtime and not batch:
        return step
    runs_seen = realtime + batch
    hits, writes = sum(r.hits for r in runs_seen), sum(r.writes for r in runs_seen)
    read, written = sum(r.read_tokens for r in runs_seen), sum(r.write_tokens for r in runs_seen)
    update = {
        "misses_per_run": sum(r.requests - r.hits for r in realtime) / len(realtime) if realtime else None,
        "batch_hit_share": sum(r.hits for r in batch) / sum(r.requests for r in batch) if batch else None,
        "read_per_hit": read / hits if hits else None,
        "write_per_miss": written / writes if writes else None,
        "source": f"history: {len(realtime) + len(batch):,} runs",
    }
    return step.model_copy(update={"prompt_cache": cache.model_copy(update=update)})


def cache_tokens(step: StepPlan, requests: float) -> tuple[float, float]:
    """Tokens `requests` of the step are expected to read from and write to the prompt cache."""
    cache = step.prompt_cache
    if cache is None or not cache.sent or requests <= 0:
        return 0.0, 0.0
    if cache.explicit:  # every request reads the system prompt from the context cache
        return requests * (cache.read_per_hit or cache.system_tokens), 0.0
    if step.mode == "batch":
        share = BATCH_HIT_SHARE if cache.batch_hit_share is None else cache.batch_hit_share
        hits = requests * share
    else:
        misses = cache.concurrency if cache.misses_per_run is None else cache.misses_per_run
        hits = max(0.0, requests - misses)
    per_hit = (
        cache.read_per_hit
        if cache.read_per_hit is not None
        else readable_tokens(step.provider, cache.tokens, step.model)
    )
    per_miss = cache.write_per_miss if cache.write_per_miss is not None else cache.tokens
    return hits * per_hit, (requests - hits) * per_miss if cache.writes else 0.0


def upper_writes(step: StepPlan, requests: float) -> float:
    """Cache writes in the upper bound: no hit, so every request writes where misses write (the
    larger of the plan's count and the provider's, times the step's upper-bound factor)."""
    cache = step.prompt_cache
    if cache is None or not cache.sent or not cache.writes:
        return 0.0
    return requests * max(cache.tokens, cache.write_per_miss or 0.0) * step.token_upper_factor


def write_1h(step: StepPlan, writes: float) -> float:
    """The part of `writes` written for an hour (`cache.ttl: 1h`)."""
    cache = step.prompt_cache
    return writes if cache is not None and cache.ttl == "1h" else 0.0
