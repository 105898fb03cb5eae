"""A job's row -> request map and results, for many steps in one query.

A spec with thousands of steps and few rows paid several state queries per step: a wave's scan
asked whether each step's map was recorded, recorded it, and the export and the streamed output
read each step's results for the same rows (2,000 steps: about 16,000 queries an apply). These
reads and writes take a wave's steps, or every step of an output part, at once; both backends
implement them here (DuckDB over registered Arrow tables, PostgreSQL over arrays).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

RESULT_COLUMNS = ("step", "row_key", "request_key", "status", "output", "error_code", "error", "model")
_CHUNK = 50_000  # values per PostgreSQL array parameter


def map_table(triples: Sequence[tuple[str, str, str | None]]) -> pa.Table:
    """(step, row_key, request_key) rows as the table `record_step_requests` takes."""
    columns = list(zip(*triples)) if triples else [(), (), ()]
    return pa.table(
        {name: pa.array(list(c), pa.string()) for name, c in zip(("step", "row_key", "request_key"), columns)}
    )


def per_step(table: pa.Table, steps: Sequence[str]) -> list[pa.Table]:
    """`table` (with a `step` column) split into one table per step of `steps`, in that order,
    each without the `step` column."""
    if len(steps) == 1:
        return [table.drop_columns(["step"])]
    order = pc.sort_indices(table.column("step"))
    table = table.take(order)
    names = table.column("step").combine_chunks()
    starts: dict[str, tuple[int, int]] = {}
    if len(names):
        ends = pc.value_counts(names)  # in order of first appearance, which the sort made ascending
        at = 0
        for step, n in zip(ends.field("values").to_pylist(), ends.field("counts").to_pylist()):
            starts[step] = (at, n)
            at += n
    rest = table.drop_columns(["step"])
    return [rest.slice(*starts.get(step, (0, 0))) for step in steps]


# --- DuckDB ------------------------------------------------------------------------------------

LISTED_KEYS = 2_000  # up to this many keys go to a DuckDB query as one list parameter


def duck_steps_with_requests(db: Any, job_id: str, steps: Sequence[str]) -> set[str]:
    rows = db.execute(
        "SELECT DISTINCT step FROM job_requests WHERE job_id = ? AND step IN (SELECT unnest(?::VARCHAR[]))",
        [job_id, list(steps)],
    ).fetchall()
    return {str(r[0]) for r in rows}


def duck_record(db: Any, job_id: str, table: pa.Table, forget: Sequence[str]) -> None:
    """Drop the maps of the steps `forget`, then record `table` (step, row_key, request_key):
    a row's new mapping replaces its old, in one transaction."""
    db.execute("BEGIN")
    if forget:
        db.execute(
            "DELETE FROM job_requests WHERE job_id = ? AND step IN (SELECT unnest(?::VARCHAR[]))",
            [job_id, list(forget)],
        )
    if table.num_rows:
        db.register("new_map", _first_per_row(table))
        db.execute(
            "DELETE FROM job_requests USING new_map n WHERE job_requests.job_id = ? "
            "AND job_requests.step = n.step AND job_requests.row_key = n.row_key",
            [job_id],
        )
        db.execute("INSERT INTO job_requests SELECT ?, step, row_key, request_key FROM new_map", [job_id])
        db.unregister("new_map")
    db.execute("COMMIT")


