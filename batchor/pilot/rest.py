"""After a pilot: the rules that decide whether, and within what budget, the rest of the job runs.

A pilot and the run after it share one budget (the lower of `max_cost` and the spec's
`limits.max_cost_usd`): the rest gets what the pilot left, and a rest whose upper bound is above
that is refused before anything more is sent. A step whose pilot answers were all rejected, re-asks
included, stops the rest (`pilot_unanswered`): the same prompt and schema would pay for the same
rejections on every row. The CLI (`apply --pilot`) and the Python API (`batchor.apply(spec,
pilot=50)`) both go through `run` and `apply_after_pilot`, so both give these guarantees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from batchor import api
from batchor.engine.events import Event
from batchor.engine.run import RunOutcome
from batchor.errors import CostLimitError, PilotUnansweredError, UsageError
from batchor.pilot.auto import START, AutoBound, AutoPilot, run_auto
from batchor.pilot.run import PilotResult, run_pilot
from batchor.pilot.size import TARGET
from batchor.pilot.topup import TopUpBound
from batchor.plan.budget import plan_budget
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.summary import money
from batchor.quality import checks_after_run
from batchor.result import Result

Announce = Callable[[CompiledPlan, "TopUpBound | None", "AutoBound | None"], None]


def pilot_rows(value: int | str) -> tuple[int, bool]:
    """`50` or `"auto"` (`--pilot N|auto`): the (first) rows and whether the pilot grows by itself."""
    text = str(value).strip().lower()
    if text == "auto":
        return START, True
    if text.isdigit() and int(text) >= 1:
        return int(text), False
    raise UsageError(
        f"--pilot {value!r}: give a number of rows (1 or more) or `auto`",
        hint="e.g. --pilot 50, or --pilot auto (50 rows, grown until the whole job is within +-10%)",
    )


@dataclass
class PilotRun:
    """A pilot as asked for: its result (the last round's), and an auto pilot's rounds."""

    result: PilotResult
    auto: AutoPilot | None = None


def run(
    spec: api.SpecLike,
    pilot: int | str,
    *,
    seed: int | None = None,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    max_cost: float | None = None,
    on_event: Callable[[Event], None] | None = None,
    handle_signals: bool = True,
    announce: Announce | None = None,
    report: Callable[[str], None] | None = None,
    target: float | None = None,
) -> PilotRun:
    """Run a pilot of `pilot` rows, or `"auto"` (grown while the whole job's interval is wider
    than `target` percent, 10 by default). `announce` sees what it may cost before anything is sent."""
    if isinstance(spec, (str, Path)) and "\n" not in str(spec) and api.is_plan_file(spec):
        raise UsageError("--pilot needs a spec, not a saved plan", hint="run `batchor apply SPEC --pilot N`")
    rows, auto = pilot_rows(pilot)
    share = (target if target is not None else TARGET * 100) / 100
    options: dict[str, Any] = {
        "seed": seed,
        "state": state,
        "model": model,
        "mock": mock,
        "mode": mode,
        "max_cost": max_cost,
        "on_event": on_event,
        "handle_signals": handle_signals,
        "target": share,
    }
    if auto:
        grown = run_auto(spec, start=rows, report=report, announce=announce, **options)
        return PilotRun(grown.result, grown)

    def first(sampled: CompiledPlan, bound: TopUpBound | None) -> None:
        if announce is not None:
            announce(sampled, bound, None)

    return PilotRun(run_pilot(spec, rows, announce=first, **options))


def remaining_budget(max_cost: float | None, result: PilotResult) -> float | None:
    """The budget (the lower of `max_cost` and the spec's `limits.max_cost_usd`) covers the
    pilot and the run after it together: the rest gets what the pilot left."""
    budget, _ = plan_budget(max_cost, result.plan.header)
    return None if budget is None else max(0.0, budget - result.cost_usd)


def budget_left(max_cost: float | None, result: PilotResult) -> tuple[float, float, str] | None:
    """(left, whole budget, where it comes from) after the pilot; None without a budget."""
    budget, source = plan_budget(max_cost, result.plan.header)
    left = remaining_budget(max_cost, result)
    if budget is None or left is None or source is None:
        return None
    return left, budget, source


def rest_refused(error: CostLimitError, max_cost: float | None, result: PilotResult) -> CostLimitError:
    """The rest's refusal, saying its budget is what the pilot left of the whole one."""
    budget, source = plan_budget(max_cost, result.plan.header)
    upper, left, spent = (
        money(v)
        for v in (result.plan.header.totals.cost_upper, remaining_budget(max_cost, result) or 0.0, result.cost_usd)
    )
    whole = money(budget or 0.0)
    return CostLimitError(
        f"the rest may cost up to {upper}, above the {left} the pilot's {spent} left of {source} "
        f"{whole} (it covers the pilot and the rest together); nothing more was sent",
        hint=f"raise {source}, lower max_tokens, or add input.limit (the pilot's answers stay cached)",
        plan=error.plan,
    )


def refuse_unanswered(result: PilotResult) -> None:
    """Stop before the rest when a step's pilot answers were all rejected and re-asking did not fix
    one: the same prompt and schema would pay for rejections on every row. A step whose re-asks
    never got their turn (the pilot's allowance ran out) is not judged."""
    failed = [
        s for s in result.calibration.steps if not s.measured.answers and s.measured.first_asks and s.measured.reasks
    ]
    if not failed:
        return
    parts = [
        f"{s.step} ({s.measured.first_asks:,} first asks and {s.measured.reasks:,} re-asks, none accepted)"
        for s in failed
    ]
    raise PilotUnansweredError(
        f"the pilot got no valid answer from step(s) {'; '.join(parts)}: the rest would most likely pay for the "
        f"same rejections on every row, so it was not started (the pilot spent {money(result.cost_usd)})",
        hint="see the rejected answers and the validator's messages (`batchor export --attempts -o attempts.jsonl`), "
        "fix the prompt or the output schema, then run the pilot again",
    )


def apply_after_pilot(
    result: PilotResult,
    *,
    max_cost: float | None = None,
    approve: Callable[[CompiledPlan], None] | None = None,
    **apply_options: Any,
) -> RunOutcome:
    """Run the rest of the job the pilot calibrated, within what the pilot left of the budget:
    refused (`pilot_unanswered`) when a step got no valid answer, refused (`cost_limit`, nothing
    sent) when the rest's upper bound is above the budget left. `approve` sees the plan first
    (when it has work to run); `apply_options` go to `api.apply_compiled`."""
    refuse_unanswered(result)
    if approve is not None and result.plan.header.totals.to_run > 0:
        approve(result.plan)
    try:
        return api.apply_compiled(result.plan, max_cost=remaining_budget(max_cost, result), **apply_options)
    except CostLimitError as error:
        raise rest_refused(error, max_cost, result) from None


def apply_with_pilot(
    spec: api.SpecLike | CompiledPlan,
    data: Any,
    pilot: int | str,
    *,
    seed: int | None,
    target: float | None,
    options: dict[str, Any],
    rest: dict[str, Any],
    limited: tuple[int | None, int | None],
) -> Result:
    """`batchor.apply(spec, pilot=N|"auto")`: the pilot, then the rest under its rules (see above);
    a pilot that stopped gives its own run's result. `result.pilot` holds the pilot."""
    if isinstance(spec, CompiledPlan) or data is not None:
        raise UsageError(
            "pilot= needs a spec and its own input", hint="pass the spec (path, YAML or dict) without data"
        )
    api.check_arguments(limit=limited[0], sample=limited[1], pilot=pilot_rows(pilot)[0])
    ran = run(
        spec,
        pilot,
        seed=seed,
        target=target,
        on_event=rest["on_event"],
        handle_signals=rest["handle_signals"],
        **options,
    )
    piloted = ran.result
    if piloted.stopped:
        result = api.to_result(piloted.last_outcome, piloted.pilot)
    else:
        outcome = apply_after_pilot(piloted, max_cost=options["max_cost"], state=options["state"], **rest)
        result = api.to_result(outcome, piloted.plan)
        result.checks = checks_after_run(piloted.plan, outcome.run_id, outcome.status, options["state"])
    result.pilot = piloted
    return result
