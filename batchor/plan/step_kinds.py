"""Reduce and resolve steps at plan time: what they depend on and how they are pinned in the plan.

A reduce step is an LLM step whose requests are per group (plan/reduce.py), a resolve step one
whose requests are per candidate pair and per cluster (plan/resolve_walk.py); everything that
prices and sends an LLM step's requests applies to them, so they are resolved like one, then marked.
"""

from __future__ import annotations

import re
from typing import Any

from batchor.errors import ResolveError, SpecError
from batchor.fingerprint import canonical_json
from batchor.plan.model import ReducePlan, ResolvePlan, StepPlan
from batchor.providers.schema_adapt import adapt_schema
from batchor.spec.model import ReduceStep, ResolveStep


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


ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"cluster": {"type": "string"}, "canonical": {"type": ["string", "null"]}},
    "required": ["cluster", "canonical"],
}  # what a resolve step answers per row
CANONICAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"canonical": {"type": "string"}},
    "required": ["canonical"],
    "additionalProperties": False,
}  # what a canonical prompt answers per cluster


def resolve_deps(name: str, step: Any, names: set[str]) -> set[str]:
    """Steps a resolve step reads: its `value`'s step, the embed step it compares and those its
    prompts mention (`pair.a.company.name` reads `company`)."""
    if not isinstance(step, ResolveStep):
        return set()
    _check_resolve(name, step, names)
    canonical = step.resolve.canonical
    text = " ".join(filter(None, [step.system, step.prompt, getattr(canonical, "prompt", None)]))
    mentioned = {other for other in names - {name} if re.search(rf"\b{re.escape(other)}\b", text)}
    similar = step.resolve.block.similar
    read = {step.resolve.value.removeprefix("row.").split(".")[0]} | ({similar.step} if similar else set())
    return mentioned | (read & (names - {name}))


def _check_resolve(name: str, step: ResolveStep, names: set[str]) -> None:
    for key, value in (("when", step.when), ("attachments", step.attachments)):
        if value:
            raise SpecError(
                f"steps.{name}.{key}: a resolve step takes no `{key}:`",
                hint="filter or prepare the rows in an earlier step (a SQL step with WHERE), then resolve them",
            )
    similar = step.resolve.block.similar
    if similar is not None and similar.step not in names - {name}:
        raise SpecError(
            f"steps.{name}.resolve.block.similar.step: no step '{similar.step}'",
            hint="name the embed step whose vectors are compared",
        )
    if f"{name}_canonical" in names:
        raise SpecError(f"steps.{name}_canonical: the name is taken by resolve step '{name}''s canonical requests")


def as_resolve(plan: StepPlan, step: Any) -> StepPlan:
    """An LLM step's plan (its schema the judge's) marked as a resolve step (others unchanged)."""
    if not isinstance(step, ResolveStep):
        return plan
    spec = step.resolve
    judge = plan.schema_ or {}
    if judge.get("properties", {}).get("same", {}).get("type") != "boolean":
        raise ResolveError(
            f"steps.{plan.name}: a resolve step must answer with a schema holding a boolean `same`",
            hint="give the step `output: {schema: {type: object, properties: {same: {type: boolean}}, "
            "required: [same]}}`",
        )
    canonical = spec.canonical if isinstance(spec.canonical, str) else "prompt"
    adapted = adapt_schema(CANONICAL_SCHEMA, plan.provider)
    similar = spec.block.similar
    settings = ResolvePlan(
        value=spec.value,
        block_key=spec.block.key,
        block_on=spec.block.on,
        similar=(similar.step, similar.threshold, similar.top_k) if similar else None,
        max_pairs=spec.block.max_pairs,
        canonical=canonical,
        canonical_prompt=getattr(spec.canonical, "prompt", None),
        canonical_system=getattr(spec.canonical, "system", None),
        judge_schema=judge,
        judge_sent_schema=plan.sent_schema,
        canonical_sent_schema=adapted.schema,
        canonical_strict=adapted.strict,
    )
    return plan.model_copy(update={"kind": "resolve", "resolve": settings, "schema_": ROW_SCHEMA, "sent_schema": None})


def judge_plan(step: StepPlan) -> StepPlan:
    """The plan a resolve step's pair requests are built, sent and validated with."""
    assert step.resolve is not None
    return step.model_copy(
        update={"schema_": step.resolve.judge_schema, "sent_schema": step.resolve.judge_sent_schema, "kind": "llm"}
    )


def canonical_plan(step: StepPlan) -> StepPlan:
    """The plan a resolve step's canonical requests (one per cluster) are built, sent and validated with."""
    assert step.resolve is not None and step.resolve.canonical_prompt is not None
    sent = step.resolve.canonical_sent_schema
    return step.model_copy(
        update={
            "name": f"{step.name}_canonical",
            "system": step.resolve.canonical_system,
            "prompt": step.resolve.canonical_prompt,
            "schema_": CANONICAL_SCHEMA,
            "sent_schema": sent,
            "strict": step.resolve.canonical_strict,
            "kind": "llm",
            "prompt_cache": None,
            "key_prefix": f"{step.key_prefix}\x1fcanonical\x1f{canonical_json(sent)}",
        }
    )
