"""Output files: input columns + one column per answer (structured fields flattened to
`<step>.<field>`) + `_row_key`, `_status`, `_error`; written atomically (temp file + rename).

Plan rows stream in order with each step's stored answer attached (looked up by row key in
Arrow), and an in-memory DuckDB projects and writes them: a million rows export without Python
objects per row, and without a join and sort over the whole table.

With a fan-out (plan/fanout_rows.py) the file has one row per element of the deepest fan-out, in input
order then element order: the input columns and earlier answers repeat on each element row, and
`_row_key` is the element's key (`<row_key>#<n>`). An input row without elements stays one row.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from batchor.duck import SMALL_ROWS, attached, duckdb, scratch_db
from batchor.errors import OutputError, UsageError
from batchor.file_modes import PRIVATE_FILE
from batchor.outputs.formulas import escaped_items, text_columns
from batchor.outputs.reviewed import Patches, patched, review_patches
from batchor.outputs.written import check_not_foreign, remember
from batchor.plan.fanout_rows import element_key, fanout_parents, fanouts_above, lineage
from batchor.plan.model import StepPlan
from batchor.plan.plan_file import CompiledPlan
from batchor.plan.plan_header import OUTPUT_FORMATS
from batchor.plan.targets import check_output_path
from batchor.schema.core import flatten_fields
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore, StoredResults
from batchor.state.step_maps import per_step

_COPY_OPTIONS = {
    "csv": "(FORMAT csv, HEADER true)",
    "tsv": "(FORMAT csv, HEADER true, DELIMITER '\t')",
    "parquet": "(FORMAT parquet, COMPRESSION zstd)",
    "jsonl": "(FORMAT json)",
}
_CASTS = {"integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}
_RESULT = "__res_{}"  # struct column of `rows` holding step i's result for the row
_TEXT_FORMATS = ("csv", "tsv")  # formats whose vectors stay JSON text


def vector_type(step: StepPlan) -> str:
    """DuckDB's type for an embedding step's vectors: FLOAT[n] when the size is known."""
    return f"FLOAT[{step.dimensions}]" if step.dimensions else "FLOAT[]"


_RESULT_FIELDS = ("row_key", "request_key", "status", "output", "error_code", "error", "model")
# `reviewed`: the fields a person's label replaced (outputs/reviewed.py), null for the model's answer
_RESULT_TYPE_SCHEMA = pa.schema([pa.field(name, pa.string()) for name in (*_RESULT_FIELDS, "reviewed")])
_RESULT_TYPE = pa.struct(list(_RESULT_TYPE_SCHEMA))
PART_ROWS = 131_072  # plan rows whose results are fetched from the state at a time (see _aligned_rows)
MAX_PARTS = 16  # a bigger job gets bigger parts: each part's query scans all of the state's results


def output_columns(steps: list[StepPlan]) -> list[str]:
    """Names of the answer columns the steps add, in order."""
    names: list[str] = []
    for step in steps:
        if step.schema is None:
            names.append(step.name)
        else:
            names.extend(f"{step.name}.{field}" for field, _ in flatten_fields(step.schema))
    return names


def build_output_sql(
    plan: CompiledPlan, fmt: str | None = None, reviewed: bool = False, escaped: set[str] | None = None
) -> str:
    """SELECT producing the output table from `rows`: the plan's rows in order, each step's
    result aligned to its row in a struct column (`_aligned_rows`). A plain projection, so
    DuckDB keeps the input order without sorting a million wide rows. `escaped`: text columns
    whose formula-like cells get a leading `'` (outputs/formulas.py)."""
    steps = plan.header.steps
    inputs = list(plan.header.input.columns)
    select = [f"rows.{_q(c)} AS {_q(c)}" for c in inputs]
    aliases = [f"rows.{_RESULT.format(i)}" for i in range(len(steps))]
    for step, alias in zip(steps, aliases):
        if step.reduce is None or step.reduce.keep == "rows":  # a reduce's groups have an output of their own
            select.extend(_answer_columns(step, alias, fmt))
    select.append(f"rows.{ROW_KEY}")  # with _status and _error: the bookkeeping columns come last
    select.extend(model_columns(steps, aliases))
    select.append(f"{_status_sql(aliases)} AS _status")
    select.append(f'{_error_sql(steps, aliases)} AS "_error"')
    if reviewed:  # a job with reviewed labels: which fields of the row a person set
        marks = [
            f"CASE WHEN {a}.reviewed IS NOT NULL THEN '{s.name}: ' || {a}.reviewed END" for s, a in zip(steps, aliases)
        ]
        select.append(f"NULLIF(concat_ws('; ', {', '.join(marks)}), '') AS _reviewed")
    return f"SELECT {', '.join(escaped_items(select, escaped) if escaped else select)} FROM rows"


def model_columns(steps: list[StepPlan], aliases: list[str]) -> list[str]:
    """`_model`: which model answered, for steps that may ask more than one (fallback models, an
    escalation); `<step>._model` each when several steps may."""
    chosen = [(s, a) for s, a in zip(steps, aliases) if s.other_models]
    if len(chosen) == 1:
        return [f"{chosen[0][1]}.model AS _model"]
    return [f"{a}.model AS {_q(s.name + '._model')}" for s, a in chosen]


def _answer_columns(step: StepPlan, alias: str, fmt: str | None = None) -> list[str]:
    ok = f"{alias}.status = 'succeeded'"
    if step.kind == "embed" and fmt not in _TEXT_FORMATS:  # a float list (JSON text in CSV, an array in JSONL)
        # Parquet stores either array as a list; DuckDB 2.0 writes a fixed-size one with NULLs
        # (rows whose text failed) that pyarrow cannot read back, so Parquet gets the plain list.
        kind = {"jsonl": "JSON", "parquet": "FLOAT[]"}.get(fmt or "", vector_type(step))
        return [f"CASE WHEN {ok} THEN CAST({alias}.output AS {kind}) END AS {_q(step.name)}"]
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


def _status_sql(aliases: list[str]) -> str:
    failed = " OR ".join(f"{a}.status = 'failed'" for a in aliases)
    pending = " OR ".join(f"({a}.request_key IS NOT NULL AND {a}.status IS NULL)" for a in aliases)
    unmapped = " OR ".join(f"{a}.row_key IS NULL" for a in aliases)
    skipped = " AND ".join(f"{a}.request_key IS NULL" for a in aliases)
    return (
        f"CASE WHEN {failed} THEN 'failed' WHEN {pending} OR {unmapped} THEN 'pending' "
        f"WHEN {skipped} THEN 'skipped' ELSE 'succeeded' END"
    )


def _error_sql(steps: list[StepPlan], aliases: list[str]) -> str:
    parts = [
        f"CASE WHEN {a}.status = 'failed' THEN '{s.name}: ' || coalesce({a}.error_code, '') || ': ' "
        f"|| coalesce({a}.error, '') END"
        for s, a in zip(steps, aliases)
    ]
    return f"NULLIF(concat_ws(' | ', {', '.join(parts)}), '')"


ROW_STATUSES = ("succeeded", "failed", "pending", "skipped")


def row_counts(plan: CompiledPlan, store: StateStore) -> dict[str, int]:
    """How many output rows are succeeded, failed, pending and skipped right now, judged exactly
    as the output's `_status` column: a run's status is derived from these."""
    with _export_db(plan) as db:
        db.register("rows", _output_rows(plan, store, with_input=False))
        return _counted(db, plan)


def _counted(db: duckdb.DuckDBPyConnection, plan: CompiledPlan) -> dict[str, int]:
    found = db.execute(f"SELECT {row_status_sql(plan)} AS s, count(*) FROM rows GROUP BY 1").fetchall()
    return {**dict.fromkeys(ROW_STATUSES, 0), **{status: int(n) for status, n in found}}


def _output_rows(
    plan: CompiledPlan,
    store: StoredResults,
    with_input: bool = True,
    reviewed: bool = True,
    reviews: dict[str, Patches] | None = None,
) -> Any:
    """The plan's rows with each step's stored result attached (see `_aligned_rows`), reviewed
    labels applied unless `reviewed` is False (the metrics compare the model's own answers).
    `reviews`: the reviewed labels when the caller has read them already."""
    if reviews is None:
        reviews = review_patches(plan, store) if reviewed else {}
    if any(s.fan_out for s in plan.header.steps):
        results = [
            _reviewed(_with_reviewed(store.job_results(plan.job_id, s.name)), s, reviews) for s in plan.header.steps
        ]
        return _element_rows(plan, results)
    return _aligned_rows(plan, store, list(plan.header.input.columns) if with_input else [], reviews)


def _with_reviewed(table: pa.Table) -> pa.Table:
    """A step's results as `_RESULT_TYPE_SCHEMA`: the state's fields, `reviewed` null."""
    if "model" not in table.schema.names:  # a store's table from before fallback models
        table = table.append_column("model", pa.nulls(table.num_rows, pa.string()))
    table = table.select(list(_RESULT_FIELDS))
    return table.append_column("reviewed", pa.nulls(table.num_rows, pa.string())).cast(_RESULT_TYPE_SCHEMA)


def _reviewed(table: pa.Table, step: StepPlan, reviews: dict[str, Patches]) -> pa.Table:
    return patched(table, reviews.get(step.name), step.schema is None)


def write_output(plan: CompiledPlan, store: StateStore, path: Path | None = None, fmt: str | None = None) -> Path:
    """Export the job's current results (finished or not) to the output file."""
    return _write(plan, store, path, fmt, counted=False)[0]


def write_output_and_count(
    plan: CompiledPlan, store: StateStore, path: Path | None = None
) -> tuple[Path, dict[str, int]]:
    """`write_output`, then `row_counts` of the rows it wrote (what an apply ends with). A small
    job's rows and results are read from the state once, as a table of a few thousand rows, for
    both (the second read was ~8 % of a 20-row apply's CPU); a big job's are streamed twice."""
    if not is_small(plan):
        return write_output(plan, store, path), row_counts(plan, store)
    return _write(plan, store, path, None, counted=True)


def _write(
    plan: CompiledPlan, store: StateStore, path: Path | None, fmt: str | None, counted: bool
) -> tuple[Path, dict[str, int]]:
    """Write the output file; with `counted` (small jobs only) also count its rows by status."""
    target = Path(path or plan.header.output.path)
    fmt = fmt or (_format_of_flag(target) if path else None) or plan.header.output.format
    check_output_path(target, state_location=store.location, inputs=plan.header.input.files)
    _check_target(target)
    counts: dict[str, int] = {}
    with _export_db(plan) as db:
        reviews = review_patches(plan, store)
        rows = _output_rows(plan, store, reviews=reviews)
        reviewed = bool(reviews)
        query = build_output_sql(plan, fmt, reviewed=reviewed)
        if fmt in _TEXT_FORMATS and plan.header.output.escape_formulas:
            db.register("rows", rows.schema.empty_table())  # its columns' types, not a row of the stream
            query = build_output_sql(plan, fmt, reviewed, text_columns(db, query))
            db.unregister("rows")
        db.register("rows", rows.read_all() if counted else rows)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        try:
            _copy(db, query, tmp, fmt)
            os.chmod(tmp, PRIVATE_FILE)  # the answers are as private as the state that holds them
            os.replace(tmp, target)
            if path is None:
                remember(target, plan.header.state_location)
        except (duckdb.Error, OSError) as exc:
            raise OutputError(
                f"cannot write output {target}: {str(exc).splitlines()[0][:300]}",
                hint="free disk space or fix permissions; results are safe in the state, "
                "re-run apply (or `batchor export`) to write the file",
            ) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if counted:
            counts = _counted(db, plan)
    return target, counts


@contextmanager
def _export_db(plan: CompiledPlan) -> Iterator[duckdb.DuckDBPyConnection]:
    """The DuckDB that reads the job's rows stream: for a big job an instance of its own, on one
    thread. With two, DuckDB buffered batches read ahead while writing in order: a 1M-row
    Parquet export grew the process by 430 MB instead of 270 (the same bytes, the same CPU)."""
    with scratch_db(is_small(plan)) as db:
        if not is_small(plan):
            db.execute("SET threads = 1")
        yield db


def is_small(plan: CompiledPlan) -> bool:
    """Whether the job's rows are few enough for the shared in-memory DuckDB (see `batchor.duck`);
    a fan-out's element rows are not counted in the plan, so it never is."""
    return plan.rows <= SMALL_ROWS and not any(s.fan_out for s in plan.header.steps)


def register_rows(
    db: duckdb.DuckDBPyConnection, plan: CompiledPlan, store: StoredResults, reviewed: bool = True
) -> None:
    """Register `rows` in `db`: the job's rows in output order, step i's stored result for each
    in the struct column `result_column(i)` (read once: a stream, not a table); reviewed labels
    applied unless `reviewed` is False."""
    db.register("rows", _output_rows(plan, store, reviewed=reviewed))


def result_column(index: int) -> str:
    """Name of the struct column of `rows` holding step `index`'s result (row_key, status, output...)."""
    return _RESULT.format(index)


def result_struct(results: pa.Table, row_keys: pa.Array) -> pa.StructArray:
    """A step's results (`row_key`, `request_key`, `status`, `output`, `error_code`, `error`) as
    the struct column `result_column(i)` of `rows` holds them for these rows (a streamed flush)."""
    return _struct(_align(_with_reviewed(results), pa.chunked_array([row_keys])))


def row_status_sql(plan: CompiledPlan) -> str:
    """SQL over `rows` giving each row's `_status`, exactly as the output file has it."""
    return _status_sql([f"rows.{result_column(i)}" for i in range(len(plan.header.steps))])


def _copy(db: duckdb.DuckDBPyConnection, query: str, tmp: str, fmt: str) -> None:
    if fmt == "duckdb":
        os.unlink(tmp)
        with attached(db, tmp) as out:
            db.execute(f"CREATE TABLE {out}.results AS {query}")
        return
    db.execute(f"COPY ({query}) TO '{tmp}' {_COPY_OPTIONS[fmt]}")


def _aligned_rows(
    plan: CompiledPlan, store: StoredResults, columns: list[str], reviews: dict[str, Patches]
) -> pa.RecordBatchReader:
    """The plan's rows in order (the row key and `columns` of the input), plus per step a struct
    column holding that row's result (`_RESULT_FIELDS`, all null when the row has none: the LEFT
    JOIN this replaces, looked up by row key).

    Results are fetched from the state for `PART_ROWS` plan rows at a time (at most `MAX_PARTS`
    parts: 10M rows come in parts of 625,000), so memory holds one part's answers, not the job's
    (1M rows: ~100 MB of answers plus the join's working memory).
    The first part is fetched here, in the caller's thread; later ones in DuckDB's scan thread,
    which waits for the state's process lock: a caller must not hold a `store.session()` over a
    job of more than one part (run.py holds one over small jobs only)."""
    names = [_RESULT.format(i) for i in range(len(plan.header.steps))]
    size = max(PART_ROWS, -(-plan.rows // MAX_PARTS))
    parts = (_AlignedPart(part, store, plan, reviews) for part in _parts(plan.iter_batches([ROW_KEY] + columns), size))
    first = next(parts, None)
    if first is None:
        fields = [pa.field(ROW_KEY, pa.string())] + [pa.field(c, pa.string()) for c in columns]
        return pa.RecordBatchReader.from_batches(pa.schema(fields + [pa.field(n, _RESULT_TYPE) for n in names]), [])
    schema = pa.schema(list(first.batches[0].schema) + [pa.field(n, _RESULT_TYPE) for n in names])
    return pa.RecordBatchReader.from_batches(schema, (b for part in _chain(first, parts) for b in part.rows(schema)))


class _AlignedPart:
    """Consecutive plan batches and each step's stored results for their rows."""

    def __init__(
        self, batches: list[pa.RecordBatch], store: StoredResults, plan: CompiledPlan, reviews: dict[str, Patches]
    ) -> None:
        self.batches = batches
        row_keys = pa.chunked_array([b.column(0) for b in batches], pa.string())
        steps = plan.header.steps
        results = _results_of(store, plan.job_id, [s.name for s in steps], row_keys)
        self.tables = [_reviewed(table, step, reviews) for table, step in zip(results, steps)]
        self.positions = [_positions(table, row_keys) for table in self.tables]

    def rows(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The part's output batches, once: its data is let go as they are handed out (the next
        part is fetched while this object is still referenced)."""
        offset, batches, tables, positions = 0, self.batches, self.tables, self.positions
        self.batches, self.tables, self.positions = [], [], []
        while batches:
            batch = batches.pop(0)
            n = batch.num_rows
            extra = [_struct(t.take(at.slice(offset, n))) for t, at in zip(tables, positions)]
            yield pa.RecordBatch.from_arrays(batch.columns + extra, schema=schema)
            offset += n


def _parts(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[list[pa.RecordBatch]]:
    """Consecutive batches regrouped into parts of `rows` rows (the last may be shorter)."""
    part: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        while batch.num_rows:
            piece = batch.slice(0, rows - size)
            part.append(piece)
            size += piece.num_rows
            batch = batch.slice(piece.num_rows)
            if size == rows:
                yield part
                part, size = [], 0
    if part:
        yield part


def _results_of(store: StoredResults, job_id: str, steps: list[str], row_keys: pa.ChunkedArray) -> list[pa.Table]:
    """Each step's stored results for these rows (one state query for all steps), each as one
    contiguous table of `_RESULT_FIELDS` (taking rows from a chunked table would join its chunks
    again on every batch)."""
    found = store.job_results_for_steps(job_id, steps, row_keys.combine_chunks())
    return [_with_reviewed(table).combine_chunks() for table in per_step(found, steps)]


def _element_rows(plan: CompiledPlan, results: list[pa.Table]) -> pa.Table:
    """Like `_aligned_rows`, with each row repeated once per element of the fan-outs under it."""
    steps = plan.header.steps
    base = pa.Table.from_batches(list(plan.iter_batches([ROW_KEY] + list(plan.header.input.columns))))
    take = pa.array(range(base.num_rows), pa.int64())
    keys: dict[str | None, pa.Array] = {None: base.column(ROW_KEY).combine_chunks()}
    elements: dict[str, pa.Array] = {}
    by_name = {s.name: r for s, r in zip(steps, results)}
    parents = fanout_parents(steps)
    for fan in fanouts_above(max(parents, key=lambda f: len(lineage(f, parents))), parents):
        frame = pa.table({"i": pa.array(range(len(take)), pa.int64()), "parent": keys[parents[fan]]})
        joined = frame.join(_elements(by_name[fan]), "parent", join_type="left outer")
        joined = joined.sort_by([("i", "ascending"), ("n", "ascending")])
        pick = joined.column("i").combine_chunks()
        take = take.take(pick)
        keys = {grain: k.take(pick) for grain, k in keys.items()}
        elements = {name: e.take(pick) for name, e in elements.items()}
        keys[fan] = joined.column("key").combine_chunks()
        elements[fan] = joined.column("element").combine_chunks()
    table = base.take(take)
    deepest = [keys[g] for g in reversed(list(keys))]
    table = table.set_column(0, ROW_KEY, pc.coalesce(*deepest) if len(deepest) > 1 else deepest[0])
    for i, (step, result) in enumerate(zip(steps, results)):
        at = keys[step.grain]
        aligned = _align(result, at)
        if step.fan_out:  # its answer per element row is that element
            aligned = aligned.set_column(aligned.schema.get_field_index("output"), "output", elements[step.name])
        # An element row that does not exist at this step's grain was left out: mapped, not pending.
        aligned = aligned.set_column(0, "row_key", pc.if_else(pc.is_null(at), "", aligned.column("row_key")))
        table = table.append_column(_RESULT.format(i), _struct(aligned))
    return table


def _elements(result: pa.Table) -> pa.Table:
    """A fan-out step's stored lists as one row per element: parent key, n, element key and JSON."""
    parent, n, key, element = [], [], [], []
    for row_key, status, output in zip(
        result.column("row_key").to_pylist(), result.column("status").to_pylist(), result.column("output").to_pylist()
    ):
        if status != "succeeded" or output is None:
            continue
        for i, item in enumerate(json.loads(output), 1):
            parent.append(row_key)
            n.append(i)
            key.append(element_key(row_key, i))
            element.append(json.dumps(item, ensure_ascii=False, separators=(",", ":")))
    return pa.table(
        {
            "parent": pa.array(parent, pa.string()),
            "n": pa.array(n, pa.int64()),
            "key": pa.array(key, pa.string()),
            "element": pa.array(element, pa.string()),
        }
    )


def _align(result: pa.Table, row_keys: pa.ChunkedArray) -> pa.Table:
    """`result` (row_key, request_key, status, output, error_code, error) reordered to match
    `row_keys`, with null rows where a row has no result."""
    table = result.select([*_RESULT_FIELDS, "reviewed"])
    return table.take(_positions(table, row_keys))


def _positions(table: pa.Table, row_keys: pa.ChunkedArray) -> pa.ChunkedArray:
    """Per row key: the index of its row in `table` (null when it has none)."""
    return pc.index_in(row_keys, value_set=table.column("row_key").combine_chunks())


def _struct(table: pa.Table) -> pa.StructArray:
    return pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], fields=list(table.schema))


def _chain(first: pa.RecordBatch, rest: Any) -> Any:
    yield first
    yield from rest


def format_for(path: Path) -> str | None:
    """Output format from a file extension (None when it says nothing)."""
    return OUTPUT_FORMATS.get(path.suffix.lower())


def _format_of_flag(path: Path) -> str:
    """The format an output given on the command line asks for by its extension; one that names
    none is refused, rather than written in the spec's format under a name that says otherwise."""
    fmt = format_for(path)
    if fmt is None:
        raise UsageError(
            f"--output {path}: cannot tell the format from '{path.suffix or path.name}'",
            hint="use .csv, .tsv, .parquet, .jsonl or .duckdb",
        )
    return fmt


def check_output_target(
    plan: CompiledPlan, path: Path | None = None, state_location: str | None = None, force: bool = False
) -> None:
    """Fail before any call when the output cannot be written (a directory, no permission, a
    format its extension does not name) or must not be (the state file, an input file, a file
    batchor did not write: outputs/written.py)."""
    target = Path(path or plan.header.output.path)
    if path is not None:
        _format_of_flag(target)
    check_output_path(target, state_location=state_location, inputs=plan.header.input.files)
    _check_target(target)  # a directory is output_unwritable, not a file batchor did not write
    if path is None:
        check_not_foreign(target, plan.header.state_location, force)


def _check_target(target: Path) -> None:
    if target.is_dir():
        raise OutputError(f"output path {target} is a directory", hint="set output.path to a file name")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot create output folder {target.parent}: {exc.strerror}", hint="fix output.path or permissions"
        ) from None
    if not os.access(target.parent, os.W_OK):
        raise OutputError(f"output folder {target.parent} is not writable", hint="fix permissions or output.path")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
