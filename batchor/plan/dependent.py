"""Planning steps that use earlier steps' answers (pipelines).

Their requests only exist once the upstream answers do. Where those answers are already in the
state, the request is rendered now and checked against the cache like any other, so re-planning
an unchanged pipeline shows nothing to run. Where they are not, the rows are projected: counted
as to run (the upper bound) with a token estimate from a sample render, and the expected cost is
scaled by the `when` selectivity seen on rows that could be evaluated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchor.fingerprint import canonical_json, request_key_from_json
from batchor.outputs.sample_values import sample_value
from batchor.plan.model import StepPlan, req_column
from batchor.plan.sql_step import evaluate
from batchor.plan.tokens import get_counter
from batchor.spec.inputs import ROW_KEY
from batchor.spec.templates import StepTemplates, render_error


@dataclass
class DependentTally:
    rows: int = 0
    skipped: int = 0
    cached: int = 0
    to_run: int = 0  # requests rendered now (upstream answers known), unique
    input_tokens: int = 0
    projected: int = 0  # rows whose upstream answers do not exist yet
    evaluated: int = 0  # rows where `when` could be evaluated
    projected_tokens_per_row: int = 200
    run_keys: set[str] = field(default_factory=set)

    @property
    def selectivity(self) -> float:
        """Share of evaluated rows that ran (1.0 when nothing could be evaluated)."""
        return 1.0 if not self.evaluated else (self.evaluated - self.skipped) / self.evaluated


def order_steps(steps: list[StepPlan]) -> list[StepPlan]:
    done: set[str] = set()
    ordered: list[StepPlan] = []
    while len(ordered) < len(steps):
        for step in steps:
            if step.name not in done and set(step.depends_on) <= done:
                ordered.append(step)
                done.add(step.name)
    return ordered


class _Skipped:
    """Marks a row a step will never answer (skipped by `when` or left out by a SQL step)."""

    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = _Skipped()


def dependent_tallies(data_path: Path, steps: list[StepPlan], templates: dict[str, StepTemplates],
                      state: Any, refresh: frozenset[str], base_dir: str = ".") -> dict[str, DependentTally]:
    """Counts for every step that depends on another (or is SQL), from the plan data and the cache."""
    dependents = [s for s in order_steps(steps) if s.depends_on or s.provider == "sql"]
    if not dependents:
        return {}
    by_name = {s.name: s for s in steps}
    tallies = {s.name: DependentTally() for s in dependents}
    roots = [s for s in steps if not s.depends_on]
    for batch in pq.ParquetFile(data_path).iter_batches(batch_size=20000):
        table = pa.Table.from_batches([batch])
        answers = {s.name: _cached_answers(state, s, table.column(req_column(s.name, "key")).to_pylist(), refresh)
                   for s in roots}
        row_table = table.select([c for c in table.column_names if not c.startswith("__req.")])
        rows = row_table.to_pylist()
        for step in dependents:
            if step.provider == "sql":
                answers[step.name] = _plan_sql(step, row_table, answers, by_name, base_dir, tallies[step.name])
                continue
            answers[step.name] = _plan_rows(step, templates[step.name], rows, answers, by_name, state, refresh,
                                            tallies[step.name])
    return tallies


def _cached_answers(state: Any, step: StepPlan, keys: list[str | None], refresh: frozenset[str]) -> list[Any]:
    """Per row: the parsed cached answer, or None when there is none (yet)."""
    if state is None or step.name in refresh or "*" in refresh:
        return [None if k is not None else SKIPPED for k in keys]
    present = [k for k in keys if k is not None]
    found = state.results_for_keys(pa.array(present, pa.string())) if present else None
    outputs: dict[str, Any] = {}
    if found is not None:
        for key, status, output in zip(found.column("request_key").to_pylist(), found.column("status").to_pylist(),
                                       found.column("output").to_pylist()):
            if status == "succeeded":
                outputs[key] = json.loads(output) if step.schema is not None else output
    return [outputs.get(k) if k is not None else SKIPPED for k in keys]


PROJECTED = object()  # a row whose request cannot be rendered yet


def _plan_sql(step: StepPlan, rows: pa.Table, answers: dict[str, list[Any]], by_name: dict[str, StepPlan],
              base_dir: str, tally: DependentTally) -> list[Any]:
    """Evaluate a SQL step on the rows whose upstream answers are known; it costs nothing."""
    n = rows.num_rows
    tally.rows += n
    states = [_row_state([answers[d][i] for d in step.depends_on]) for i in range(n)]
    known = {d: [a if states[i] == "known" else None for i, a in enumerate(answers[d])] for d in step.depends_on}
    outputs = evaluate(step, rows, known, by_name, base_dir) if "known" in states else {}
    result: list[Any] = []
    for row_key, state in zip(rows.column(ROW_KEY).to_pylist(), states):
        if state == "projected":
            tally.projected += 1
            result.append(None)
        elif state == "known" and row_key in outputs:
            tally.cached += 1
            result.append(json.loads(outputs[row_key]))
        else:
            tally.skipped += 1
            result.append(SKIPPED)
    return result


def _row_state(upstream: list[Any]) -> str:
    if any(v is SKIPPED for v in upstream):
        return "skipped"
    return "projected" if any(v is None for v in upstream) else "known"


def _plan_rows(step: StepPlan, tpl: StepTemplates, rows: list[dict], answers: dict[str, list[Any]],
               by_name: dict[str, StepPlan], state: Any, refresh: frozenset[str], tally: DependentTally) -> list[Any]:
    keys: list[str | None] = []
    messages_known: list[list[dict]] = []
    for i, row in enumerate(rows):
        tally.rows += 1
        upstream = {dep: answers[dep][i] for dep in step.depends_on}
        if any(v is SKIPPED for v in upstream.values()):
            tally.skipped += 1
            keys.append(None)
            continue
        if any(v is None for v in upstream.values()):
            tally.projected += 1
            keys.append(PROJECTED)
            continue
        context = {"row": {k: v for k, v in row.items() if k != ROW_KEY}, **upstream}
        try:
            tally.evaluated += 1
            if not tpl.should_run(context):
                tally.skipped += 1
                keys.append(None)
                continue
            messages = tpl.render_messages(context)
        except Exception as exc:  # noqa: BLE001
            raise render_error(step.name, exc, str(row.get(ROW_KEY))) from None
        keys.append(request_key_from_json(step.key_prefix, canonical_json(messages)))
        messages_known.append(messages)
    counts = iter(get_counter(step.provider, step.model).count_messages_batch(messages_known))
    real = [k if isinstance(k, str) else None for k in keys]
    cached = _cached_answers(state, step, real, refresh)
    cached = [None if k is PROJECTED else c for k, c in zip(keys, cached)]
    for key, answer in zip(real, cached):
        if key is None:
            continue
        tokens = next(counts)
        if answer is not None:
            tally.cached += 1
        elif key not in tally.run_keys:
            tally.run_keys.add(key)
            tally.to_run += 1
            tally.input_tokens += tokens
    return cached


def projected_tokens(step: StepPlan, tpl: StepTemplates, sample_row: dict[str, Any],
                     by_name: dict[str, StepPlan]) -> int:
    """Input tokens of one request rendered with sample upstream answers (for projections)."""
    context: dict[str, Any] = {"row": {k: v for k, v in sample_row.items() if k != ROW_KEY}}
    for dep in step.depends_on:
        upstream = by_name[dep]
        if upstream.schema is not None:
            context[dep] = sample_value(upstream.schema, "projection")
        else:
            context[dep] = "x " * upstream.expected_output_tokens
    try:
        messages = tpl.render_messages(context)
    except Exception:  # noqa: BLE001 - a projection only; the real render reports errors
        return 200
    return get_counter(step.provider, step.model).count_messages(messages)


def first_row(data_path: Path) -> dict[str, Any]:
    for batch in pq.ParquetFile(data_path).iter_batches(batch_size=1):
        table = pa.Table.from_batches([batch])
        return table.select([c for c in table.column_names if not c.startswith("__req.")]).to_pylist()[0]
    return {}
