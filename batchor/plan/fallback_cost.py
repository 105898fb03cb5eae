"""The price of a step's fallback models (spec `model.fallback`): the upper bound assumes every
request may fall back to every fallback model in turn (what apply's budget reserves); the expected
cost adds the share of requests that fell back in earlier runs of the step (`fallback_share`).
"""

from __future__ import annotations

from batchor.plan.model import StepPlan, output_per_request
from batchor.plan.prices import ModelPrice


def with_fallback_costs(step: StepPlan) -> StepPlan:
    """`step` with its fallback models' cost added to its counts."""
    counts = step.counts
    if not step.fallbacks or not counts.to_run:
        return step
    upper = expected = 0.0
    share = step.fallback_share or 0.0
    for index, other in enumerate(step.fallbacks):
        if other.price is None:
            continue
        price, batch = ModelPrice.from_dict(other.price), other.mode == "batch"
        tokens_in = counts.input_tokens
        upper += price.cost(int(tokens_in * other.token_upper_factor), counts.to_run * other.max_tokens, batch=batch)
        if index == 0 and share:
            out = round(counts.to_run * output_per_request(other))
            expected += share * price.cost(tokens_in, out, batch=batch)
    update = {"cost_upper": counts.cost_upper + upper, "cost_expected": counts.cost_expected + expected}
    return step.model_copy(update={"counts": counts.model_copy(update=update)})


def fallback_upper(step: StepPlan) -> float:
    """What the step's fallback models add to its upper bound (shown by `plan`)."""
    if not step.fallbacks or not step.counts.to_run:
        return 0.0
    bare = step.model_copy(update={"counts": step.counts.model_copy(update={"cost_upper": 0.0, "cost_expected": 0.0})})
    return with_fallback_costs(bare).counts.cost_upper
