"""The price of a step's other models (spec `model.fallback`, `escalate.to`): the upper bound
assumes every request may go to each of them (what apply's budget reserves); the expected cost adds
the share of requests that fell back in earlier runs (`fallback_share`, none when not measured)
and, for an escalation, the share of answers that escalated (`escalate_share`; every row when not
measured: the stronger model's price is the one a wrong guess costs most).
"""

from __future__ import annotations

from batchor.plan.model import StepPlan, output_per_request
from batchor.plan.prices import ModelPrice


def with_fallback_costs(step: StepPlan) -> StepPlan:
    """`step` with its fallback models' cost added to its counts."""
    counts = step.counts
    if not step.other_models or not counts.to_run:
        return step
    upper = expected = 0.0
    # an escalation is priced for every row until runs measure its share; a fallback for none
    escalated = 1.0 if step.escalate_share is None else step.escalate_share
    others = [(f, (step.fallback_share or 0.0) if i == 0 else 0.0) for i, f in enumerate(step.fallbacks)]
    if step.escalation is not None:
        others.append((step.escalation, escalated))
    for other, share in others:
        if other.price is None:
            continue
        price, batch = ModelPrice.from_dict(other.price), other.mode == "batch"
        tokens_in = counts.input_tokens
        upper += price.cost(int(tokens_in * other.token_upper_factor), counts.to_run * other.max_tokens, batch=batch)
        if share:
            out = round(counts.to_run * output_per_request(other))
            expected += share * price.cost(tokens_in, out, batch=batch)
    update = {"cost_upper": counts.cost_upper + upper, "cost_expected": counts.cost_expected + expected}
    return step.model_copy(update={"counts": counts.model_copy(update=update)})


def fallback_upper(step: StepPlan) -> float:
    """What the step's fallback models add to its upper bound (shown by `plan`)."""
    if not step.fallbacks or not step.counts.to_run:
        return 0.0
    zero = step.counts.model_copy(update={"cost_upper": 0.0, "cost_expected": 0.0})
    bare = step.model_copy(update={"counts": zero, "escalation": None})
    return with_fallback_costs(bare).counts.cost_upper
