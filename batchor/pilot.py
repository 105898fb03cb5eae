"""Pilot runs: answer a seeded sample of rows for real, then plan the rest from what they cost.

A pilot is an ordinary apply of a sampled plan: N input rows drawn by the seeded sample of
`--sample` (the seed is in the pilot's plan and its report: the same seed draws the same rows),
every LLM step on them (a `when:` step only where its condition holds), realtime unless a mode is
given. Its answers are recorded and cached like any other, so the full run does not pay for them
again, and tagged `pilot`, so the next plan's estimate rests on them (`pilot: 50 answers`,
plan/estimate.py). It obeys the budget like any apply (the lower of `max_cost` and the spec's
`limits.max_cost_usd`) and writes `out.pilot.csv`, never the spec's output. The full plan is
then compiled against the same state and given its 90 % interval (plan/calibrate.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from batchor import api
from batchor.engine.events import Event
from batchor.engine.run import RunOutcome
from batchor.plan.calibrate import Calibration, calibrate, calibration_dict
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.summary import reask_upper
from batchor.state import open_state, state_location
from batchor.state.answer_stats import input_calibration, output_stats


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

    def to_dict(self) -> dict[str, Any]:
        return {"pilot": {**pilot_dict(self.pilot), "run_id": self.outcome.run_id, "status": self.outcome.status,
                          "cost_usd": self.outcome.cost_usd, "output": self.outcome.output_path,
                          "rehearsal": self.rehearsal},
                "plan_id": self.plan.plan_id, "plan_file": str(self.plan.saved_path) if self.plan.saved_path else None,
                "calibration": calibration_dict(self.calibration)}


def pilot_plan(spec: api.SpecLike, rows: int, *, seed: int | None = None, state: str | None = None,
               model: str | None = None, mock: bool = False, mode: str | None = None) -> CompiledPlan:
    """The pilot's plan: `rows` input rows of a seeded sample, realtime unless `mode` says otherwise."""
    return api.plan(spec, state=state, model=model, mock=mock, mode=mode or "realtime", pilot=rows, seed=seed,
                    save=False)


def pilot_dict(sampled: CompiledPlan) -> dict[str, Any]:
    """What a pilot is about to do and may cost at most, before it starts."""
    h = sampled.header
    steps = [s.name for s in h.steps if s.provider != "sql"]
    return {"rows": h.input.sample, "seed": h.input.seed, "steps": steps, "requests": h.totals.to_run,
            "most_calls": h.totals.to_run, "cost_upper_usd": h.totals.cost_upper,
            "cost_upper_all_attempts_usd": reask_upper(h), "output": h.output.path, "mocked": h.mocked}


def run_pilot(spec: api.SpecLike, rows: int, *, seed: int | None = None, state: str | None = None,
              model: str | None = None, mock: bool = False, mode: str | None = None, max_cost: float | None = None,
              on_event: Callable[[Event], None] | None = None, handle_signals: bool = True,
              announce: Callable[[CompiledPlan], None] | None = None) -> PilotResult:
    """Run a pilot of `rows` rows, then plan the full job from its answers. `announce` sees the
    pilot's plan (and its upper bound) before anything is sent."""
    sampled = pilot_plan(spec, rows, seed=seed, state=state, model=model, mock=mock, mode=mode)
    if announce is not None:
        announce(sampled)
    outcome = api.apply_compiled(sampled, max_cost=max_cost, state=state, on_event=on_event,
                                 handle_signals=handle_signals, run_kind="pilot")
    full = api.plan(spec, state=state, model=model, mock=mock, mode=mode)
    return PilotResult(rows, sampled.header.input.seed, sampled, outcome, full, calibrated(full, state),
                       rehearsal=sampled.header.mocked)


def calibrated(full: CompiledPlan, state: str | None = None) -> Calibration:
    """The full plan's interval, from the answers in the state behind each step's estimate."""
    location = state_location(state, full.header.state_location)
    llm = [s for s in full.header.steps if s.provider != "sql"]
    store = open_state(location)
    models = sorted({f"{s.provider}:{s.model}" for s in llm if not s.token_count_exact})
    return calibrate(full.header, output_stats(store, sorted({s.length_key for s in llm})),
                     input_calibration(store, models))
