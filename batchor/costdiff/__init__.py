"""Cost diffs: what the FULL job costs at a base (a saved plan, a git revision) and now, per step.

A plan prices the work still pending, so a pull request that switches a step to a model five times
dearer shows "56 to run" and hides that every future run now costs 5x. `plan --compare-to BASE`
compiles the spec at BASE and as it is now against the same data and the same state, both as if
nothing were cached (`no_cache`: every row priced), and says per step what each costs, by how much
it changed and why (model, template, params, schema, mode, when, rows). `fail_on_increase` turns an
increase above a percentage into `CostIncreaseError` (its own exit code), for CI.

The face: `cost_diff(spec, base, ...) -> CostDiff`; `CostDiff.gate(pct)`; text and markdown in
render.py. The base's spec is read in base.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchor import api
from batchor.costdiff.base import Base, resolve_base
from batchor.errors import CostIncreaseError, UsageError
from batchor.plan.changes import step_differences
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan


@dataclass(frozen=True)
class StepCost:
    """One step's full-job cost at the base and now (None: the step is not there)."""

    step: str
    base: float | None
    head: float | None
    base_model: str | None
    head_model: str | None
    base_requests: int
    head_requests: int
    causes: tuple[str, ...]

    @property
    def change(self) -> float:
        return (self.head or 0.0) - (self.base or 0.0)

    @property
    def percent(self) -> float | None:
        """The change relative to the base's cost (None: nothing to compare with)."""
        return percent(self.base or 0.0, self.head or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "base_usd": self.base,
            "head_usd": self.head,
            "change_usd": self.change,
            "change_pct": self.percent,
            "base_model": self.base_model,
            "head_model": self.head_model,
            "base_requests": self.base_requests,
            "head_requests": self.head_requests,
            "causes": list(self.causes),
        }


@dataclass
class CostDiff:
    """The full job's cost at the base and now, per LLM step and in total."""

    spec: str
    base: str  # how the base was named (a revision or a plan file)
    base_kind: str  # git | plan
    rows: tuple[int, int]  # input rows at the base and now
    steps: list[StepCost] = field(default_factory=list)

    @property
    def base_total(self) -> float:
        return sum(s.base or 0.0 for s in self.steps)

    @property
    def head_total(self) -> float:
        return sum(s.head or 0.0 for s in self.steps)

    @property
    def percent(self) -> float | None:
        return percent(self.base_total, self.head_total)

    def increased_over(self, pct: float) -> bool:
        """Whether the total grew by more than `pct` % (from nothing to something: always)."""
        if self.head_total <= self.base_total:
            return False
        return self.percent is None or self.percent > pct

    def gate(self, pct: float | None) -> None:
        """Raise `CostIncreaseError` when the total grew by more than `pct` % (None: no gate)."""
        if pct is None or not self.increased_over(pct):
            return
        shown = "from nothing" if self.percent is None else f"+{self.percent:.1f} %"
        raise CostIncreaseError(
            f"{self.spec}: the full job's expected cost rose {shown} against {self.base} "
            f"(${self.base_total:.4f} -> ${self.head_total:.4f}), over --fail-on-increase {pct:g} %",
            hint="see the cost diff above for the step and the cause; raise --fail-on-increase if it is intended",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "base": self.base,
            "base_kind": self.base_kind,
            "rows_base": self.rows[0],
            "rows_head": self.rows[1],
            "base_usd": self.base_total,
            "head_usd": self.head_total,
            "change_usd": self.head_total - self.base_total,
            "change_pct": self.percent,
            "steps": [s.to_dict() for s in self.steps],
        }

    def __str__(self) -> str:
        from batchor.costdiff.render import cost_diff_text

        return cost_diff_text(self)


def percent(base: float, head: float) -> float | None:
    if base > 0:
        return (head - base) / base * 100.0
    return 0.0 if head == base else None


def cost_diff(
    spec: str | Path,
    base: str | Path,
    *,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    mode: str | None = None,
    fail_on_increase: float | None = None,
) -> CostDiff:
    """The full job's cost at `base` (a saved plan file or a git revision of `spec`) and now, both
    compiled against today's data and state as if nothing were cached. `fail_on_increase`: raise
    `CostIncreaseError` when the total grew by more than that percentage."""
    if fail_on_increase is not None and fail_on_increase < 0:
        raise UsageError(f"--fail-on-increase {fail_on_increase:g}: give a percentage of 0 or more")
    options: dict[str, Any] = {"state": state, "model": model, "mock": mock, "mode": mode}
    head = api.plan(Path(spec), no_cache=True, save=False, **options)
    found = resolve_base(base, Path(spec))
    before = _base_plan(found, options)
    diff = CostDiff(
        str(spec),
        found.label,
        found.kind,
        (before.header.totals.rows if before is not None else 0, head.header.totals.rows),
        step_costs(before, head),
    )
    diff.gate(fail_on_increase)
    return diff


def _base_plan(base: Base, options: dict[str, Any]) -> CompiledPlan | None:
    if base.text is None:
        return None
    return api.plan(base.text, base_dir=base.base_dir, no_cache=True, save=False, **options)


def step_costs(base: CompiledPlan | None, head: CompiledPlan) -> list[StepCost]:
    """Each LLM step of either side (the head's order, then steps only the base had)."""
    before = {s.name: s for s in _llm_steps(base)}
    now = {s.name: s for s in _llm_steps(head)}
    names = [*now, *(name for name in before if name not in now)]
    return [_step_cost(name, before.get(name), now.get(name)) for name in names]


def _llm_steps(plan: CompiledPlan | None) -> list[StepPlan]:
    return [] if plan is None else [s for s in plan.header.steps if not s.local]


def _step_cost(name: str, base: StepPlan | None, head: StepPlan | None) -> StepCost:
    return StepCost(
        name,
        base.counts.cost_expected if base is not None else None,
        head.counts.cost_expected if head is not None else None,
        _model(base),
        _model(head),
        base.counts.to_run if base is not None else 0,
        head.counts.to_run if head is not None else 0,
        tuple(causes(base, head)),
    )


def _model(step: StepPlan | None) -> str | None:
    return None if step is None else f"{step.provider}:{step.model}"


def causes(base: StepPlan | None, head: StepPlan | None) -> list[str]:
    """Why a step's full-job cost moved: it is new or gone, or what of its definition differs
    (model, template, params, schema, then mode, `when:`), or how many requests it makes."""
    if base is None or head is None:
        return ["added" if base is None else "removed"]
    found = step_differences(head, base)
    found += [
        cause for cause, attr in (("mode", "mode"), ("when", "when")) if getattr(head, attr) != getattr(base, attr)
    ]
    if head.counts.to_run != base.counts.to_run:
        found.append("rows")
    return found


__all__ = ["CostDiff", "StepCost", "cost_diff", "step_costs"]
