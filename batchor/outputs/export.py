"""Output files: input columns + one column per answer (structured fields flattened to
`<step>.<field>`) + `_row_key`, `_status`, `_error`; written atomically (temp file + rename).

The join of plan rows with stored answers runs in an in-memory DuckDB over Arrow, so a million
rows export without passing through Python objects.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from batchor.errors import OutputError
from batchor.outputs.schemas import flatten_fields
from batchor.plan.model import StepPlan
from batchor.plan.store import CompiledPlan
from batchor.spec.inputs import ROW_KEY

_COPY_OPTIONS = {"csv": "(FORMAT csv, HEADER true)", "tsv": "(FORMAT csv, HEADER true, DELIMITER '\t')",
                 "parquet": "(FORMAT parquet, COMPRESSION zstd)", "jsonl": "(FORMAT json)"}
_CASTS = {"integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}


def output_columns(steps: list[StepPlan]) -> list[str]:
    """Names of the answer columns the steps add, in order."""
    names: list[str] = []
    for step in steps:
        if step.schema is None:
            names.append(step.name)
        else:
            names.extend(f"{step.name}.{field}" for field, _ in flatten_fields(step.schema))
    return names


def build_output_sql(plan: CompiledPlan) -> str:
    """SELECT producing the output table from `rows` and `res_<i>` relations."""
    steps = plan.header.steps
    inputs = [c for c in plan.header.input.columns]
    select = [f"rows.{_q(c)}" for c in inputs] + [f"rows.{ROW_KEY}"]
    joins = []
    for i, step in enumerate(steps):
        alias = f"res_{i}"
        joins.append(f"LEFT JOIN {alias} ON {alias}.row_key = rows.{ROW_KEY}")
        select.extend(_answer_columns(step, alias))
    select.append(f"{_status_sql(len(steps))} AS _status")
    select.append(f"{_error_sql(steps)} AS _error")
    return f"SELECT {', '.join(select)} FROM rows {' '.join(joins)} ORDER BY rows.__idx"


def _answer_columns(step: StepPlan, alias: str) -> list[str]:
    ok = f"{alias}.status = 'succeeded'"
    if step.schema is None:
        return [f"CASE WHEN {ok} THEN {alias}.output END AS {_q(step.name)}"]
    columns = []
    for field, kind in flatten_fields(step.schema):
        path = "'$.\"" + field.replace("'", "''").replace('"', '\\"') + "\"'"
        if kind in _CASTS:
            expr = f"TRY_CAST(json_extract_string({alias}.output, {path}) AS {_CASTS[kind]})"
        elif kind == "string":
            expr = f"json_extract_string({alias}.output, {path})"
        else:
            expr = f"CAST(json_extract({alias}.output, {path}) AS VARCHAR)"
        columns.append(f"CASE WHEN {ok} THEN {expr} END AS {_q(step.name + '.' + field)}")
    return columns


def _status_sql(n: int) -> str:
    failed = " OR ".join(f"res_{i}.status = 'failed'" for i in range(n))
    pending = " OR ".join(f"(res_{i}.request_key IS NOT NULL AND res_{i}.status IS NULL)" for i in range(n))
    unmapped = " OR ".join(f"res_{i}.row_key IS NULL" for i in range(n))
    skipped = " AND ".join(f"res_{i}.request_key IS NULL" for i in range(n))
    return (f"CASE WHEN {failed} THEN 'failed' WHEN {pending} OR {unmapped} THEN 'pending' "
            f"WHEN {skipped} THEN 'skipped' ELSE 'succeeded' END")


def _error_sql(steps: list[StepPlan]) -> str:
    parts = [f"CASE WHEN res_{i}.status = 'failed' THEN '{s.name}: ' || coalesce(res_{i}.error_code, '') || ': ' "
             f"|| coalesce(res_{i}.error, '') END" for i, s in enumerate(steps)]
    return f"NULLIF(concat_ws(' | ', {', '.join(parts)}), '')"


def write_output(plan: CompiledPlan, store: Any, path: Path | None = None, fmt: str | None = None) -> Path:
    """Export the job's current results (finished or not) to the output file."""
    target = Path(path or plan.header.output.path)
    fmt = fmt or (format_for(target) if path else None) or plan.header.output.format
    _check_target(target)
    db = duckdb.connect(":memory:")
    try:
        db.register("rows", _indexed_rows(plan))
        for i, step in enumerate(plan.header.steps):
            db.register(f"res_{i}", store.job_results(plan.job_id, step.name))
        query = build_output_sql(plan)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        try:
            _copy(db, query, tmp, fmt)
            os.replace(tmp, target)
        except (duckdb.Error, OSError) as exc:
            raise OutputError(f"cannot write output {target}: {str(exc).splitlines()[0][:300]}",
                              hint="free disk space or fix permissions; results are safe in the state, "
                                   "re-run apply (or `batchor export`) to write the file") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    finally:
        db.close()
    return target


def _copy(db: duckdb.DuckDBPyConnection, query: str, tmp: str, fmt: str) -> None:
    if fmt == "duckdb":
        os.unlink(tmp)
        db.execute(f"ATTACH '{tmp}' AS out")
        db.execute(f"CREATE TABLE out.results AS {query}")
        db.execute("DETACH out")
        return
    db.execute(f"COPY ({query}) TO '{tmp}' {_COPY_OPTIONS[fmt]}")


def _indexed_rows(plan: CompiledPlan) -> pa.RecordBatchReader:
    columns = [ROW_KEY] + list(plan.header.input.columns)
    batches = plan.iter_batches(columns)
    first = next(batches, None)
    if first is None:
        return pa.RecordBatchReader.from_batches(pa.schema([(ROW_KEY, pa.string()), ("__idx", pa.int64())]), [])
    schema = first.schema.append(pa.field("__idx", pa.int64()))

    def numbered():
        offset = 0
        for batch in _chain(first, batches):
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(batch.columns + [pa.array(range(offset, offset + n), pa.int64())],
                                             schema=schema)
            offset += n

    return pa.RecordBatchReader.from_batches(schema, numbered())


def _chain(first: pa.RecordBatch, rest: Any) -> Any:
    yield first
    yield from rest


def format_for(path: Path) -> str | None:
    """Output format from a file extension (None when it says nothing)."""
    return {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
            ".ndjson": "jsonl", ".json": "jsonl", ".duckdb": "duckdb"}.get(path.suffix.lower())


def check_output_target(plan: CompiledPlan, path: Path | None = None) -> None:
    """Fail before any call when the output cannot be written (a directory, no permission)."""
    _check_target(Path(path or plan.header.output.path))


def _check_target(target: Path) -> None:
    if target.is_dir():
        raise OutputError(f"output path {target} is a directory", hint="set output.path to a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create output folder {target.parent}: {exc.strerror}",
                          hint="fix output.path or permissions") from None
    if not os.access(target.parent, os.W_OK):
        raise OutputError(f"output folder {target.parent} is not writable", hint="fix permissions or output.path")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
