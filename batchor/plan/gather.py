"""Gathering neighbours' answers: a step below a split (or any fan-out) that reads the answers an
earlier step gave the neighbouring elements of its row (`gather: {notes: {before: 1, after: 1}}`).

The neighbours are the sibling element rows `<parent>#<n - k>` ... `<parent>#<n + k>` (plan/
fanout_rows.py looks them up for the plan and the engine alike); this module checks the spec's
side: the gathered steps exist, come earlier, and run at the step's own fan-out grain.
"""

from __future__ import annotations

from batchor.errors import SpecError
from batchor.plan.model import StepPlan
from batchor.spec.model import LLMStep, ReduceStep

TEMPLATE_NAME = "gather"  # what templates read: gather.<step>.before / .after


def gather_names(step: LLMStep) -> set[str]:
    """The extra name the step's templates may read."""
    return {TEMPLATE_NAME} if step.gather else set()


def gathered_steps(name: str, step: LLMStep, names: set[str]) -> dict[str, tuple[int, int]]:
    """The step's `gather:` as step -> (before, after), checked against the job's steps."""
    if not step.gather:
        return {}
    if isinstance(step, ReduceStep):
        raise SpecError(
            f"steps.{name}.gather: a reduce step sees every row of its group already",
            hint="remove `gather:` (its prompt reads `group.rows`)",
        )
    if TEMPLATE_NAME in names:
        raise SpecError(
            f"steps.{name}.gather: a step is named '{TEMPLATE_NAME}', so templates cannot tell it from the neighbours",
            hint=f"rename the step '{TEMPLATE_NAME}'",
        )
    for other, window in step.gather.items():
        if other not in names or other == name:
            raise SpecError(
                f"steps.{name}.gather.{other}: no earlier step '{other}'",
                hint=f"gather the answers of one of: {', '.join(sorted(names - {name}))}",
            )
        if window.before == window.after == 0:
            raise SpecError(
                f"steps.{name}.gather.{other}: gathers no neighbour", hint="set `before:` or `after:` above 0"
            )
    return {other: (w.before, w.after) for other, w in sorted(step.gather.items())}


def check_gather(plans: list[StepPlan]) -> list[StepPlan]:
    """Each gathered step answers the step's own element rows (the elements of one fan-out)."""
    by_name = {p.name: p for p in plans}
    for plan in plans:
        for other in plan.gather:
            grain = by_name[other].grain
            if plan.grain is None or grain != plan.grain or by_name[other].fan_out:
                raise SpecError(
                    f"steps.{plan.name}.gather.{other}: neighbours are elements of a split or fan-out, and "
                    f"'{other}' must answer the same elements as '{plan.name}' "
                    f"({_grain(grain)} against {_grain(plan.grain)})",
                    hint="gather a step that runs once per chunk, from a step that runs once per chunk",
                )
    return plans


def _grain(grain: str | None) -> str:
    return "input rows" if grain is None else f"elements of '{grain}'"
