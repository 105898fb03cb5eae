"""Candidate pairs of a `resolve:` job: the blocking rule run over the input rows.

A resolve job's step judges pairs of rows, not rows: before planning, the input rows are read
(the spec's `input`, its `sql`, `limit` and `sample` applied), the blocking rule pairs them, and
the pairs become the input the plan prices and the engine sends (so pairs are counted, cached,
batched and resumed like any rows). Each pair row holds both rows' columns as `a_<column>` and
`b_<column>`, keyed `pair` = `<a key> ~ <b key>`, the smaller key first. The rows themselves are
kept beside the pairs file, for the clusters written after the run (plan/clusters.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from batchor.duck import confined_db, duckdb
from batchor.errors import ResolveError
from batchor.spec.inputs import ROW_KEY, InputReader, input_source, sql_ident
from batchor.spec.model import ResolveSpec
from batchor.spec.pair_columns import PAIR_KEY


def input_rows(loaded: object) -> pa.Table:
    """The spec's input rows, each with its row key first."""
    reader = InputReader(input_source(loaded))
    try:
        return pa.Table.from_batches(list(reader.batches()))
    finally:
        reader.close()


def candidate_pairs(rows: pa.Table, resolve: ResolveSpec) -> pa.Table:
    """Every pair of rows the blocking rule joins, each once (the smaller row key as `a`)."""
    columns = [c for c in rows.column_names if c != ROW_KEY]
    if resolve.value not in columns:
        raise ResolveError(
            f"resolve.value: no input column '{resolve.value}'", hint=f"use one of: {', '.join(columns)}"
        )
    block = resolve.block
    joined = "a.__block = b.__block" if block.key is not None else f"({block.on})"
    select = [f"a.{ROW_KEY} || ' ~ ' || b.{ROW_KEY} AS {PAIR_KEY}"]
    select += [f"{side}.{ROW_KEY} AS {side}_key" for side in ("a", "b")]
    select += [f"{side}.{sql_ident(c)} AS {sql_ident(side + '_' + c)}" for side in ("a", "b") for c in columns]
    keyed = "SELECT * FROM input_rows" if block.key is None else f"SELECT *, ({block.key}) AS __block FROM input_rows"
    query = (
        f"WITH r AS ({keyed}) SELECT {', '.join(select)} FROM r a JOIN r b "
        f"ON a.{ROW_KEY} < b.{ROW_KEY} AND {joined} ORDER BY a.{ROW_KEY}, b.{ROW_KEY}"
    )
    db = confined_db()  # spec SQL: no file, no network (batchor/duck.py)
    try:
        db.register("input_rows", rows)
        pairs = db.sql(query).to_arrow_table()
    except duckdb.Error as exc:
        which = "resolve.block.key" if block.key is not None else "resolve.block.on"
        raise ResolveError(
            f"{which}: {str(exc).splitlines()[0][:300]}",
            hint="write a DuckDB expression over the input's columns (`on:` names the two rows a and b)",
        ) from None
    finally:
        db.unregister("input_rows")
        db.close()
    if pairs.num_rows == 0:
        raise ResolveError(
            f"resolve.block: the rule pairs none of the {rows.num_rows} row(s): nothing to judge",
            hint="loosen the blocking rule (a shorter key prefix, a lower similarity)",
        )
    return pairs


def rows_file(pairs_file: Path) -> Path:
    """Where the rows of a pairs file are kept (beside it)."""
    return pairs_file.with_name(pairs_file.stem + ".rows.parquet")
