"""Plan counts of reduce steps: every group's fold tree walked against the cache.

The planner collects a reduce step's rows with what they read (plan/dependent.py); here they are
grouped and each group's requests counted by the same `GroupWalk` apply uses, so for groups whose
rows are known the calls counted are the calls made. Rows whose upstream answers do not exist yet
are projected: their group is shaped from each row's upper-bound size (its input columns plus
the longest answer of each step it reads), and the count is an estimate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from batchor.plan.dependent import FAILED, SKIPPED
from batchor.plan.model import StepPlan
from batchor.plan.reduce import Group, GroupWalk, ReduceTally, grouped, plan_reduce, reduce_templates, stored_lookup
from batchor.spec.templates import make_environment, templates_folder
from batchor.state.base import StateStore


def walker_for(step: StepPlan, base_dir: str, templates: str | None) -> GroupWalk:
    """The fold-tree walker of a reduce step from its pinned templates."""
    env = make_environment(templates_folder(Path(base_dir), templates))
    own, fold = reduce_templates(env, step, set(step.depends_on))
    return GroupWalk(step, own, fold)


def reduce_tallies(
    steps: list[StepPlan],
    collected: dict[str, list[Any]],
    state: StateStore | None,
    cache: tuple[frozenset[str], bool],
    folders: tuple[str, str | None],
) -> dict[str, ReduceTally]:
    """Counts of each reduce step from its collected (row, input values, upstream answers)."""
    by_name = {s.name: s for s in steps}
    refresh, retry_failed = cache
    out: dict[str, ReduceTally] = {}
    for step in (s for s in steps if s.kind == "reduce"):
        walker = walker_for(step, *folders)
        groups, skipped = _groups(step, collected.get(step.name, []), walker, by_name)
        fresh = step.name in refresh or "*" in refresh
        out[step.name] = plan_reduce(walker, groups, stored_lookup(state, step, fresh, retry_failed), skipped)
    return out


def _groups(
    step: StepPlan, rows: list[Any], walker: GroupWalk, by_name: dict[str, StepPlan]
) -> tuple[list[Group], int]:
    """Known rows grouped as apply groups them; a group with projected rows holds each row's
    upper-bound tokens in `items` instead."""
    assert step.reduce is not None
    known, projected, skipped = [], [], 0
    for row, values, answers in rows:
        states = list(answers.values())
        if any(a is SKIPPED or a is FAILED for a in states):
            skipped += row.weight
        elif any(a is None for a in states):
            projected.append((row, values, answers))
        else:
            known.append((row.key, values, answers))
    groups = grouped(known, step.reduce.group_by)
    for row, values, answers in projected:
        key = {name: _known_or_row(name, values, answers, row.key) for name in step.reduce.group_by}
        group = groups.setdefault(json.dumps(key, sort_keys=True, default=str), Group(key))
        group.row_keys.append(row.key)
        group.projected += row.weight
    for group in groups.values():
        if group.projected:
            group.sizes = [_upper_tokens(step, walker, item, by_name) for item in group.items]
            group.sizes += [
                _upper_tokens(step, walker, v | a, by_name) for r, v, a in projected if r.key in group.row_keys
            ]
    return list(groups.values()), skipped


def _known_or_row(name: str, values: dict[str, Any], answers: dict[str, Any], row_key: str) -> Any:
    """A projected row's group: its column's value, or (an answer not known yet) a group of its own."""
    head = name.removeprefix("row.").split(".")[0]
    return {"projected": row_key} if head in answers else values.get(name.removeprefix("row."))


def _upper_tokens(step: StepPlan, walker: GroupWalk, item: dict[str, Any], by_name: dict[str, StepPlan]) -> int:
    """A row's most tokens in a group's prompt: its known values, and each unknown answer at its longest."""
    read = set(re.findall(r"\.(\w+)", (step.system or "") + step.prompt))  # what the template may read of a row
    known = {k: v for k, v in item.items() if v is not None and k in read}
    unknown = sum(by_name[d].max_tokens for d in step.depends_on if item.get(d) is None)
    return walker.requests.counter.count(json.dumps(known, default=str)) + unknown
