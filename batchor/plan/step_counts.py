"""Planning, counting: each step's counts and costs from its tally of rows.

A step's tally (rows, cached, skipped, to run, input tokens; projected rows below a `when:` or a
fan-out) becomes its `StepCounts`: expected and upper output tokens, expected and upper cost with
the prompt cache's reads and writes, upstream steps first so a step below a `when:` step learns
the share of its rows that will get the answers it reads.
"""

from __future__ import annotations

from typing import Any

from batchor.plan.context_cache import choose_explicit, explicit_usd
from batchor.plan.dependent import (
    DependentTally,
)
from batchor.plan.fallback_cost import with_fallback_costs
from batchor.plan.fanout_rows import order_steps
from batchor.plan.length_fit import adjusted_for_input
from batchor.plan.mode import settle_mode
from batchor.plan.model import (
    StepCounts,
    StepPlan,
    output_per_request,
)
from batchor.plan.prices import ModelPrice
from batchor.plan.prompt_cache import cache_tokens, upper_writes, write_1h
from batchor.plan.reduce import ReduceTally
from batchor.plan.render import RowTally


def counted_steps(steps: list[StepPlan], tallies: dict[str, Any], rows: int, batch_threshold: int) -> list[StepPlan]:
    """Each step with its counts, upstream steps first: a step below a `when:` step learns from
    them the share of its projected rows that will get the answers it reads (`answered`)."""
    answered: dict[str, float] = {}
    counted: dict[str, StepPlan] = {}
    for step in order_steps(steps):
        counted[step.name] = _with_counts(step, tallies.get(step.name), rows, batch_threshold, answered)
        answered[step.name] = answered.get(step.name, 1.0) * step.answer_share  # failed requests answer nothing
    return [counted[s.name] for s in steps]


def _with_counts(
    step: StepPlan,
    tally: RowTally | DependentTally | ReduceTally | None,
    rows: int,
    batch_threshold: int,
    answered: dict[str, float],
) -> StepPlan:
    step = settle_mode(step, tally.to_run if tally is not None else rows, batch_threshold)
    rest_input = _rest_input_mean(tally) if step.length_fit is not None and tally is not None else None
    if rest_input is not None:  # answers that grow with the input: at the rest's mean input (plan/length_fit.py)
        step = adjusted_for_input(step, rest_input)
    price = ModelPrice.from_dict(step.price) if step.price else None
    step = choose_explicit(step, price, tally.to_run if tally is not None else rows)
    if isinstance(tally, DependentTally):
        counts = _dependent_counts(price, step, tally, answered)
    elif tally is None:
        raise AssertionError(f"step {step.name} was planned without counting its rows")
    else:
        counts = _priced(
            price,
            step,
            tally.rows,
            tally.cached,
            tally.skipped,
            tally.to_run,
            tally.input_tokens,
            estimated=not step.token_count_exact,
        )
        counts = counts.model_copy(
            update={
                "too_long": tally.too_long,
                "attachment_problems": tally.attachment_problems,
                "attachment_examples": tally.attachment_examples,
            }
        )
    if tally is not None:
        counts = counts.model_copy(update={"failed_earlier": tally.failed_earlier})
    if isinstance(tally, ReduceTally) and (tally.projected or tally.bounded):
        counts = counts.model_copy(update={"projected": tally.projected, "estimated": True})
    if isinstance(tally, DependentTally):
        tally.run_keys.clear()
    return with_fallback_costs(step.model_copy(update={"counts": counts}))


def _rest_input_mean(tally: RowTally | DependentTally | ReduceTally) -> float | None:
    """Counted input tokens per request still to run (projected rows at their expected count);
    None when nothing is left to run."""
    tokens, requests = float(tally.input_tokens), tally.to_run
    if isinstance(tally, DependentTally) and tally.projected:
        tokens, requests = tokens + tally.projected * tally.projected_tokens_per_row, requests + tally.projected
    return tokens / requests if requests else None


