"""Pilot runs: answer a seeded sample of rows for real, then plan the rest from what they cost.

A pilot is an ordinary apply of a sampled plan: N input rows drawn by the seeded sample of
`--sample` (the seed is in the pilot's plan and its report: the same seed draws the same rows),
every LLM step on them (a `when:` step only where its condition holds), realtime unless a mode is
given. Its answers are recorded and cached like any other, so the full run does not pay for them
again, and tagged `pilot`, so the next plan's estimate rests on them (`pilot: 50 answers`,
plan/estimate.py). It obeys the budget like any apply (the lower of `max_cost` and the spec's
`limits.max_cost_usd`) and writes `out.pilot.csv`, never the spec's output. The full plan is
then compiled against the same state and given its 90 % interval (plan/calibrate.py).
A pilot makes at most N x steps billed calls, re-asks included: the engine holds its runs to what
is left of that allowance. A step that a `when:` lets run on only some rows is topped up with more
rows of the same sample with the calls left, until it has N answers or they are spent
(pilot/topup.py; where its `when:` reads only the row, rows where it holds, and the answers of the
steps above it weighted back to its share: pilot/strata.py, plan/strata.py); the largest sample's
cost is announced before the pilot starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from batchor import api
from batchor.engine.budget import CALL_LIMIT
from batchor.engine.events import Event
from batchor.engine.run import RunOutcome
from batchor.errors import CostLimitError
from batchor.pilot.ledger import answers_per_step, calls_made, drawn_inside, pilot_attempts, pilots_spent
from batchor.pilot.size import TARGET, PilotSize, pilot_size
from batchor.pilot.strata import (
    Stratum,
    calls_per_row,
    find_stratum,
    reweightings,
    stratum_share,
)
from batchor.pilot.topup import (
    ROUNDS,
    Drawn,
    TopUpBound,
    bound_rows,
    call_allowance,
    filtered_steps,
    llm_steps,
    next_rows,
)
from batchor.plan.budget import plan_budget
from batchor.plan.calibrate import Calibration, calibrate, calibration_dict
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.strata import Reweighting, reweighed, reweighing
from batchor.plan.summary import reask_upper
from batchor.state import StateStore, open_state, state_location
from batchor.state.answer_stats import input_calibration, output_stats
from batchor.state.length_stats import InputCalibration, KeyStats

STOPPED = ("interrupted", "budget", "paused", "in_flight")  # statuses of a pilot that may not have finished


@dataclass(frozen=True)
class TopUp:
    """One top-up round: the larger sample it ran and why."""

    rows: int  # rows of the larger sample (the pilot's included, cached)
    answers_before: dict[str, int]  # the starved steps' answers before the round
    outcome: RunOutcome

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "answers_before": self.answers_before,
            "run_id": self.outcome.run_id,
            "status": self.outcome.status,
            "cost_usd": self.outcome.cost_usd,
        }


@dataclass
class PilotResult:
    """What a pilot ran, what it cost, and the full plan it calibrated."""

    rows: int  # input rows the pilot drew
    seed: int  # the sample's seed: the same seed draws the same rows
    pilot: CompiledPlan  # the sampled plan the pilot ran
    outcome: RunOutcome  # the pilot's run
    plan: CompiledPlan  # the full plan, compiled after the pilot (its answers cached)
    calibration: Calibration
    rehearsal: bool  # --mock: the numbers rehearse the flow, they say nothing of the model
    top_ups: list[TopUp] = field(default_factory=list)  # the rounds that drew more rows for starved steps
    bound: TopUpBound | None = None  # the most the top-up could draw, announced before the pilot
    calls: int = 0  # billed calls the pilot made (re-asks included), counted in the state
    allowance: int = 0  # the most it could make: N x steps
    stratified: dict[str, Any] | None = None  # a top-up drawn where a row-only `when:` holds (pilot/strata.py)
    size: PilotSize | None = None  # the pilot that would bring the whole job within +-10 % (pilot/size.py)
    spent_before: float = 0.0  # what earlier rounds of the same pilot spent (--pilot auto: pilot/auto.py)
    earlier_runs: list[str] = field(default_factory=list)  # their runs

    @property
    def run_ids_all(self) -> list[str]:
        """Every run of this pilot, its earlier rounds' included."""
        return [*self.earlier_runs, *self.run_ids]

    @property
    def run_ids(self) -> list[str]:
        """This round's runs: the pilot's and its top-up's."""
        return [self.outcome.run_id, *(t.outcome.run_id for t in self.top_ups)]

    @property
    def cost_usd(self) -> float:
        """What the pilot spent, its top-up (and earlier rounds: --pilot auto) included."""
        return self.spent_before + self.outcome.cost_usd + sum(t.outcome.cost_usd for t in self.top_ups)

    @property
    def last_outcome(self) -> RunOutcome:
        """The last run of the pilot (its top-up's when there was one): whether it finished."""
        return self.top_ups[-1].outcome if self.top_ups else self.outcome

    @property
    def stopped(self) -> bool:
        """The pilot did not finish (Ctrl+C, the budget, a pause, batches in flight): nothing to calibrate."""
        return self.last_outcome.status in STOPPED and not finished(self.last_outcome)

    @property
    def duration_s(self) -> float:
        return self.outcome.duration_s + sum(t.outcome.duration_s for t in self.top_ups)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pilot": {
                **pilot_dict(self.pilot, self.bound),
                "run_id": self.outcome.run_id,
                "status": self.last_outcome.status,
                "cost_usd": self.cost_usd,
                "output": self.last_outcome.output_path,
                "rehearsal": self.rehearsal,
                "top_ups": [t.to_dict() for t in self.top_ups],
                "calls": self.calls,
                "calls_allowed": self.allowance,
                "stratified": self.stratified,
                "size": self.size.to_dict() if self.size is not None else None,
            },
            "plan_id": self.plan.plan_id,
            "plan_file": str(self.plan.saved_path) if self.plan.saved_path else None,
            "calibration": calibration_dict(self.calibration),
        }


