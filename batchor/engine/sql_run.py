"""Apply-time SQL steps: evaluate the query over all rows once upstream answers are stored,
and store its per-row results like answers so output, status and later steps read them.

A SQL step is a barrier: it sees every row at once (joins, aggregates). A fan-out step stores
per row the list of its elements; the element rows later steps run on are derived from it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from batchor.engine.rows import JobRows
from batchor.plan.fanout_rows import Row, rows_table
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.sql_step import SKIPPED, evaluate, result_key
from batchor.state.base import RESULT_SCHEMA, StateStore


def run_sql_step(plan: CompiledPlan, step: StepPlan, store: StateStore, run_id: str) -> tuple[int, int]:
    """Returns (rows answered, rows left out)."""
    rows_of = JobRows(plan, store)
    tables, row_keys = [], []
    upstream: dict[str, list[Any]] = {dep: [] for dep in step.depends_on}
    skipped = {dep: rows_of.skipped(dep) for dep in step.depends_on if rows_of.plans[dep].when}
    for inputs, rows in rows_of.batches(step.grain):
        tables.append(rows_table(inputs, rows))
        for row in rows:
            row_keys.append(row.key)
            for dep, value in rows_of.upstream(step, row).items():
                upstream[dep].append(SKIPPED if value is None and _skipped(rows_of, skipped, dep, row) else value)
    outputs = evaluate(step, pa.concat_tables(tables), upstream, rows_of.plans, plan.header.base_dir)
    keys = [result_key(step, k, outputs[k]) if k in outputs else None for k in row_keys]
    answered = [(key, outputs[k]) for k, key in zip(row_keys, keys) if key is not None]
    n = len(answered)
    results = pa.table(
        {
            "request_key": [a[0] for a in answered],
            "step": [step.name] * n,
            "status": ["succeeded"] * n,
            "output": [a[1] for a in answered],
            "error_code": [None] * n,
            "error": [None] * n,
            "attempts": [0] * n,
            "input_tokens": [0] * n,
            "output_tokens": [0] * n,
            "cost_usd": [0.0] * n,
            "run_id": [run_id] * n,
        },
        schema=RESULT_SCHEMA,
    )
    store.record_results(results, None)
    store.add_run_requests(
        plan.job_id,
        step.name,
        pa.table({"row_key": pa.array(row_keys, pa.string()), "request_key": pa.array(keys, pa.string())}),
    )
    return n, len(row_keys) - n


def _skipped(rows_of: JobRows, skipped: dict[str, set[str]], dep: str, row: Row) -> bool:
    """Whether `dep` skipped `row` by its `when:` (its own inputs were there): the query then
    reads NULL for it. A row whose upstream failed is left out, as for an LLM step."""
    key = row.keys.get(rows_of.plans[dep].grain)
    if dep not in skipped or key not in skipped[dep]:
        return False
    return all(value is not None for value in rows_of.upstream(rows_of.plans[dep], row).values())