def _dependent_counts(
    price: ModelPrice | None, step: StepPlan, tally: DependentTally, answered: dict[str, float]
) -> StepCounts:
    """Known requests priced exactly; projected rows at the upper bound, expected (cost, input and
    output tokens) x selectivity.
    `answered`: per step counted so far, the share of its projected rows it answers (this step's is added)."""
    known = _priced(
        price,
        step,
        tally.rows,
        tally.cached,
        tally.skipped,
        tally.to_run,
        tally.input_tokens,
        estimated=not step.token_count_exact,
    )
    known = known.model_copy(update={"elements": tally.elements, "unbounded": tally.unbounded})
    if not tally.projected:
        return known
    if step.local:  # computed locally: projected rows cost nothing
        return known.model_copy(update={"projected": tally.projected})
    upper = _priced(price, step, 0, 0, 0, tally.projected, tally.projected * tally.projected_tokens_max, estimated=True)
    mean = _priced(
        price, step, 0, 0, 0, tally.projected, tally.projected * tally.projected_tokens_per_row, estimated=True
    )
    when = when_measure(step, tally)
    selectivity = when["when_ran"] / when["when_evaluated"] if when.get("when_evaluated") else 1.0
    selectivity *= upstream_share(step, tally, answered)  # rows whose upstream answer never comes
    answered[step.name] = selectivity
    share = selectivity * tally.projected_expected / tally.projected  # below a fan-out: fewer than its bound
    share *= tally.distinct_share  # rows that will render the same request send it once
    return known.model_copy(
        update={
            "to_run": known.to_run + tally.projected,
            "input_tokens": known.input_tokens + round(mean.input_tokens * share),
            "output_tokens_expected": known.output_tokens_expected + int(mean.output_tokens_expected * share),
            "output_tokens_upper": known.output_tokens_upper + upper.output_tokens_upper,
            "cost_expected": known.cost_expected + mean.cost_expected * share,
            "cost_upper": known.cost_upper + upper.cost_upper,
            "estimated": True,
            "projected": tally.projected,
            "when_decided": tally.when_decided,
            **when,
        }
    )


def upstream_share(step: StepPlan, tally: DependentTally, answered: dict[str, float]) -> float:
    """Share of projected rows that will get every answer the step reads: measured on this input's
    rows whose upstream steps are settled; with none (a new input), the share the upstream steps
    are expected to answer (the least of them: a step reading two usually reads a chain, where the
    later one answers only rows the earlier one did)."""
    if tally.evaluated + tally.skipped_upstream:
        return tally.upstream_share
    return min((answered.get(name, 1.0) for name in step.depends_on), default=1.0)


def when_measure(step: StepPlan, tally: DependentTally) -> dict[str, Any]:
    """The share of projected rows expected to run and where it comes from: decided on the row now
    (all run), the rows of this input whose upstream answers exist, or earlier jobs' rows of the
    same `when:` on the same steps when those are more (a new input has none of its own)."""
    if tally.when_decided or not step.when:
        return {"when_source": "decided on the row" if tally.when_decided else None}
    ran, evaluated = tally.evaluated - tally.skipped_by_when, tally.evaluated
    if len(step.when_history) == 2 and step.when_history[1] > evaluated:
        (ran, evaluated), source = step.when_history, "history"
    else:
        source = "this input"
    if not evaluated:
        return {"when_source": "not measured yet: every projected row counted"}
    return {"when_source": f"{source}: {ran:,} of {evaluated:,} rows", "when_evaluated": evaluated, "when_ran": ran}


def _priced(
    price: ModelPrice | None,
    step: StepPlan,
    rows: int,
    cached: int,
    skipped: int,
    to_run: int,
    input_tokens: int,
    *,
    estimated: bool,
) -> StepCounts:
    out_expected = round(to_run * output_per_request(step))  # unrounded mean: short answers lose no share
    out_upper = to_run * step.max_tokens
    # calibrated for the provider's tokenizer; re-asks send the input again, with the rejected answer and feedback
    expected_in = round(input_tokens * step.input_factor + to_run * step.reask_input_tokens)
    upper_in = int(input_tokens * step.token_upper_factor)
    cost_expected, cost_upper = _costs(price, step, to_run, (expected_in, out_expected), (upper_in, out_upper))
    return StepCounts(
        rows=rows,
        to_run=to_run,
        cached=cached,
        skipped=skipped,
        input_tokens=expected_in,
        output_tokens_expected=out_expected,
        output_tokens_upper=out_upper,
        cost_expected=cost_expected,
        cost_upper=cost_upper,
        estimated=estimated,
    )


def _costs(
    price: ModelPrice | None, step: StepPlan, requests: int, expected: tuple[int, int], upper: tuple[int, int]
) -> tuple[float, float]:
    """Expected and upper cost of `requests`: the expected one with the prompt-cache reads and
    writes the step is expected to make, the upper one with none read (plan/prompt_cache.py)."""
    if price is None:
        return 0.0, 0.0
    batch, flex = step.mode == "batch", step.service_tier == "flex"
    reads, writes = cache_tokens(step, requests)
    cost_expected = price.cost(
        *expected,
        batch=batch,
        flex=flex,
        cached_input_tokens=round(reads),
        cache_write_tokens=round(writes),
        cache_write_1h_tokens=round(write_1h(step, writes)),
    )
    cost_expected += explicit_usd(step, price, requests)
    most = upper_writes(step, requests)
    cost_upper = explicit_usd(
        step, price, requests, upper=True
    ) + price.cost(  # a flex step allowed to fall back may pay the standard tier
        *upper,
        batch=batch,
        flex=flex and not step.flex_fallback,
        cache_write_tokens=round(most),
        cache_write_1h_tokens=round(write_1h(step, most)),
    )
    return cost_expected, cost_upper
