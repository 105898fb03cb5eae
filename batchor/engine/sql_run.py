"""Apply-time SQL steps: evaluate the query over all rows once upstream answers are stored,
and store its per-row results like answers so output, status and later steps read them."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from batchor.plan.model import StepPlan
from batchor.plan.sql_step import evaluate, result_key
from batchor.plan.store import CompiledPlan
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import RESULT_SCHEMA


def run_sql_step(plan: CompiledPlan, step: StepPlan, store: Any, run_id: str) -> tuple[int, int]:
    """Returns (rows answered, rows left out)."""
    columns = [c for c in plan.data_columns() if not c.startswith("__req.")]
    rows = pa.Table.from_batches(list(plan.iter_batches(columns)))
    row_keys = rows.column(ROW_KEY).to_pylist()
    upstream = {dep: _answers(store, plan, dep, row_keys) for dep in step.depends_on}
    plans = {s.name: s for s in plan.header.steps}
    outputs = evaluate(step, rows, upstream, plans, plan.header.base_dir)
    keys = [result_key(step, k, outputs[k]) if k in outputs else None for k in row_keys]
    answered = [(key, outputs[k]) for k, key in zip(row_keys, keys) if key is not None]
    n = len(answered)
    results = pa.table({
        "request_key": [a[0] for a in answered], "step": [step.name] * n, "status": ["succeeded"] * n,
        "output": [a[1] for a in answered], "error_code": [None] * n, "error": [None] * n, "attempts": [0] * n,
        "input_tokens": [0] * n, "output_tokens": [0] * n, "cost_usd": [0.0] * n, "run_id": [run_id] * n,
    }, schema=RESULT_SCHEMA)
    store.record_results(results, None)
    store.add_run_requests(plan.job_id, step.name, pa.table({"row_key": pa.array(row_keys, pa.string()),
                                                              "request_key": pa.array(keys, pa.string())}))
    return n, len(row_keys) - n


def _answers(store: Any, plan: CompiledPlan, dep: str, row_keys: list[str]) -> list[Any]:
    table = store.job_results(plan.job_id, dep)
    structured = plan.header.step(dep).schema is not None
    found = {}
    for row_key, status, output in zip(table.column("row_key").to_pylist(), table.column("status").to_pylist(),
                                       table.column("output").to_pylist()):
        if status == "succeeded":
            found[row_key] = json.loads(output) if structured else output
    return [found.get(k) for k in row_keys]
