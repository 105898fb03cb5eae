"""The statements PostgresStore writes with (state/postgres_store.py): results, attempts and job
requests sent as one typed array per column (`unnest`), so a flush of thousands of rows is one
statement; the work items an answer closes; the run rows; the settings of each pooled connection.
Kept apart from the store so its transitions read as transactions, not as SQL text.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from batchor.state.base import RUN_COLUMNS, RunRecord, run_values

RESULT_TYPES = {
    "request_key": "text",
    "step": "text",
    "status": "text",
    "output": "text",
    "error_code": "text",
    "error": "text",
    "attempts": "int2",
    "input_tokens": "int4",
    "output_tokens": "int4",
    "cost_usd": "float8",
    "run_id": "text",
    "model": "text",
    "answered_by": "text",
}
ATTEMPT_TYPES = {
    "request_key": "text",
    "run_id": "text",
    "attempt": "int2",
    "outcome": "text",
    "status_code": "int2",
    "error": "text",
    "duration_ms": "int4",
    "raw": "bytea",
    "input_tokens": "int4",
    "output_tokens": "int4",
    "cost_usd": "float8",
    "estimated": "bool",
    "step": "text",
    "counted_input_tokens": "int4",
    "feedback": "text",
    "cache_read_tokens": "int4",
    "cache_write_tokens": "int4",
    "uncached_usd": "float8",
    "model": "text",
}


# A dead machine's connections are noticed by keepalives; a stuck client cannot hold locks for
# long, and no statement waits on a lock forever (the wait fails, is retried, then surfaces).
CONNECT_ARGS = {
    "connect_timeout": 10,
    "application_name": "batchor",
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
_SESSION_SETTINGS = ("SET lock_timeout = '60s'", "SET idle_in_transaction_session_timeout = '120s'")


def session_settings(dbapi_connection: Any, _record: Any) -> None:
    """Each new pooled connection's lock and idle-transaction timeouts."""
    for sql in _SESSION_SETTINGS:
        dbapi_connection.execute(sql)
    if not dbapi_connection.autocommit:
        dbapi_connection.commit()


def insert_run(conn: Any, run: RunRecord) -> None:
    """A run's row, started now (the database's clock)."""
    names = RUN_COLUMNS[:-2]
    conn.execute(
        f"INSERT INTO runs ({', '.join(names)}, started_at) VALUES ({', '.join(['%s'] * len(names))}, LOCALTIMESTAMP)",
        run_values(run, names),
    )


def update_run(conn: Any, run: RunRecord, *, final: bool) -> None:
    """A run's counters and status; `final` stamps its end."""
    names = RUN_COLUMNS[4:-2]
    sets = ", ".join(f"{c} = %s" for c in names)
    finished = ", finished_at = LOCALTIMESTAMP" if final else ""
    conn.execute(f"UPDATE runs SET {sets}{finished} WHERE run_id = %s", run_values(run, names) + [run.run_id])


def string_table(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> pa.Table:
    """Rows of text columns as an Arrow table (empty rows: the columns, no rows)."""
    columns = list(zip(*rows)) if rows else [()] * len(names)
    return pa.table({name: pa.array(list(col), pa.string()) for name, col in zip(names, columns)})


def _unnest(types: dict[str, str]) -> str:
    """Typed arrays, one per column, as rows numbered in their order (`ord`)."""
    arrays = ", ".join(f"%s::{t}[]" for t in types.values())
    return f"unnest({arrays}) WITH ORDINALITY AS n({', '.join(types)}, ord)"


_COLS = ", ".join(RESULT_TYPES)
# The last answer for a key wins (like DuckDB's INSERT OR REPLACE); rows go in key order so two
# flushes that overlap lock in the same order.
UPSERT_RESULTS = (
    f"INSERT INTO results ({_COLS}, finished_at) "
    f"SELECT DISTINCT ON (request_key) {_COLS}, LOCALTIMESTAMP FROM {_unnest(RESULT_TYPES)} "
    "ORDER BY request_key, ord DESC "
    "ON CONFLICT (request_key) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in list(RESULT_TYPES)[1:] + ["finished_at"])
)
# A succeeded answer closes the key's work items in every run; a failure only in its own run.
# The keys come as one array, found through the open-items index: joined to a set instead, a
# table without statistics yet was scanned whole at every flush.
CLOSE_WORK_ITEMS = (
    "UPDATE work_items w SET done = true WHERE w.request_key = ANY(%s::text[]) AND NOT w.done "
    "AND (w.request_key = ANY(%s::text[]) OR (w.request_key, w.run_id) IN "
    "(SELECT * FROM unnest(%s::text[], %s::text[])))"
)


def column_values(table: pa.Table, name: str) -> list[Any]:
    """A column's values, or nulls for one a caller's table leaves out (the model columns)."""
    return table.column(name).to_pylist() if name in table.schema.names else [None] * table.num_rows


def closing_args(keys: list[str], statuses: list[str], run_ids: list[str]) -> list[list[str]]:
    """`CLOSE_WORK_ITEMS`'s arguments: all keys, the succeeded ones, the failed ones with their runs."""
    failed = [(k, r) for k, s, r in zip(keys, statuses, run_ids) if s != "succeeded"]
    return [
        keys,
        [k for k, s in zip(keys, statuses) if s == "succeeded"],
        [k for k, _ in failed],
        [r for _, r in failed],
    ]


INSERT_ATTEMPTS = (
    f"INSERT INTO attempts ({', '.join(ATTEMPT_TYPES)}, created_at) "
    f"SELECT {', '.join(ATTEMPT_TYPES)}, LOCALTIMESTAMP FROM {_unnest(ATTEMPT_TYPES)} ORDER BY ord"
)
UPSERT_JOB_REQUESTS = (
    "INSERT INTO job_requests (job_id, step, row_key, request_key) "
    "SELECT %s, %s, r, k FROM unnest(%s::text[], %s::text[]) AS n(r, k) ORDER BY r "
    "ON CONFLICT (job_id, step, row_key) DO UPDATE SET request_key = EXCLUDED.request_key "
    "WHERE job_requests.request_key IS DISTINCT FROM EXCLUDED.request_key"
)
