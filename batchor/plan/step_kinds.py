"""Reduce steps at plan time: what they depend on and how they are pinned in the plan.

A reduce step is an LLM step whose requests are per group (plan/reduce.py); everything that
prices and sends an LLM step's requests applies to it, so it is resolved like one, then marked.
"""

from __future__ import annotations

import re
from typing import Any

from batchor.errors import SpecError
from batchor.plan.model import ReducePlan, StepPlan
from batchor.spec.model import ReduceStep


def reduce_deps(name: str, step: Any, names: set[str]) -> set[str]:
    """Steps a reduce step reads: those its `group_by` names and those its templates mention
    (`group.rows` items carry every earlier answer, so `r.triage.category` reads `triage`)."""
    if not isinstance(step, ReduceStep):
        return set()
    _check_reduce(name, step)
    text = " ".join(filter(None, [step.system, step.prompt, step.reduce.fold_prompt]))
    mentioned = {other for other in names - {name} if re.search(rf"\b{re.escape(other)}\b", text)}
    grouped = {entry.split(".")[0] for entry in step.reduce.group_by if entry.split(".")[0] in names - {name}}
    return mentioned | grouped


def _check_reduce(name: str, step: ReduceStep) -> None:
    for key, value in (("when", step.when), ("attachments", step.attachments)):
        if value:
            raise SpecError(
                f"steps.{name}.{key}: a reduce step takes no `{key}:`",
                hint="filter or prepare the rows in an earlier step (a SQL step with WHERE), then reduce them",
            )


def as_reduce(plan: StepPlan, step: Any) -> StepPlan:
    """An LLM step's plan marked as a reduce step (others unchanged)."""
    if not isinstance(step, ReduceStep):
        return plan
    settings = ReducePlan(
        group_by=list(step.reduce.group_by), keep=step.reduce.keep, fold_prompt=step.reduce.fold_prompt
    )
    return plan.model_copy(update={"kind": "reduce", "reduce": settings})
