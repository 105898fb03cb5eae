"""Reduce steps' outputs: one row per group, written beside the job's output.

`<output stem>.<step><suffix>` (e.g. `out/reviews_by_product.summary.csv`) holds each group's
`group_by` values, its number of rows, its status and the answer's fields. The main output keeps
one row per input row (or element); it carries the group's answer only with `keep: rows`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from batchor.outputs.formulas import escaped_cell
from batchor.plan.model import StepPlan
from batchor.schema.core import flatten_fields
from batchor.state.base import StateStore


def group_output_path(output: Path, step: str) -> Path:
    return output.with_name(f"{output.stem}.{step}{output.suffix}")


def write_groups(
    output: Path, fmt: str, step: StepPlan, store: StateStore, groups: list[tuple[dict[str, Any], int, str | None]]
) -> Path:
    """Write one reduce step's groups: (key values, rows, request key of its answer)."""
    keys = [k for _, _, k in groups if k is not None]
    found = store.results_for_keys(pa.array(keys, pa.string())) if keys else None
    answers = (
        {} if found is None else dict(zip(found.column("request_key").to_pylist(), found.column("output").to_pylist()))
    )
    nested_as_text = fmt not in ("jsonl", "json")  # lists and objects: JSON text, as in the main output
    records = [_record(step, key, rows, answers.get(k) if k else None, nested_as_text) for key, rows, k in groups]
    path = group_output_path(output if fmt != "duckdb" else output.with_suffix(".parquet"), step.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt in ("parquet", "duckdb"):  # a DuckDB output's groups go to a Parquet file beside it
        pq.write_table(pa.Table.from_pylist(records), path)
    elif fmt in ("jsonl", "json"):
        path.write_text("".join(json.dumps(r, default=str) + "\n" for r in records), encoding="utf-8")
    else:
        escaped = [{k: escaped_cell(v) for k, v in r.items()} for r in records]
        options = pacsv.WriteOptions(delimiter="\t" if fmt == "tsv" else ",")
        pacsv.write_csv(pa.Table.from_pylist(escaped), path, options)
    return path


def _record(step: StepPlan, key: dict[str, Any], rows: int, output: str | None, as_text: bool) -> dict[str, Any]:
    record: dict[str, Any] = {**key, "_rows": rows, "_status": "succeeded" if output is not None else "pending"}
    if step.schema is None:
        return record | {step.name: output}
    parsed = json.loads(output) if output is not None else {}
    for name, kind in flatten_fields(step.schema):
        value = parsed.get(name)
        record[f"{step.name}.{name}"] = (
            json.dumps(value) if as_text and kind in ("array", "object", "any") and value is not None else value
        )
    return record
