"""Run one seeded sample on each model, within one budget, and measure each against the spec.

Each model's sample is a pilot (batchor/pilot/): the same rows (one seed), its answers cached in the
state (a second compare pays nothing for them) and tagged `pilot`, then the full plan on that model
calibrated from them (the pilot estimator: its expected cost and 90 % interval). Before any call,
every model's largest pilot (top-up included) is planned and priced: their sum must fit `max_cost`,
which then covers all models together, each pilot spending at most what the ones before it left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from batchor import api, quality
from batchor.choose.result import Comparison, ModelResult
from batchor.engine.events import Event
from batchor.errors import CostLimitError, UsageError
from batchor.pilot import PilotResult, pilot_plan, run_pilot, top_up_bound
from batchor.plan.summary import money
from batchor.quality.compare import diff_sources
from batchor.quality.sources import Source, plan_spec
from batchor.state import StateStore, open_state, state_location


def compare(
    spec: str | Path,
    models: list[str],
    sample: int,
    *,
    reference: str | None = None,
    seed: int | None = None,
    state: str | None = None,
    mode: str | None = None,
    mock: bool = False,
    max_cost: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    approve: Callable[[dict[str, float]], None] | None = None,
) -> Comparison:
    """Run the same `sample` rows on each of `models` (provider:name) and measure each one: sample
    cost, projected full-job cost, checks passed, golden-label metrics, agreement with `reference`
    (default: the model whose full job costs most), p50 latency. `max_cost` covers all models;
    `approve` sees each model's most possible spend before anything is sent (it may raise)."""
    wanted = _models(models, reference)
    api.check_arguments(mode=mode, max_cost=max_cost, sample=sample)
    options: dict[str, Any] = {"state": state, "mock": mock, "mode": mode}
    seed = pilot_plan(spec, sample, seed=seed, model=wanted[0], **options).header.input.seed
    bounds = check_budget(spec, sample, seed, wanted, options, max_cost)
    if approve is not None:
        approve(bounds)
    pilots: dict[str, PilotResult] = {}
    left = max_cost
    for model in wanted:
        run: dict[str, Any] = {"on_event": on_event, "handle_signals": handle_signals}
        pilots[model] = run_pilot(spec, sample, seed=seed, model=model, max_cost=left, **run, **options)
        left = None if left is None else max(0.0, left - pilots[model].cost_usd)
    ref = reference or max(wanted, key=lambda m: pilots[m].calibration.job[0])
    results = [_measure(model, pilots[model], pilots[ref] if model != ref else None, state) for model in wanted]
    return Comparison(str(spec), sample, seed, ref, results, rehearsal=mock)


def _models(models: list[str], reference: str | None) -> list[str]:
    wanted = list(dict.fromkeys(m.strip() for m in models if m.strip()))
    if len(wanted) < 1 or any(":" not in m for m in wanted):
        raise UsageError(
            f"--models {','.join(models)!r}: give models as provider:name, separated by commas",
            hint="e.g. --models openai:gpt-4.1-nano,openai:gpt-4.1-mini,openai:gpt-4.1",
        )
    if reference is not None and reference not in wanted:
        wanted.append(reference)  # the reference is run too: agreement needs its answers
    return wanted


def check_budget(
    spec: str | Path, sample: int, seed: int, models: list[str], options: dict[str, Any], max_cost: float | None
) -> dict[str, float]:
    """Each model's largest pilot (its top-up's bound covers the pilot) priced before any call;
    `CostLimitError` when together they may cost more than `max_cost`."""
    bounds = {}
    for model in models:
        sampled = pilot_plan(spec, sample, seed=seed, model=model, **options)
        bound, _ = top_up_bound(spec, sampled, {**options, "seed": seed, "model": model})
        bounds[model] = (bound.plan if bound is not None else sampled).header.totals.cost_upper
    total = sum(bounds.values())
    if max_cost is not None and total > max_cost:
        each = ", ".join(f"{m} {money(v)}" for m, v in bounds.items())
        raise CostLimitError(
            f"compare may cost up to {money(total)} on {len(models)} models ({each}), "
            f"over --max-cost {money(max_cost)}",
            hint="raise --max-cost, compare fewer models, or a smaller --sample; nothing was sent",
        )
    return bounds


def _measure(model: str, pilot: PilotResult, reference: PilotResult | None, state: str | None) -> ModelResult:
    plan = pilot.pilot
    store = open_state(state_location(state, plan.header.state_location))
    report = quality.checks_after_run(plan, pilot.outcome.run_id, pilot.last_outcome.status, state)
    checks = report.checks if report is not None else []
    expected, low, high = pilot.calibration.job
    agree, compared = _agreement(pilot, reference, store) if reference is not None else (None, 0)
    return ModelResult(
        model,
        rows=pilot.rows,
        status=pilot.last_outcome.status,
        sample_cost=sum(store.step_costs(plan.job_id).values()),
        spent_now=pilot.cost_usd,
        projected=expected,
        projected_low=low,
        projected_high=high,
        checks_passed=sum(1 for c in checks if c.passed),
        checks_total=len(checks),
        failed_checks=[c.name for c in checks if not c.passed],
        metrics={f"{m.name}.{k}": v for m in (report.metrics if report else []) for k, v in m.values.items()},
        agreement=agree,
        compared=compared,
        latency_p50_ms=store.job_latency_p50(plan.job_id),
        plan_file=str(pilot.plan.saved_path) if pilot.plan.saved_path else None,
    )


def _agreement(pilot: PilotResult, reference: PilotResult, store: StateStore) -> tuple[float | None, int]:
    """Share of the sample's answers (every step) equal to the reference model's on the same row."""
    diff = diff_sources(_source(reference, store), _source(pilot, store), examples=0)
    compared = sum(s.compared for s in diff.steps)
    same = sum(s.compared - s.changed for s in diff.steps)
    return (same / compared if compared else None), compared


def _source(pilot: PilotResult, store: StateStore) -> Source:
    plan = pilot.pilot
    return Source(plan.header.name, plan, store, store.get_run(pilot.outcome.run_id), plan_spec(plan))