def pilot_plan(
    spec: api.SpecLike,
    rows: int,
    *,
    seed: int | None = None,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    row_keys: list[str] | None = None,
) -> CompiledPlan:
    """The pilot's plan: `rows` input rows of a seeded sample (or the rows `row_keys` names: a
    stratified top-up's), realtime unless `mode` says otherwise."""
    return api.plan(
        spec,
        state=state,
        model=model,
        mock=mock,
        mode=mode or "realtime",
        pilot=len(row_keys) if row_keys else rows,
        seed=seed,
        save=False,
        row_keys=row_keys,
    )


def pilot_dict(sampled: CompiledPlan, bound: TopUpBound | None = None) -> dict[str, Any]:
    """What a pilot is about to do and may cost at most, before it starts (`top_up`: what drawing
    more rows for steps a `when:` starves may add, at most; its bound covers the pilot too)."""
    h = sampled.header
    return {
        "rows": h.input.sample,
        "seed": h.input.seed,
        "steps": llm_steps(sampled),
        "requests": h.totals.to_run,
        "most_calls": call_allowance(sampled),
        "cost_upper_usd": h.totals.cost_upper,
        "cost_upper_all_attempts_usd": reask_upper(h),
        "output": h.output.path,
        "mocked": h.mocked,
        "top_up": bound.to_dict() if bound is not None else None,
    }


