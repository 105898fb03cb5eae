"""Entity resolution (`resolve:` jobs): pair the rows before planning, cluster them after the run.

`paired` turns a resolve spec's input into its candidate pairs (resolve/pairs.py): the plan then
counts and prices the pairs before any call, and the engine judges them like rows, realtime or
in a Batch API, cached and resumed. `write_clusters` reads the judged pairs from the run's output
and writes the input rows with their cluster id and canonical value (plan/clusters.py) beside
it, as `<output>.clusters.<ext>`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchor.duck import scratch_db
from batchor.errors import ResolveError
from batchor.file_modes import PRIVATE_FILE
from batchor.frames import materialize, read_output
from batchor.plan.clusters import clustered, components, is_same
from batchor.resolve.pairs import PAIR_KEY, candidate_pairs, input_rows, rows_file
from batchor.spec.inputs import ROW_KEY, sql_str
from batchor.spec.model import JobSpec, ResolveSpec

__all__ = ["clusters_path", "components", "judge_step", "paired", "write_clusters"]


def paired(loaded: Any, folder: Path) -> Any:
    """`loaded` (a resolve spec) with its input replaced by the candidate pairs of its rows."""
    spec: JobSpec = loaded.spec
    assert spec.resolve is not None
    judge_step(spec, loaded.schemas)
    rows = input_rows(loaded)
    pairs_path = materialize(candidate_pairs(rows, spec.resolve), folder)
    kept = rows_file(pairs_path)
    if not kept.exists():
        pq.write_table(rows, kept, compression="zstd")
        kept.chmod(PRIVATE_FILE)
    unread = dict.fromkeys(("sql", "limit", "sample"))  # already applied to the rows
    new_input = spec.input.model_copy(update={"path": str(pairs_path), "format": "parquet", "key": PAIR_KEY, **unread})
    return dataclasses.replace(loaded, spec=spec.model_copy(update={"input": new_input}))


def judge_step(spec: JobSpec, schemas: dict[str, Any]) -> str:
    """The step whose answer decides a pair; it must answer a JSON object with a boolean `same`
    (`schemas`: each step's resolved JSON schema)."""
    assert spec.resolve is not None
    name = spec.resolve.judge or (next(iter(spec.steps)) if len(spec.steps) == 1 else None)
    if name is None or name not in spec.steps:
        raise ResolveError(
            f"resolve.judge: {'no step ' + repr(name) if name else 'the job has several steps'}",
            hint=f"name the step that judges a pair: one of {', '.join(spec.steps)}",
        )
    schema = schemas.get(name) or {}
    same = schema.get("properties", {}).get("same", {})
    if same.get("type") != "boolean":
        raise ResolveError(
            f"resolve.judge: step '{name}' must answer with a schema holding a boolean `same`",
            hint="give the step `output: {schema: {type: object, properties: {same: {type: boolean}}, "
            "required: [same]}}`",
        )
    return name


def clusters_path(output: Path) -> Path:
    """`out/companies.csv` -> `out/companies.clusters.csv`."""
    return output.with_name(f"{output.stem}.clusters{output.suffix}")


def write_clusters(header: Any, output: Path) -> Path:
    """The input rows with `_cluster` and `_canonical`, from the judged pairs in `output`."""
    resolve = ResolveSpec.model_validate(header.spec["resolve"])
    judge = judge_step(JobSpec.model_validate(header.spec), {s.name: s.schema for s in header.steps})
    rows = pq.read_table(rows_file(Path(header.input.files[0])))
    pairs = read_output(output)
    column = f"{judge}.same"
    if column not in pairs.column_names:
        raise ResolveError(f"resolve: the output {output} has no column '{column}'", hint="re-run apply")
    same = [
        (str(a), str(b))
        for a, b, answer in zip(*(pairs.column(c).to_pylist() for c in ("a_key", "b_key", column)))
        if is_same({"same": answer if isinstance(answer, bool) else str(answer).lower() == "true"})
    ]
    table = clustered(rows, ROW_KEY, resolve.value, same, resolve.canonical)
    target = clusters_path(output)
    _write(table.select([c for c in table.column_names if c != ROW_KEY] + [ROW_KEY]), target)
    return target


_FORMATS = {".csv": "(FORMAT csv, HEADER true)", ".tsv": "(FORMAT csv, HEADER true, DELIMITER '\t')"}


def _write(table: pa.Table, target: Path) -> None:
    """CSV, TSV or JSONL as the output is; Parquet for Parquet and DuckDB outputs."""
    fmt = _FORMATS.get(target.suffix.lower())
    if fmt is None:
        fmt = "(FORMAT json)" if target.suffix.lower() in (".jsonl", ".ndjson", ".json") else "(FORMAT parquet)"
    tmp = target.with_name(f".{target.name}.tmp")
    with scratch_db(table.num_rows <= 5000) as db:
        db.register("clusters", table)
        db.execute(f"COPY clusters TO {sql_str(str(tmp))} {fmt}")
        db.unregister("clusters")
    tmp.chmod(PRIVATE_FILE)
    tmp.replace(target)
