"""Reviewed labels in the output: a person's value replaces the model's for that field of that
row (the row counts as answered), and the row says which fields were reviewed (`_reviewed`).

The labels come from the state (`StateStore.reviewed_labels`, written by `batchor review import`)
and are applied to each step's stored results as they are read for the output, never to the
stored answers themselves: the model's answer stays in the state, for the metrics to compare.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from batchor.plan.plan_file import CompiledPlan

if TYPE_CHECKING:
    from batchor.state.base import StoredResults

Patches = dict[str, dict[str, Any]]  # row key -> {field: reviewed value}; field "text" on a text step


def review_patches(plan: CompiledPlan, store: StoredResults) -> dict[str, Patches]:
    """Per step: the reviewed values of its rows (empty when nothing was reviewed, or when `store`
    keeps no reviews: a results-only store)."""
    reader = getattr(store, "reviewed_labels", None)
    found: dict[str, Patches] = {}
    for label in reader(plan.header.name) if reader is not None else []:
        found.setdefault(label["step"], {}).setdefault(label["row_key"], {})[label["field"]] = json.loads(
            label["value"]
        )
    return found


def patched(table: pa.Table, patches: Patches | None, text_step: bool) -> pa.Table:
    """`table` (row_key, ..., status, output, ..., reviewed) with the reviewed rows' output
    replaced (a text step) or merged field by field (a structured step), status succeeded, and
    `reviewed` naming the fields."""
    if not patches or table.num_rows == 0:
        return table
    hit = pc.is_in(table.column("row_key"), value_set=pa.array(list(patches), pa.string()))
    if not pc.any(hit).as_py():
        return table
    keys, outputs = table.column("row_key").to_pylist(), table.column("output").to_pylist()
    statuses, reviewed = table.column("status").to_pylist(), table.column("reviewed").to_pylist()
    for i, key in enumerate(keys):
        fields = patches.get(key) if key is not None else None
        if fields is None:
            continue
        outputs[i] = _merged(outputs[i] if statuses[i] == "succeeded" else None, fields, text_step)
        statuses[i], reviewed[i] = "succeeded", ", ".join(sorted(fields))
    for name, values in (("output", outputs), ("status", statuses), ("reviewed", reviewed)):
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    return table


def _merged(output: str | None, fields: dict[str, Any], text_step: bool) -> str:
    if text_step:
        value = fields.get("text")
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    try:
        answer = json.loads(output) if output else {}
    except ValueError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}
    return json.dumps({**answer, **fields}, ensure_ascii=False, separators=(",", ":"))
