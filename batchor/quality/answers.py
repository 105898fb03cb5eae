"""The answers of one job as a typed DuckDB table: what checks, golden-label metrics and diffs read.

Quality commands never call a provider: they read the stored results of a job through the same
row alignment the output file uses (`outputs/export.py`), so a row has the same `_status` here as
in the file. Each step becomes one column, a struct typed from the step's JSON schema (so SQL can
say `classify.sentiment` and `judge.score > 3`) or text for a text step, next to the input columns,
`_row_key`, `_status` and the step's own result status (`"_ok.<step>"`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from batchor.duck import confined_db, duckdb
from batchor.outputs.export import is_small, register_rows, result_column, row_status_sql
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.state.base import StateStore

if TYPE_CHECKING:
    from batchor.state.base import StateStore


@dataclass(frozen=True)
class Shape:
    """What checks and golden labels bind to: the input columns and the planned steps (a saved
    plan's, or the steps `validate` resolved before any plan exists)."""

    columns: list[str]
    steps: list[StepPlan]

    @classmethod
    def of(cls, plan: CompiledPlan) -> Shape:
        return cls(list(plan.header.input.columns), list(plan.header.steps))

    def step(self, name: str) -> StepPlan | None:
        return next((s for s in self.steps if s.name == name), None)


_SCALARS = {"integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN", "string": "VARCHAR"}


def connect(*plans: CompiledPlan) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for one report on the answers of `plans`, closed by the caller: a cursor
    of a kept instance when they are small (see `batchor.duck`), else an instance of its own. Check
    expressions are spec SQL: the connection is confined and reads no file at all."""
    return confined_db((), small=all(is_small(plan) for plan in plans))


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def ok_column(step: str) -> str:
    """Column saying whether `step` answered the row (its result succeeded)."""
    return f"_ok.{step}"


def load_answers(
    db: duckdb.DuckDBPyConnection,
    plan: CompiledPlan,
    store: StateStore | None,
    table: str = "answers",
    errors: bool = False,
) -> None:
    """Create `table` in `db`: one row per output row, typed answers per step (see module doc).
    With `store=None` the table is empty but fully typed: enough to bind check expressions.
    `errors`: also each step's failure, `"_error_code.<step>"` and `"_error.<step>"` (null unless
    the step's result failed), for the report's failed examples; checks never see them."""
    register_rows(db, plan, store if store is not None else _NoAnswers(), reviewed=False)
    try:
        query = answers_sql(plan, errors)
        db.execute(f"CREATE TEMP TABLE {q(table)} AS {query}" + (" LIMIT 0" if store is None else ""))
    finally:
        db.unregister("rows")
    if store is not None:
        add_reviewed_labels(db, plan, store, table)


def add_input_columns(db: duckdb.DuckDBPyConnection, added: pa.Table, table: str = "answers") -> None:
    """Add `added`'s columns (after its `_row_key`) to `table`, matched by row key; null where the
    row is not in `added`."""
    db.register("added_columns", added)
    try:
        for name in added.column_names[1:]:
            kind = db.execute(f"SELECT typeof({q(name)}) FROM added_columns LIMIT 1").fetchall()
            db.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q(name)} {kind[0][0] if kind else 'VARCHAR'}")
            db.execute(
                f"UPDATE {q(table)} SET {q(name)} = a.{q(name)} FROM added_columns a "
                f"WHERE {q(table)}._row_key = a._row_key"
            )
    finally:
        db.unregister("added_columns")


def review_column(step: str, field: str) -> str:
    """Column of the answers table holding a person's label for a step's field (text: `text`)."""
    return f"_review.{step}.{field}"


def add_reviewed_labels(db: duckdb.DuckDBPyConnection, plan: CompiledPlan, store: StateStore, table: str) -> None:
    """One `_review.<step>.<field>` column per reviewed field: the label as text (a JSON string
    unquoted, other values as JSON), null where the row was not reviewed. The answers stay the
    model's: metrics compare them with these labels (quality/metrics.py)."""
    reader = getattr(store, "reviewed_labels", None)
    labels = reader(plan.header.name) if reader is not None else []
    if not labels:
        return
    db.register(
        "review_labels", pa.Table.from_pylist([{k: str(v) for k, v in r.items() if k in _LABEL} for r in labels])
    )
    try:
        for step, field in sorted({(r["step"], r["field"]) for r in labels}):
            column = q(review_column(step, field))
            db.execute(f"ALTER TABLE {q(table)} ADD COLUMN {column} VARCHAR")
            db.execute(
                f"UPDATE {q(table)} SET {column} = r.label FROM (SELECT row_key, "
                "CASE WHEN json_type(value) = 'VARCHAR' "
                "THEN json_extract_string(value, '$') ELSE value END AS label FROM review_labels "
                f"WHERE step = ? AND field = ?) r WHERE {q(table)}._row_key = r.row_key",
                [step, field],
            )
    finally:
        db.unregister("review_labels")


_LABEL = ("step", "row_key", "field", "value")


class _NoAnswers:
    """A state with no results: rows keep their shape, every answer is missing."""

    def job_results(self, job_id: str, step: str) -> pa.Table:
        return pa.table(
            {
                name: pa.array([], pa.string())
                for name in ("row_key", "request_key", "status", "output", "error_code", "error")
            }
        )

    def job_results_for_rows(self, job_id: str, step: str, row_keys: pa.Array) -> pa.Table:
        return self.job_results(job_id, step)

    def job_results_for_steps(self, job_id: str, steps: Sequence[str], row_keys: pa.Array | None = None) -> pa.Table:
        return pa.table({"step": pa.array([], pa.string()), **self.job_results(job_id, "").to_pydict()})


def empty_answers(db: duckdb.DuckDBPyConnection, inputs: pa.Schema, steps: list[StepPlan]) -> None:
    """Create the typed, empty `answers` table from the input's columns and the steps' schemas
    alone (no plan yet): what `validate` binds checks against. Same columns as `answers_sql`."""
    answer = "__batchor_answer"  # a column, not a NULL literal: DuckDB would fold the cast to type NULL
    db.register("validate_inputs", inputs.append(pa.field(answer, pa.string())).empty_table())
    try:
        columns = [q(c) for c in inputs.names] + [f"{answer} AS _row_key"]
        for step in steps:
            columns.append(f"{typed_answer(step, answer)} AS {q(step.name)}")
            columns.append(f"false AS {q(ok_column(step.name))}")
        columns.append(f"{answer} AS _status")
        db.execute(f"CREATE OR REPLACE TEMP TABLE answers AS SELECT {', '.join(columns)} FROM validate_inputs")
    finally:
        db.unregister("validate_inputs")


def error_columns(step: str) -> tuple[str, str]:
    """Columns of an answers table loaded with `errors=True`: the step's error code and message."""
    return f"_error_code.{step}", f"_error.{step}"


def answers_sql(plan: CompiledPlan, errors: bool = False) -> str:
    """The SELECT over export's `rows` that builds the answers table."""
    columns = [f"rows.{q(c)}" for c in plan.header.input.columns] + ["rows._row_key"]
    for i, step in enumerate(plan.header.steps):
        result = f"rows.{result_column(i)}"
        ok = f"coalesce({result}.status = 'succeeded', false)"
        columns.append(f"CASE WHEN {ok} THEN {typed_answer(step, result + '.output')} END AS {q(step.name)}")
        columns.append(f"{ok} AS {q(ok_column(step.name))}")
        if errors:
            failed = f"{result}.status = 'failed'"
            code, message = error_columns(step.name)
            columns.append(f"CASE WHEN {failed} THEN coalesce({result}.error_code, 'failed') END AS {q(code)}")
            columns.append(f"CASE WHEN {failed} THEN {result}.error END AS {q(message)}")
    columns.append(f"{row_status_sql(plan)} AS _status")
    return f"SELECT {', '.join(columns)} FROM rows"


def typed_answer(step: StepPlan, output: str) -> str:
    """SQL turning a stored answer (JSON text, or text) into a value of the step's type."""
    if step.kind == "embed":  # a vector, as later SQL steps see it
        return f"CAST({output} AS {'FLOAT[' + str(step.dimensions) + ']' if step.dimensions else 'FLOAT[]'})"
    if step.schema is None:
        return output
    structure = duck_structure(step.schema)
    if structure == "JSON":
        return f"CAST({output} AS JSON)"
    return f"json_transform({output}, '{json.dumps(structure).replace(chr(39), chr(39) * 2)}')"


def duck_structure(schema: Any) -> Any:
    """A `json_transform` structure for a JSON schema: struct, list or scalar type names."""
    if not isinstance(schema, dict):
        return "JSON"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        kind = "string"
    if kind == "object" and schema.get("properties"):
        return {name: duck_structure(sub) for name, sub in schema["properties"].items()}
    if kind == "array":
        return [duck_structure(schema.get("items") or {})]
    return _SCALARS.get(kind or "", "JSON")


def field_kind(step: StepPlan, field: str) -> str:
    """What a top-level answer field holds, for choosing its metric: enum, string, number, array,
    boolean (an enum of two), or text (the whole answer of a text step)."""
    if step.schema is None:
        return "text"
    spec = (step.schema.get("properties") or {}).get(field)
    if not isinstance(spec, dict):
        return "unknown"
    if "enum" in spec:
        return "enum"
    kind = spec.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    return {"integer": "number", "number": "number", "boolean": "enum", "array": "array", "string": "string"}.get(
        kind or "", "unknown"
    )


def answer_fields(step: StepPlan) -> list[str]:
    """Top-level fields of a step's answers (`text` for a text step)."""
    if step.schema is None:
        return ["text"]
    return list((step.schema.get("properties") or {}).keys())


def field_sql(step: StepPlan, field: str, table: str = "") -> str:
    """SQL for one answer field of a step (the whole answer of a text step)."""
    prefix = f"{table}." if table else ""
    if step.schema is None:
        return f"{prefix}{q(step.name)}"
    return f"{prefix}{q(step.name)}.{q(field)}"
