"""Cascades (spec `escalate:`): a step's answer decides, row by row, whether a stronger model is
asked again; the row keeps one answer, the stronger model's where it was asked (engine/fallback.py).
"""

from __future__ import annotations

from typing import Any

import jinja2
from jinja2 import meta

from batchor.errors import TemplateError
from batchor.plan.model import StepPlan
from batchor.spec.templates import make_environment


def with_escalation(step: StepPlan, when: str, stronger: StepPlan) -> StepPlan:
    """`step` with its stronger model and the condition over its own answer, checked now."""
    condition(step.name, when)
    return step.model_copy(update={"escalation": stronger, "escalate_when": when})


def condition(step: str, when: str) -> jinja2.Template:
    """The compiled `escalate.when`; it may read only the step's own answer (by the step's name)."""
    env = make_environment()
    source = "{{ " + when + " }}"
    where = f"steps.{step}.escalate.when"
    try:
        names = meta.find_undeclared_variables(env.parse(source))
        template = env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"{where}: template syntax error: {exc.message}", hint=f"e.g. `{step}.confidence < 0.7`"
        ) from None
    others = sorted(names - {step})
    if others:
        raise TemplateError(
            f"{where}: reads {', '.join(others)}; the condition reads only the step's own answer, as `{step}`",
            hint=f"e.g. `{step}.confidence < 0.7`",
        )
    return template


def escalates(template: jinja2.Template, step: str, answer: Any) -> bool:
    """Whether the answer meets the condition (false, 0, empty and none are false)."""
    return template.render({step: answer}).strip().lower() not in ("false", "0", "", "none", "no")
