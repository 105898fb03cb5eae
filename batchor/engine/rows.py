"""Apply-time rows of a job at any grain, and what a step sees of earlier answers for each row.

Steps before a fan-out run on the plan's input rows; steps after it run on its element rows,
which come from the fan-out step's stored result per row (the list of its elements, see
plan/fanout_rows.py). Answers are read from the state once per step and looked up by row key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from batchor.plan.fanout_rows import Row, children, fanout_parents, fanouts_above, input_rows, upstream
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.spec.inputs import ROW_KEY
from batchor.spec.templates import StepTemplates
from batchor.state.base import StateStore


def stored_answers(store: StateStore, plan: CompiledPlan, step: str) -> dict[str, Any]:
    """A step's succeeded answers by row key (parsed JSON for structured steps and SQL steps)."""
    table = store.job_results(plan.job_id, step)
    structured = plan.header.step(step).json_answers
    answers: dict[str, Any] = {}
    for row_key, status, output in zip(
        table.column("row_key").to_pylist(), table.column("status").to_pylist(), table.column("output").to_pylist()
    ):
        if status == "succeeded":
            answers[row_key] = json.loads(output) if structured else output
    return answers


class JobRows:
    """The rows of one job at a step's grain, with their upstream answers from the state."""

    def __init__(self, plan: CompiledPlan, store: StateStore) -> None:
        self.plan, self.store = plan, store
        self.plans = {s.name: s for s in plan.header.steps}
        self.answers: dict[str, dict[str, Any]] = {}

    def load(self, steps: list[str]) -> None:
        for step in steps:
            if step not in self.answers:
                self.answers[step] = stored_answers(self.store, self.plan, step)

    def batches(self, grain: str | None) -> Iterator[tuple[pa.Table, list[Row]]]:
        """Plan rows batch by batch: their input columns, and the rows at `grain` under them."""
        fanouts = fanouts_above(grain, fanout_parents(self.plan.header.steps))
        self.load(fanouts)
        columns = [c for c in self.plan.data_columns() if not c.startswith("__req.")]
        for batch in self.plan.iter_batches(columns):
            inputs = pa.Table.from_batches([batch])
            rows = input_rows(inputs.column(ROW_KEY).to_pylist())
            for fan in fanouts:
                lists = self.answers[fan]
                rows = [child for row in rows for child in children(row, fan, lists.get(row.key) or [])]
            yield inputs, rows

    def skipped(self, step: str) -> set[str]:
        """Rows (at the step's grain) the step sends no request for: its `when:` was false, or an
        input of it had no answer."""
        table = self.store.job_results(self.plan.job_id, step)
        keys = table.column("request_key").to_pylist()
        return {row for row, key in zip(table.column("row_key").to_pylist(), keys) if key is None}

    def answered_rows(self, step: StepPlan) -> tuple[list[tuple[str, dict[str, Any], dict[str, Any]]], list[str]]:
        """(row key, input values, upstream answers) of the rows whose earlier steps all answered,
        and the keys of the rest: what a step over many rows at once (reduce, resolve) reads."""
        ready: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        waiting: list[str] = []
        for inputs, rows in self.batches(step.grain):
            values = input_values(inputs)
            for row in rows:
                answers = self.upstream(step, row)
                if any(a is None for a in answers.values()):
                    waiting.append(row.key)
                else:
                    ready.append((row.key, values[row.index], answers))
        return ready, waiting

    def upstream(self, step: StepPlan, row: Row) -> dict[str, Any]:
        """What `step` sees of each step it uses for `row` (None: no succeeded answer)."""
        self.load([d for d in step.depends_on if not self.plans[d].fan_out])
        return upstream(step, row, self.answers, self.plans)


def input_values(inputs: pa.Table) -> list[dict[str, Any]]:
    """The template's `row`: each input row's columns without the row key."""
    return [{k: v for k, v in r.items() if k != ROW_KEY} for r in inputs.to_pylist()]


def needed_values(values: list[dict[str, Any]], tpl: StepTemplates) -> list[dict[str, Any]]:
    """Only the input columns the template reads: follower rows wait in memory."""
    if tpl.dynamic_row_access:
        return values
    return [{k: v for k, v in row.items() if k in tpl.row_columns} for row in values]
