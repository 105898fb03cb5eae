"""Pilots: answer a seeded sample of rows for real, then plan the rest from what they cost.

The face of the package (what the CLI and the Python API use):
- `run(spec, 50 | "auto", ...) -> PilotRun`: a pilot of N rows (`run_pilot`), or one grown until
  the whole job is within +-10 % (`run_auto`); `PilotResult` holds its runs, the calibrated full
  plan and its interval;
- `apply_after_pilot(result, max_cost=...)`: the rest, within what the pilot left of the budget,
  refused when a step got no valid answer (rest.py).

Inside: run.py (one pilot and its top-up), auto.py (`--pilot auto`), topup.py (the call allowance),
strata.py (a top-up drawn where a row-only `when:` holds), size.py (the pilot that would reach the
target), ledger.py (every read of the state the pilot makes).
"""

from batchor.pilot.auto import ROUNDS, START, AutoBound, AutoPilot, run_auto
from batchor.pilot.rest import (
    PilotRun,
    apply_after_pilot,
    apply_with_pilot,
    budget_left,
    pilot_rows,
    refuse_unanswered,
    remaining_budget,
    rest_refused,
    run,
)
from batchor.pilot.run import PilotResult, calibrated, finished, pilot_dict, pilot_plan, run_pilot, top_up_bound
from batchor.pilot.topup import TopUpBound, llm_steps
from batchor.plan.calibrate import calibration_lines

__all__ = [
    "ROUNDS",
    "START",
    "AutoBound",
    "AutoPilot",
    "PilotResult",
    "PilotRun",
    "TopUpBound",
    "apply_after_pilot",
    "apply_with_pilot",
    "budget_left",
    "calibrated",
    "calibration_lines",
    "finished",
    "llm_steps",
    "pilot_dict",
    "pilot_plan",
    "pilot_rows",
    "refuse_unanswered",
    "remaining_budget",
    "rest_refused",
    "run",
    "run_auto",
    "run_pilot",
    "top_up_bound",
]