def run_pilot(
    spec: api.SpecLike,
    rows: int,
    *,
    seed: int | None = None,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    max_cost: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    announce: Callable[[CompiledPlan, TopUpBound | None], None] | None = None,
    prior: PilotResult | None = None,
    target: float = TARGET,
) -> PilotResult:
    """Run a pilot of `rows` rows (topped up for steps a `when:` starved), then plan the full job
    from its answers. `announce` sees the pilot's plan and the top-up's bound before anything is sent.
    `prior`: the smaller pilot of the same seed this one grows (--pilot auto): its calls count
    against this one's allowance, its answers towards the top-up's, its spend towards the job's."""
    options: dict[str, Any] = {"seed": seed, "state": state, "model": model, "mock": mock, "mode": mode}
    sampled = pilot_plan(spec, rows, **options)
    bound, stratum = top_up_bound(spec, sampled, options)
    if announce is not None:
        announce(sampled, bound)
    allowance = call_allowance(sampled)
    store = open_state(state_location(state, sampled.header.state_location))
    before = prior.run_ids_all if prior is not None else []
    outcome = api.apply_compiled(
        sampled,
        max_cost=max_cost,
        state=state,
        on_event=on_event,
        handle_signals=handle_signals,
        run_kind="pilot",
        max_calls=max(0, allowance - calls_made(store, before)),
    )
    top_ups: list[TopUp] = []
    if bound is not None and finished(outcome):
        budget, _ = plan_budget(max_cost, sampled.header)  # rounds share it
        top_ups = _top_up(
            spec, (rows, outcome, allowance, before), (bound, stratum), options, (budget, on_event, handle_signals)
        )
    runs = [*before, outcome.run_id, *(t.outcome.run_id for t in top_ups)]
    weights = _weights(store, runs, stratum, sampled) if (top_ups or before) and stratum is not None else {}
    spent_before = prior.cost_usd if prior is not None else 0.0
    with reweighing(weights):
        full = api.plan(spec, state=state, model=model, mock=mock, mode=mode)
        stats, inputs = measured(full, state)
    spent = pilots_spent(store, full)  # every pilot's of this job's rows: an earlier `--pilot N`'s too
    calibration = dataclasses.replace(calibrate(full.header, stats, inputs), spent=spent)
    return PilotResult(
        rows,
        sampled.header.input.seed,
        sampled,
        outcome,
        full,
        calibration,
        rehearsal=sampled.header.mocked,
        top_ups=top_ups,
        bound=bound,
        calls=calls_made(store, runs),
        allowance=allowance,
        stratified=_stratified(stratum, weights, top_ups),
        size=pilot_size(full.header, stats, inputs, spent, rows, target),
        spent_before=spent_before,
        earlier_runs=before,
    )


def finished(outcome: RunOutcome) -> bool:
    """The pilot's run ended by itself or by its call allowance (not by the budget, Ctrl+C, quota)."""
    return outcome.status in ("succeeded", "partial") or (
        outcome.status == "budget" and CALL_LIMIT in (outcome.stop_reason or "")
    )


def top_up_bound(
    spec: api.SpecLike, sampled: CompiledPlan, options: dict[str, Any]
) -> tuple[TopUpBound | None, Stratum | None]:
    """The largest sample a top-up may draw, planned now so its cost is announced with the pilot's,
    and where a row-only `when:` allows it, the stratum its rows are drawn from (pilot/strata.py)."""
    steps = filtered_steps(sampled)
    rows = sampled.header.input.sample or 0
    if not steps or sampled.header.totals.rows < rows:  # the sample already holds every input row
        return None, None
    stratum = find_stratum(spec, sampled, options, bound_rows(rows) - rows)
    if stratum is not None and stratum.candidates:
        plan = pilot_plan(spec, rows, row_keys=stratum.keys(len(stratum.candidates)), **options)
        return TopUpBound(steps, plan.header.totals.rows, plan, stratum.step), stratum
    plan = pilot_plan(spec, bound_rows(rows), **options)
    return TopUpBound(steps, plan.header.totals.rows, plan), None


