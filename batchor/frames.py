"""DataFrames in and out: pandas, polars and Arrow tables as job input, results as the same type.

Input frames are written once to a content-addressed Parquet file under the state folder, so the
planner reads them like any other input and a saved plan can verify its input later. Results
for pandas keep the caller's index and dtypes, with the new columns appended.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchor.duck import SMALL_BYTES, attached, scratch_db
from batchor.errors import InputEmptyError, InputError
from batchor.file_modes import private_dir


def frame_kind(data: Any) -> str:
    """'pandas' | 'polars' | 'arrow' | 'path'."""
    if isinstance(data, (str, os.PathLike)):
        return "path"
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return "arrow"
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return "pandas"
    if module == "polars":
        return "polars"
    raise InputError(
        f"data: unsupported type {type(data).__name__}",
        hint="pass a pandas or polars DataFrame, a pyarrow Table, or a file path",
    )


def to_arrow(data: Any, kind: str) -> pa.Table:
    if kind == "arrow":
        return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    if kind == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    return data.to_arrow()


def materialize(data: Any, folder: Path) -> Path:
    """Write a frame to `folder/<content hash>.parquet` (reused when the same data comes again)."""
    table = to_arrow(data, frame_kind(data))
    if table.num_rows == 0:
        raise InputEmptyError(
            "data: the DataFrame has no rows",
            hint="pass data with at least one row (or data=None to read the spec's input)",
        )
    private_dir(folder)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    payload = sink.getvalue().to_pybytes()
    path = folder / f"{hashlib.sha256(payload).hexdigest()[:24]}.parquet"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    return path


def read_output(path: str | Path) -> pa.Table:
    """Any output file batchor writes, back as an Arrow table."""
    path = Path(path)
    with scratch_db(path.is_file() and path.stat().st_size <= SMALL_BYTES) as db:
        if path.suffix == ".duckdb":
            with attached(db, str(path), read_only=True) as out:
                return db.sql(f"SELECT * FROM {out}.results").to_arrow_table()
        reader = {
            ".parquet": "read_parquet",
            ".pq": "read_parquet",
            ".jsonl": "read_json_auto",
            ".json": "read_json_auto",
            ".ndjson": "read_json_auto",
        }.get(path.suffix, "read_csv_auto")
        return db.sql(f"SELECT * FROM {reader}('{path}')").to_arrow_table()


def as_kind(table: pa.Table, kind: str, original: Any = None, new_columns: list[str] | None = None) -> Any:
    """The result in the caller's type; for pandas, the caller's frame plus the new columns."""
    if kind == "pandas":
        frame = original.copy() if original is not None and len(original) == table.num_rows else None
        if frame is None:
            return table.to_pandas()
        for name in new_columns or []:
            frame[name] = table.column(name).to_pandas().to_numpy()
        return frame
    if kind == "polars":
        import polars as pl

        return pl.from_arrow(table)
    return table
