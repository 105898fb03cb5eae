"""SQL steps: a DuckDB query over the rows and earlier answers, between LLM steps.

The query reads `rows` (input columns, `_row_key`, one column per upstream step: a struct for
structured answers, text otherwise) and returns `_row_key` plus any derived columns. It runs
in-process, costs nothing, and its per-row results are stored like answers (content-addressed),
so later steps, the output and the cache treat it like any other step. Queries should be
row-wise (filter, derive, join another file, explode one row's list): plan-time evaluation sees
rows in batches. A fan-out query may return a row key several times; its result per row is then
the list of returned rows, in query order (see `fanout_rows.py`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import pyarrow as pa

from batchor.duck import SMALL_ROWS, duckdb
from batchor.errors import SpecError
from batchor.fingerprint import canonical_json, request_prefix, sha256_hex
from batchor.plan.model import StepPlan
from batchor.plan.split import split_rows
from batchor.plan.step_kind import SQL_PROVIDER, local_price
from batchor.spec.inputs import ROW_KEY
from batchor.spec.sql_guard import confined_for, refused_access

_JSON_TYPES = {
    "BIGINT": "integer",
    "INTEGER": "integer",
    "SMALLINT": "integer",
    "TINYINT": "integer",
    "HUGEINT": "integer",
    "UBIGINT": "integer",
    "UINTEGER": "integer",
    "DOUBLE": "number",
    "FLOAT": "number",
    "BOOLEAN": "boolean",
    "VARCHAR": "string",
}


_UNNEST = re.compile(r"\bunnest\s*\(", re.IGNORECASE)
_UNNESTED = re.compile(r"\bunnest\s*\(\s*(?:rows\.)?([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*\)", re.IGNORECASE)


def sql_step_plan(
    name: str,
    sql: str,
    depends_on: list[str],
    step_names: set[str],
    fan_out: bool | None = None,
    max_fanout: int | None = None,
) -> StepPlan:
    """A StepPlan for a SQL step; its output schema is filled in once the input is known."""
    mentioned = {other for other in step_names - {name} if re.search(rf"\b{re.escape(other)}\b", sql)}
    deps = sorted(set(depends_on) | mentioned)
    if fan_out is None:  # `unnest(` is how DuckDB explodes a list: plain SQL fans out without a flag
        fan_out = max_fanout is not None or bool(_UNNEST.search(sql))
    prefix = request_prefix(SQL_PROVIDER, "duckdb", {"fan_out": True} if fan_out else {}, None)
    return StepPlan(
        name=name,
        provider=SQL_PROVIDER,
        model="duckdb",
        params={},
        prompt=sql,
        depends_on=deps,
        fan_out=fan_out,
        max_fanout=max_fanout,
        mode="realtime",
        price=local_price("duckdb"),
        token_count_exact=True,
        max_tokens=0,
        expected_output_tokens=0,
        key_prefix=prefix + "\x1f" + sha256_hex(sql),
    )


def derive_schema(step: StepPlan, columns: list[str], upstream: dict[str, StepPlan], base_dir: str) -> StepPlan:
    """Run the query on an empty `rows` to check it and learn its output columns and types."""
    empty = pa.table(
        {
            ROW_KEY: pa.array([], pa.string()),
            **{c: pa.array([], pa.string()) for c in columns},
            **{dep: pa.array([], _arrow_type(plan)) for dep, plan in upstream.items()},
        }
    )
    described = _run(step, empty, base_dir, "DESCRIBE ")
    names = described.column(0).to_pylist()
    types = described.column(1).to_pylist()
    if ROW_KEY not in names:
        raise SpecError(
            f"steps.{step.name}.sql must return the `{ROW_KEY}` column",
            hint=f"start with SELECT {ROW_KEY}, ... FROM rows",
        )
    properties = {
        n: {"type": _JSON_TYPES.get(t, "string")} if t in _JSON_TYPES else {}
        for n, t in zip(names, types)
        if n != ROW_KEY
    }
    schema = {"type": "object", "properties": properties}
    update: dict[str, Any] = {"schema_": schema}
    if step.fan_out and step.max_fanout is None:
        update["max_fanout"] = _list_bound(step.prompt, upstream)
    return step.model_copy(update=update)


def _list_bound(sql: str, upstream: dict[str, StepPlan]) -> int | None:
    """Elements per row from the `maxItems` of each `unnest(step.field)` (None: no bound known).

    A product of the bounds, which holds whether DuckDB zips several unnests or nests them."""
    found = _UNNESTED.findall(sql)
    if not found or len(found) != len(_UNNEST.findall(sql)):
        return None
    bound = 1
    for dep, name in found:
        schema = upstream[dep].schema if dep in upstream else None
        spec = ((schema or {}).get("properties") or {}).get(name) or {}
        if not isinstance(spec.get("maxItems"), int):
            return None
        bound *= max(1, spec["maxItems"])
    return bound


SKIPPED = object()  # an upstream step skipped the row by its `when:`: the query reads NULL for it


def evaluate(
    step: StepPlan, rows: pa.Table, upstream: dict[str, list[Any]], plans: dict[str, StepPlan], base_dir: str
) -> dict[str, str]:
    """Per returned row key: the JSON of its derived columns. Rows missing an upstream answer
    are not given to the query (as for LLM steps, whose requests need every input); a step that
    skipped the row by its `when:` (`SKIPPED`) is NULL in it."""
    if step.kind == "split":  # a split needs its text: a skipped row has none
        return split_rows(
            step, rows, {d: [None if v is SKIPPED else v for v in vs] for d, vs in upstream.items()}, base_dir
        )
    keep = [i for i in range(rows.num_rows) if all(upstream[dep][i] is not None for dep in step.depends_on)]
    table = rows.take(pa.array(keep, pa.int64())) if len(keep) != rows.num_rows else rows
    for dep in step.depends_on:
        values = [None if upstream[dep][i] is SKIPPED else upstream[dep][i] for i in keep]
        table = table.append_column(dep, _column(values, plans[dep]))
    result = _run(step, table, base_dir, "")
    keys = result.column(ROW_KEY).to_pylist()
    others = [c for c in result.column_names if c != ROW_KEY]
    records = result.select(others).to_pylist()
    if step.fan_out:
        elements: dict[str, list[dict]] = {}
        for key, record in zip(keys, records):
            elements.setdefault(key, []).append(record)
        return {key: canonical_json(items) for key, items in elements.items()}
    if len(set(keys)) != len(keys):
        twice = next(k for k, n in Counter(keys).items() if n > 1)
        raise SpecError(
            f"steps.{step.name}.sql returned `{ROW_KEY}` '{twice}' more than once",
            hint="add `fan_out: true` to the step for one row per element or match "
            "(later steps then run once per element), or return each row once",
        )
    return {key: canonical_json(record) for key, record in zip(keys, records)}


def result_key(step: StepPlan, row_key: str, output: str) -> str:
    """Content-addressed key of one SQL step result (its inputs fully determine it)."""
    return sha256_hex(f"{step.key_prefix}\x1f{row_key}\x1f{output}")[:32]


def _run(step: StepPlan, table: pa.Table, base_dir: str, prefix: str) -> pa.Table:
    # `threads` is the whole instance's setting: a fan-out's query runs in an instance of its own.
    # One thread keeps a fan-out's row order, so element numbers never shuffle. The query is spec
    # SQL: it runs confined to the project (see batchor/spec/sql_guard.py).
    small = table.num_rows <= SMALL_ROWS and not step.fan_out
    db = confined_for(step.prompt, base_dir, small=small, one_thread=step.fan_out)
    try:
        db.register("rows", table)
        return db.sql(prefix + step.prompt).to_arrow_table()
    except duckdb.Error as exc:
        refused = refused_access(exc, f"steps.{step.name}.sql", base_dir)
        if refused:
            raise refused from None
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        candidates = next(
            (f" ({line.rstrip('.')}: did you mean one of them?)" for line in lines if line.startswith("Candidate")), ""
        )
        raise SpecError(
            f"steps.{step.name}.sql: {lines[0][:300]}{candidates}",
            hint="the query reads `rows` (input columns, _row_key, one column per earlier step)",
        ) from None
    finally:
        db.close()


def _arrow_type(plan: StepPlan) -> pa.DataType:
    """An Arrow type for an upstream step's answers (struct from its schema, a float vector for
    an embedding step: DuckDB's FLOAT[n], else text)."""
    if plan.kind == "embed":
        return pa.list_(pa.float32(), plan.dimensions) if plan.dimensions else pa.list_(pa.float32())
    if plan.schema is None or not plan.schema.get("properties"):
        return pa.string()
    return pa.struct([(name, _field_type(spec)) for name, spec in plan.schema["properties"].items()])


def _field_type(spec: dict[str, Any]) -> pa.DataType:
    kind = spec.get("type")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "integer":
        return pa.int64()
    if kind == "number":
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "array":
        return pa.list_(_field_type(spec.get("items") or {}))
    if kind == "object" and spec.get("properties"):
        return pa.struct([(n, _field_type(s)) for n, s in spec["properties"].items()])
    return pa.string()


def _column(values: list[Any], plan: StepPlan) -> pa.Array:
    kind = _arrow_type(plan)
    if plan.kind == "embed":
        return pa.array(values, kind)
    if pa.types.is_struct(kind):
        cleaned = [None if v is None else {f.name: _coerce(v.get(f.name), f.type) for f in kind} for v in values]
        return pa.array(cleaned, kind)
    return pa.array([v if isinstance(v, str) or v is None else json.dumps(v) for v in values], pa.string())


def _coerce(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_string(kind) and not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return value