def _top_up(
    spec: api.SpecLike,
    pilot: tuple[int, RunOutcome, int, list[str]],
    bounds: tuple[TopUpBound, Stratum | None],
    options: dict[str, Any],
    run: tuple[float | None, Callable[[Event], None] | None, bool],
) -> list[TopUp]:
    """Draw more rows, with the calls the pilot has left, until every starved step has N answers
    (or the calls, or the bound, run out): rows of the seeded sample, or where a stratum's `when:`
    holds (counted in its rows: the pilot's own there, then its top-up's); a round the budget cannot
    cover is not started."""
    (rows, first, allowance, before), (max_cost, on_event, handle_signals), (bound, stratum) = pilot, run, bounds
    store = open_state(state_location(options["state"], bound.plan.header.state_location))
    done: list[TopUp] = []
    drawn, spent = (rows, first.cost_usd) if stratum is None else (drawn_inside(store, before, stratum), first.cost_usd)
    for _ in range(ROUNDS):
        runs = [*before, first.run_id, *(t.outcome.run_id for t in done)]
        now = Drawn(drawn, calls_made(store, runs), answers_per_step(store, runs, bound.steps))
        wanted = _wanted(rows, now, allowance, bound, (store, runs, stratum))
        if wanted <= drawn:
            break
        larger = (
            pilot_plan(spec, wanted, **options)
            if stratum is None
            else pilot_plan(spec, rows, row_keys=stratum.keys(wanted - stratum.pilot_inside), **options)
        )
        try:
            outcome = api.apply_compiled(
                larger,
                max_cost=None if max_cost is None else max(0.0, max_cost - spent),
                state=options["state"],
                on_event=on_event,
                handle_signals=handle_signals,
                run_kind="pilot",
                max_calls=allowance - now.calls,
            )
        except CostLimitError:
            break  # nothing was sent: the plan calibrates on the answers it has
        done.append(TopUp(larger.header.totals.rows, now.answers, outcome))
        drawn, spent = wanted, spent + outcome.cost_usd
        if not finished(outcome) or outcome.status == "budget":
            break  # stopped, or the allowance is spent
    return done


def _wanted(
    rows: int, now: Drawn, allowance: int, bound: TopUpBound, stratified: tuple[Any, list[str], Stratum | None]
) -> int:
    """The next round's rows: of the sample, or of the stratum at the calls its rows take so far."""
    store, runs, stratum = stratified
    if stratum is None:
        return next_rows(rows, now, allowance, bound.rows)
    per_row = calls_per_row(pilot_attempts(store, runs, stratum), now.rows, len(llm_steps(bound.plan)))
    return next_rows(rows, now, allowance, stratum.pilot_inside + len(stratum.candidates), per_row)


def _weights(store: StateStore, runs: list[str], stratum: Stratum, sampled: CompiledPlan) -> dict[str, Reweighting]:
    """The answers of the steps above a stratified top-up's `when:`, weighted to its exact share."""
    if not stratum.weighted_steps:
        return {}
    keys = {s.name: s.length_key for s in sampled.header.steps if not s.local}
    return reweightings(pilot_attempts(store, runs, stratum), stratum, stratum_share(stratum), keys)


def _stratified(
    stratum: Stratum | None, weights: dict[str, Reweighting], top_ups: list[TopUp]
) -> dict[str, Any] | None:
    """What a stratified top-up drew and how it weighted the steps above it (None: not stratified)."""
    if stratum is None or not top_ups:
        return None
    return {
        "where": stratum.step,
        "rows_drawn": top_ups[-1].rows - len(stratum.pilot_keys),
        "share": next((w.share for w in weights.values()), None),
        "weighted": {
            w.step: {"inside": w.inside, "outside": w.outside, "effective": w.weighted.answers}
            for w in weights.values()
        },
    }


def calibrated(full: CompiledPlan, state: str | None = None) -> Calibration:
    """The full plan's interval, from the answers in the state behind each step's estimate."""
    return calibrate(full.header, *measured(full, state))


def measured(full: CompiledPlan, state: str | None = None) -> tuple[dict[str, KeyStats], dict[str, InputCalibration]]:
    """The answers behind each step's estimate (a stratified pilot's weighted back) and the input
    calibrations of the models counted with another tokenizer: what the interval reads."""
    location = state_location(state, full.header.state_location)
    llm = [s for s in full.header.steps if not s.local]
    store = open_state(location)
    models = sorted({f"{s.provider}:{s.model}" for s in llm if not s.token_count_exact})
    return (reweighed(output_stats(store, sorted({s.length_key for s in llm}))), input_calibration(store, models))
