"""Quality gates over stored answers: `checks:`, golden labels (`expected:`) and `diff`.

Nothing here calls a provider: every figure is computed by DuckDB from the answers already in the
state, so `batchor check` and `batchor diff` are free and can run in CI on every pull request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchor.quality.checks import CheckOutcome, CheckReport, check_source, evaluate, has_quality
from batchor.quality.compare import DiffReport, diff_sources
from batchor.quality.sources import Source, resolve_source

Target = str | Path | None


def check(target: Target = None, *, state: str | None = None) -> CheckReport:
    """Run the checks and golden-label metrics of a run (default: the latest), a saved plan or a
    spec (its latest run; the spec's current checks) over the stored answers. No calls are made."""
    return check_source(resolve_source(target, state))


def diff(
    a: Target, b: Target, *, state: str | None = None, state_b: str | None = None, examples: int = 5
) -> DiffReport:
    """Compare two runs, saved plans or specs (a spec: its latest run) row by row, step by step."""
    return diff_sources(resolve_source(a, state), resolve_source(b, state_b or state), examples)


def check_plan(plan: Any) -> None:
    """Fail before any call when the plan's checks or golden labels do not fit its data."""
    from batchor.quality.checks import preflight
    from batchor.quality.sources import plan_spec

    preflight(plan, plan_spec(plan))


def bind_spec_checks(loaded: Any, inputs: Any, steps: Any) -> None:
    """`validate`: every check and golden label of a loaded spec bound against an empty answers
    table typed from the input's columns and the resolved steps; each problem at its `file:line`."""
    from batchor.quality.checks import bind_checks

    bind_checks(loaded.spec, inputs, steps, loaded.where)


def checks_after_run(plan: Any, run_id: str, status: str, state: str | None = None) -> CheckReport | None:
    """The plan's own checks over what its run stored; None when the spec has none or the run
    stopped before its rows were settled (interrupted, out of budget, paused, in flight)."""
    from batchor.quality.sources import plan_spec
    from batchor.state import open_state, state_location

    spec = plan_spec(plan)
    if status not in ("succeeded", "partial", "failed") or not has_quality(spec):
        return None
    store = open_state(state_location(state, plan.header.state_location))
    return evaluate(plan, store, spec, plan.header.spec_source, run_id)


__all__ = [
    "CheckOutcome",
    "CheckReport",
    "DiffReport",
    "Source",
    "bind_spec_checks",
    "check",
    "check_plan",
    "checks_after_run",
    "diff",
]
