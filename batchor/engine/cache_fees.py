"""Engine: the fees of caches a run holds apart from its requests (Gemini explicit context caches).

The adapter that makes such a cache reports it made, renewed and deleted (providers/base.py
`CacheFee`); this ledger prices each report (its tokens once at the step's input rate, storage per
token-hour for the time held, providers/caching.py) and records it at once (state/cache_fees.py),
so a run killed while holding one has already recorded what the provider bills for it: storage
until its expiry. What each report adds to the recorded fee goes to the budget and the progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from batchor.plan.model import StepPlan
from batchor.plan.prices import ModelPrice
from batchor.providers.base import CacheFee
from batchor.providers.caching import storage_usd_per_token_hour
from batchor.state.cache_fees import CacheFeeEntry

if TYPE_CHECKING:
    from batchor.state.base import StateStore


class CacheFeeLedger:
    """Records the caches a run holds, each attributed to the step whose cache key it carries."""

    def __init__(
        self, store: StateStore, run_id: str, steps: Iterable[StepPlan], spent: Callable[[float, str], None]
    ) -> None:
        self._store, self._run_id, self._spent = store, run_id, spent
        self._steps = {s.prompt_cache.key: s for s in _with_other_models(steps) if s.prompt_cache is not None}

    def __call__(self, fee: CacheFee) -> None:
        step = self._steps.get(fee.key)
        price = ModelPrice.from_dict(step.price) if step is not None and step.price else None
        creation = float(price.cost(fee.tokens, 0)) if price is not None else 0.0
        hours = max(0.0, fee.held_until - fee.created_at) / 3600
        storage = fee.tokens * hours * storage_usd_per_token_hour(fee.model)
        name = step.name if step is not None else ""
        entry = CacheFeeEntry(self._run_id, fee.name, name, step.provider if step else "", fee.model, fee.tokens,
                              fee.created_at, fee.held_until, fee.deleted, creation, storage)  # fmt: skip
        before = self._store.record_cache_fee(entry)  # an earlier apply's, for a batch step's cache
        self._spent(creation + storage - before, name)


def _with_other_models(steps: Iterable[StepPlan]) -> list[StepPlan]:
    """Each step with its fallback and escalation models' plans (they send under their own key)."""
    found: list[StepPlan] = []
    for step in steps:
        found += [step, *step.fallbacks, *([step.escalation] if step.escalation is not None else [])]
    return found
