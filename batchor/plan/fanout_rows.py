"""Row grains: which rows each step runs on, once SQL steps fan out.

A fan-out SQL step turns each row it reads into zero or more element rows keyed `<row_key>#<n>`,
n counting from 1 in the order the query returns them (list order for `unnest`). Steps that use
it run once per element; steps before it keep running once per input row. Its stored result per
row is the whole list of elements, so the same answers always give the same element keys, and a
regenerated list replaces the old elements instead of leaving stale ones behind. Fan-outs may
nest, along one chain, so every output row is one element of the deepest fan-out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchor.errors import SpecError
from batchor.plan.model import StepPlan
from batchor.spec.inputs import ROW_KEY

SEP = "#"


def element_key(parent: str, n: int | str) -> str:
    return f"{parent}{SEP}{n}"


def order_steps(steps: list[StepPlan]) -> list[StepPlan]:
    """Steps in dependency order (each after the steps it uses)."""
    done: set[str] = set()
    ordered: list[StepPlan] = []
    while len(ordered) < len(steps):
        for step in steps:
            if step.name not in done and set(step.depends_on) <= done:
                ordered.append(step)
                done.add(step.name)
    return ordered


def step_levels(steps: list[StepPlan]) -> list[list[StepPlan]]:
    """`steps` (in dependency order) by level: each after every step it reads of `steps`; the
    steps of a level read none of each other's answers, so their lookups go together."""
    depth: dict[str, int] = {}
    levels: list[list[StepPlan]] = []
    for step in steps:
        depth[step.name] = 1 + max((depth[d] for d in step.depends_on if d in depth), default=-1)
        levels += [[] for _ in range(depth[step.name] + 1 - len(levels))]
        levels[depth[step.name]].append(step)
    return levels


def assign_grains(steps: list[StepPlan]) -> list[StepPlan]:
    """Set each step's `grain`: the deepest fan-out among the steps it uses (None: input rows)."""
    parents: dict[str, str | None] = {}  # fan-out step -> grain of the rows it reads
    resolved: dict[str, StepPlan] = {}
    for step in order_steps(steps):
        produced = [d if resolved[d].fan_out else resolved[d].grain for d in step.depends_on]
        grain = _deepest(step.name, produced, parents)
        if step.fan_out:
            parents[step.name] = grain
        resolved[step.name] = step.model_copy(update={"grain": grain})
    _check_one_chain(parents)
    return [resolved[s.name] for s in steps]


def lineage(grain: str | None, parents: Mapping[str, str | None]) -> list[str | None]:
    """`grain` and every grain above it, up to the input rows (None)."""
    chain = [grain]
    while chain[-1] is not None:
        chain.append(parents[chain[-1]])
    return chain


def fanouts_above(grain: str | None, parents: Mapping[str, str | None]) -> list[str]:
    """The fan-out steps from the input rows down to `grain`, top down (none at the input grain)."""
    return [g for g in reversed(lineage(grain, parents)) if g is not None]


def fanout_parents(steps: list[StepPlan]) -> dict[str, str | None]:
    return {s.name: s.grain for s in steps if s.fan_out}


def _deepest(name: str, grains: list[str | None], parents: dict[str, str | None]) -> str | None:
    if not grains:
        return None
    deepest = max(grains, key=lambda g: len(lineage(g, parents)))
    chain = lineage(deepest, parents)
    for grain in grains:
        if grain not in chain:
            raise SpecError(
                f"steps.{name} uses the elements of two separate fan-outs ({grain}, {deepest})",
                hint="fan out one from the other's elements, or use them in separate steps",
            )
    return deepest


def _check_one_chain(parents: dict[str, str | None]) -> None:
    """One output row per element needs a single chain of fan-outs (each from the one before)."""
    if not parents:
        return
    deepest = max(parents, key=lambda g: len(lineage(g, parents)))
    chain = lineage(deepest, parents)
    for step in parents:
        if step not in chain:
            raise SpecError(
                f"steps {step} and {deepest} both fan out; a spec can fan out along one chain only",
                hint=f"fan out {step} from the elements of the other, or use a second spec",
            )


@dataclass(slots=True)
class Row:
    """One row at some grain: its key, its input row, and its lineage."""

    key: str
    index: int  # position of its input row in the batch being processed
    keys: dict[str | None, str]  # its key at each grain of its lineage (None: the input row)
    elements: dict[str, Any] = field(default_factory=dict)  # fan-out step -> this row's element
    weight: int = 1  # plan time: rows it stands for (a projected fan-out counts at its bound)
    expected: float = 1.0  # plan time: rows it is expected to stand for
    unbounded: bool = False  # plan time: below a projected fan-out without a bound


def input_rows(keys: list[str]) -> list[Row]:
    return [Row(key, i, {None: key}) for i, key in enumerate(keys)]


def children(row: Row, step: str, items: list[Any]) -> list[Row]:
    """The element rows of `row` for fan-out `step`, given the elements it returned."""
    out = []
    for n, item in enumerate(items, 1):
        key = element_key(row.key, n)
        out.append(
            Row(
                key,
                row.index,
                {**row.keys, step: key},
                {**row.elements, step: item},
                row.weight,
                row.expected,
                row.unbounded,
            )
        )
    return out


def upstream(
    step: StepPlan, row: Row, answers: Mapping[str, Mapping[str, Any]], plans: Mapping[str, StepPlan]
) -> dict[str, Any]:
    """What `step` sees of each step it uses for `row`: the answer at that step's grain, or for a
    fan-out step, the row's element (None where unknown)."""
    values = {}
    for dep in step.depends_on:
        plan = plans[dep]
        if plan.fan_out:
            values[dep] = row.elements.get(dep)
        else:
            key = row.keys.get(plan.grain)
            values[dep] = answers[dep].get(key) if key is not None else None
    if step.gather:
        values["gather"] = {dep: neighbours(row.key, window, answers[dep]) for dep, window in step.gather.items()}
    return values


def neighbours(key: str, window: tuple[int, int], answers: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The answers of the sibling elements before (nearest last) and after (nearest first) element
    `key`; a sibling with no entry in `answers` (none, or no answer) is left out."""
    parent, _, n = key.rpartition(SEP)
    if not n.isdigit():  # a projected element row: its siblings are not known
        return {"before": [], "after": []}
    at = int(n)
    before = [element_key(parent, i) for i in range(max(1, at - window[0]), at)]
    after = [element_key(parent, i) for i in range(at + 1, at + 1 + window[1])]
    return {side: [answers[k] for k in keys if k in answers] for side, keys in (("before", before), ("after", after))}


def rows_table(inputs: pa.Table, rows: list[Row]) -> pa.Table:
    """The input columns of `rows` (repeated for elements of one input row), keyed by row key."""
    table = inputs.take(pa.array([r.index for r in rows], pa.int64()))
    at = table.schema.get_field_index(ROW_KEY)
    return table.set_column(at, ROW_KEY, pa.array([r.key for r in rows], pa.string()))
