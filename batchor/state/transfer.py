"""Move state between backends in bulk (`batchor state migrate --from A --to B`).

Runs, answers (the cache), row -> request maps, attempts and provider batches are copied table by
table in chunks of Arrow record batches. Rows the target already has are skipped (by primary key,
or by every identifying column for tables without one), so a migration can be repeated or resumed.
Coordination tables of live workers (PostgreSQL only) are not state worth moving.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from batchor.errors import StateError
from batchor.state.base import StateStore
from batchor.state.pg_session import arrow_rows, copy_rows
from batchor.state.postgres_store import PostgresStore

# In dependency-free order; the identifying columns decide "already there".
TABLES: dict[str, tuple[str, ...]] = {
    "runs": ("run_id",),
    "results": ("request_key",),
    "job_requests": ("job_id", "step", "row_key"),
    "attempts": ("request_key", "run_id", "attempt", "created_at"),
    "batches": ("batch_id",),
    "batch_requests": ("batch_id", "request_key"),
    "run_steps": ("run_id", "step"),
}
CHUNK_ROWS = 50_000


def copy_state(source: Any, target: Any, *, chunk_rows: int = CHUNK_ROWS) -> dict[str, dict[str, int]]:
    """Copy every known table of `source` into `target`; per table: rows read and rows added."""
    if source.location == target.location:
        raise StateError("--from and --to are the same state", hint="name two different states")
    report: dict[str, dict[str, int]] = {}
    for table, keys in TABLES.items():
        columns = [c for c in _columns(target, table) if c in set(_columns(source, table))]
        if not columns:
            continue
        read = added = 0
        for chunk in _read(source, table, columns, chunk_rows):
            read += chunk.num_rows
            added += _write(target, table, columns, [k for k in keys if k in columns], chunk)
        report[table] = {"read": read, "added": added}
    return report


def _columns(store: StateStore, table: str) -> list[str]:
    rows = store.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "AND table_schema = current_schema() ORDER BY ordinal_position",
        [table],
    )
    return [r[0] for r in rows]


def _read(store: StateStore, table: str, columns: list[str], chunk_rows: int) -> Iterator[pa.Table]:
    names = ", ".join(columns)
    if isinstance(store, PostgresStore):
        with store.pg() as conn, conn.transaction(), conn.cursor(name="batchor_transfer") as cur:
            cur.execute(f"SELECT {names} FROM {table}")
            while rows := cur.fetchmany(chunk_rows):
                yield pa.table({c: pa.array([r[i] for r in rows]) for i, c in enumerate(columns)})
        return
    with store.connection() as db:
        for batch in db.sql(f"SELECT {names} FROM {table}").to_arrow_reader(chunk_rows):
            yield pa.Table.from_batches([batch])


def _write(store: StateStore, table: str, columns: list[str], keys: list[str], chunk: pa.Table) -> int:
    names = ", ".join(columns)
    match = " AND ".join(f"t.{k} IS NOT DISTINCT FROM s.{k}" for k in keys) or "FALSE"
    insert = (
        f"INSERT INTO {table} ({names}) SELECT {names} FROM incoming s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {match})"
    )
    if isinstance(store, PostgresStore):
        with store.pg() as conn, conn.transaction():
            # The staging table takes the target's column types, so COPY parses each value as its column.
            conn.execute(f"CREATE TEMP TABLE incoming ON COMMIT DROP AS SELECT {names} FROM {table} WITH NO DATA")
            copy_rows(conn, "incoming", columns, arrow_rows(chunk))
            return int(conn.execute(insert).rowcount)
    with store.connection() as db:
        db.execute("BEGIN")
        db.register("incoming", chunk)
        added = db.execute(insert).fetchall()
        db.unregister("incoming")
        db.execute("COMMIT")
    return int(added[0][0]) if added else 0
