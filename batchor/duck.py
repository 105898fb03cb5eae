"""In-memory DuckDB connections that never draw a progress bar.

DuckDB draws one on stdout for any query running over two seconds (a big input, a busy machine),
which would corrupt `--json` output and the plan text; every connection batchor opens comes from
here so none does.
"""

from __future__ import annotations

import duckdb


def memory_db() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect(":memory:")
    db.execute("SET enable_progress_bar = false")
    return db