def duck_results(db: Any, job_id: str, steps: Sequence[str], row_keys: pa.Array | None) -> pa.Table:
    """Each row's result for these steps; `row_keys` None: every row the steps mapped. A few row
    keys (a small job's export) go as a list parameter: registering them as an Arrow table costs
    DuckDB 3-4 ms of CPU more (see DuckDBStore._stored_keys)."""
    params: list[Any] = [job_id, list(steps)]
    listed = row_keys is not None and len(row_keys) <= LISTED_KEYS
    rows = ""
    if row_keys is not None and listed:
        rows, params = "AND row_key IN (SELECT unnest($3::VARCHAR[]))", [*params, row_keys.to_pylist()]
    elif row_keys is not None:
        rows = "AND row_key IN (SELECT k FROM probe_rows)"
        db.register("probe_rows", pa.table({"k": row_keys}))
    try:
        return db.sql(
            "SELECT j.step, j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, r.model "
            "FROM (SELECT step, row_key, request_key FROM job_requests WHERE job_id = $1 "
            f"AND step IN (SELECT unnest($2::VARCHAR[])) {rows}) j LEFT JOIN results r USING (request_key)",
            params=params,
        ).to_arrow_table()
    finally:
        if row_keys is not None and not listed:
            db.unregister("probe_rows")


def _first_per_row(table: pa.Table) -> pa.Table:
    """Each (step, row_key) once, its first row (the map's former primary key)."""
    pairs = pc.binary_join_element_wise(table.column("step"), table.column("row_key"), "\x00")
    if pc.count_distinct(pairs, mode="all").as_py() == table.num_rows:
        return table
    numbered = pa.table({"p": pairs, "_row": pa.array(range(table.num_rows), pa.int64())})
    first = numbered.group_by("p", use_threads=False).aggregate([("_row", "min")]).column("_row_min")
    return table.take(pc.take(first, pc.sort_indices(first)))


# --- PostgreSQL --------------------------------------------------------------------------------


def pg_steps_with_requests(conn: Any, job_id: str, steps: Sequence[str]) -> set[str]:
    """One index probe per step (a DISTINCT would read every row of the job)."""
    rows = conn.execute(
        "SELECT s FROM unnest(%s::text[]) AS s WHERE EXISTS "
        "(SELECT 1 FROM job_requests j WHERE j.job_id = %s AND j.step = s)",
        [list(steps), job_id],
    ).fetchall()
    return {str(r[0]) for r in rows}


_PG_UPSERT = (
    "INSERT INTO job_requests (job_id, step, row_key, request_key) "
    "SELECT %s, s, r, k FROM unnest(%s::text[], %s::text[], %s::text[]) AS n(s, r, k) ORDER BY s, r "
    "ON CONFLICT (job_id, step, row_key) DO UPDATE SET request_key = EXCLUDED.request_key "
    "WHERE job_requests.request_key IS DISTINCT FROM EXCLUDED.request_key"
)


def pg_record(conn: Any, job_id: str, table: pa.Table, forget: Sequence[str]) -> None:
    if forget:
        conn.execute("DELETE FROM job_requests WHERE job_id = %s AND step = ANY(%s::text[])", [job_id, list(forget)])
    table = _first_per_row(table) if table.num_rows else table
    steps, rows, keys = (table.column(c).to_pylist() for c in ("step", "row_key", "request_key"))
    for start in range(0, len(rows), _CHUNK):
        part = slice(start, start + _CHUNK)
        conn.execute(_PG_UPSERT, [job_id, steps[part], rows[part], keys[part]])


def pg_results(conn: Any, job_id: str, steps: Sequence[str], row_keys: pa.Array | None) -> pa.Table:
    sql = (
        "SELECT j.step, j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, r.model "
        "FROM job_requests j LEFT JOIN results r USING (request_key) "
        "WHERE j.job_id = %s AND j.step = ANY(%s::text[])"
    )
    found: list[tuple[Any, ...]] = []
    if row_keys is None:
        found = conn.execute(sql, [job_id, list(steps)]).fetchall()
    else:
        values = [k for k in row_keys.to_pylist() if k is not None]
        for start in range(0, len(values), _CHUNK):
            part = values[start : start + _CHUNK]
            found += conn.execute(sql + " AND j.row_key = ANY(%s::text[])", [job_id, list(steps), part]).fetchall()
    columns = list(zip(*found)) if found else [()] * len(RESULT_COLUMNS)
    return pa.table({name: pa.array(list(col), pa.string()) for name, col in zip(RESULT_COLUMNS, columns)})
