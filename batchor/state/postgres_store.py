"""PostgreSQL state: the same contract as `DuckDBStore`, shared by many workers on many machines.

Selected by a `postgresql://` (or `postgres://`) location; SQLAlchemy owns the URL and the
connection pool, psycopg 3 runs the SQL. Every named transition is one transaction. Bulk data
travels as one array per column (`unnest`), so a flush of thousands of results is one statement.
Recording results also closes the matching work items (see `leases.py`) in the same transaction:
a claim is done exactly when its answer is stored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import Any, Callable, Iterator, TypeVar

import pyarrow as pa

from batchor.errors import StateError, StateVersionError
from batchor.state import step_maps
from batchor.state.base import RUN_COLUMNS, RunRecord, StateStore, follow_fallbacks_sql, run_from_row
from batchor.state.pg_migrations import MIGRATIONS, MIGRATIONS_TABLE, SCHEMA_VERSION
from batchor.state.pg_session import PgSession
from batchor.state.pg_sql import (
    ATTEMPT_TYPES,
    CLOSE_WORK_ITEMS,
    CONNECT_ARGS,
    INSERT_ATTEMPTS,
    RESULT_TYPES,
    UPSERT_JOB_REQUESTS,
    UPSERT_RESULTS,
    closing_args,
    column_values,
    insert_run,
    session_settings,
    string_table,
    update_run,
)

PG_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_CHUNK = 50_000  # keys per array parameter
_RETRIES = 5  # deadlocks between concurrent flushes are retried, never surfaced
T = TypeVar("T")


def is_postgres(location: str) -> bool:
    return location.startswith(PG_SCHEMES)


def without_password(location: str) -> str:
    """`location` as stored and shown: a database URL loses its password (in the user part or a
    `password=` parameter). The password comes back at run time from the URL given then,
    PGPASSWORD or ~/.pgpass (libpq reads both). Other locations (files) are returned unchanged."""
    if not is_postgres(location):
        return location
    from sqlalchemy.engine import make_url

    url = make_url(location)
    query = {k: v for k, v in url.query.items() if k.lower() != "password"}
    return url._replace(password=None).set(query=query).render_as_string(hide_password=False)


def normalize_url(location: str) -> str:
    """postgres:// and postgresql:// name the psycopg 3 driver for SQLAlchemy."""
    for scheme in ("postgresql://", "postgres://"):
        if location.startswith(scheme):
            return "postgresql+psycopg://" + location[len(scheme) :]
    return location


class PostgresStore(StateStore):
    """State in a PostgreSQL database; safe for any number of processes at once."""

    shared = True  # several applies may work on one run together (see engine/workers.py)

    def __init__(self, url: str, *, pool_size: int = 4, migrate: bool = True) -> None:
        from sqlalchemy import create_engine, event
        from sqlalchemy.engine import make_url

        parsed = make_url(normalize_url(url))
        self.location = without_password(url)
        self._engine = create_engine(
            parsed,
            isolation_level="AUTOCOMMIT",
            pool_pre_ping=True,
            pool_size=pool_size,
            max_overflow=8,
            connect_args=CONNECT_ARGS,
        )
        event.listen(self._engine, "connect", session_settings)
        self._local = threading.local()
        if migrate:  # without: read what is there (a migration's source), creating nothing
            self._migrate()

    # --- connections -----------------------------------------------------------------------

    @contextmanager
    def pg(self) -> Iterator[Any]:
        """A pooled psycopg connection for the state modules (autocommit; `conn.transaction()` for one)."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        raw = self._raw()
        try:
            yield raw.driver_connection
        finally:
            raw.close()

    def _raw(self) -> Any:
        import psycopg
        import sqlalchemy.exc

        try:
            return self._engine.raw_connection()
        except (sqlalchemy.exc.OperationalError, psycopg.OperationalError) as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
            raise StateError(
                f"cannot connect to the PostgreSQL state {self.location}: {reason}",
                hint="check the URL in --state / BATCHOR_STATE / `state:` and that the server accepts this user",
            ) from None

    @contextmanager
    def connection(self) -> Iterator[PgSession]:
        """DuckDB-style access (`?` placeholders, `register()`) for SQL in the portable subset."""
        with self.pg() as conn:
            session = PgSession(conn)
            try:
                yield session
            finally:
                if conn.info.transaction_status != 0:  # left inside a transaction by an error
                    conn.rollback()

    def kept_attached(self, seconds: float) -> AbstractContextManager[None]:
        """Connections come from a pool here: nothing to keep."""
        return nullcontext()

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one connection (per thread) across several operations."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        raw = self._raw()
        self._local.conn = raw.driver_connection
        try:
            yield
        finally:
            self._local.conn = None
            raw.close()

    def _retry(self, work: Callable[[Any], T]) -> T:
        import psycopg.errors

        for attempt in range(_RETRIES):
            try:
                with self.pg() as conn, conn.transaction():
                    return work(conn)
            except (
                psycopg.errors.DeadlockDetected,
                psycopg.errors.SerializationFailure,
                psycopg.errors.LockNotAvailable,
            ):
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def _migrate(self) -> None:
        with self.pg() as conn:
            if self._applied(conn) == SCHEMA_VERSION:
                return
            with conn.transaction():
                # Concurrent first-time setup: one process migrates, the others wait and then see it done.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('batchor:migrations'))")
                conn.execute(MIGRATIONS_TABLE)
                current = self._applied(conn)
                for version, name, statements in MIGRATIONS:
                    if version <= current:
                        continue
                    for sql in statements:
                        conn.execute(sql)
                    conn.execute("INSERT INTO batchor_migrations (version, name) VALUES (%s, %s)", [version, name])

    def _applied(self, conn: Any) -> int:
        exists = conn.execute("SELECT to_regclass('batchor_migrations') IS NOT NULL").fetchone()[0]
        if not exists:
            return 0
        current = conn.execute("SELECT coalesce(max(version), 0) FROM batchor_migrations").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise StateVersionError(
                f"state {self.location} has schema version {current}; this batchor knows up to {SCHEMA_VERSION}",
                hint="upgrade batchor on this machine (every worker must run the same version)",
            )
        return int(current)

    def schema_version(self) -> int:
        with self.pg() as conn:
            return self._applied(conn)

    # --- the cache -------------------------------------------------------------------------

    def cached_keys(self, keys: pa.Array) -> set[str]:
        found: set[str] = set()
        values = [k for k in keys.to_pylist() if k is not None]
        with self.pg() as conn:
            for start in range(0, len(values), _CHUNK):
                rows = conn.execute(
                    "SELECT request_key FROM results WHERE request_key = ANY(%s::text[]) "
                    "AND (status = 'succeeded' OR answered_by IS NOT NULL)",
                    [values[start : start + _CHUNK]],
                ).fetchall()
                found.update(r[0] for r in rows)
        return found

    def cached_key_array(self, keys: pa.Array) -> pa.Array:
        """`cached_keys` as an Arrow array, each key once (what `state/cache.py` asks first)."""
        return pa.array(sorted(self.cached_keys(keys)), pa.string())

    def failed_key_array(self, keys: pa.Array, codes: Sequence[str]) -> pa.Array:
        """Which of these keys (each once) are stored as failed with one of `codes`."""
        values = [k for k in keys.to_pylist() if k is not None]
        found: set[str] = set()
        with self.pg() as conn:
            for start in range(0, len(values) if codes else 0, _CHUNK):
                rows = conn.execute(
                    "SELECT request_key FROM results WHERE request_key = ANY(%s::text[]) "
                    "AND status = 'failed' AND answered_by IS NULL AND error_code = ANY(%s::text[])",
                    [values[start : start + _CHUNK], list(codes)],
                ).fetchall()
                found.update(r[0] for r in rows)
        return pa.array(sorted(found), pa.string())

    # --- transitions -----------------------------------------------------------------------

    def record_results(self, results: pa.Table, attempts: pa.Table | None = None) -> None:
        """Store a flush of finished requests and their attempts, and close their work items, in one transaction."""
        result_cols = [column_values(results, name) for name in RESULT_TYPES]
        attempt_cols = (
            [column_values(attempts, name) for name in ATTEMPT_TYPES]
            if attempts is not None and attempts.num_rows
            else None
        )

        def work(conn: Any) -> None:
            if results.num_rows:
                conn.execute(UPSERT_RESULTS, result_cols)
                conn.execute(CLOSE_WORK_ITEMS, closing_args(result_cols[0], result_cols[2], result_cols[10]))
            if attempt_cols is not None:
                conn.execute(INSERT_ATTEMPTS, attempt_cols)

        self._retry(work)

    def add_run_requests(self, job_id: str, step: str, table: pa.Table) -> None:
        """Record which request answers each row of a job's step."""
        rows, keys = table.column("row_key").to_pylist(), table.column("request_key").to_pylist()
        for start in range(0, len(rows), _CHUNK):
            args = [job_id, step, rows[start : start + _CHUNK], keys[start : start + _CHUNK]]
            self._retry(partial(_execute, UPSERT_JOB_REQUESTS, args))

    def forget_run_requests(self, job_id: str, step: str) -> None:
        """Drop a job step's row map before it is recorded again in full (rows may have gone)."""
        self._retry(
            lambda conn: conn.execute("DELETE FROM job_requests WHERE job_id = %s AND step = %s", [job_id, step])
        )

    def follow_fallbacks(self, job_id: str, steps: Sequence[str]) -> None:
        if steps:
            self._retry(lambda conn: conn.execute(follow_fallbacks_sql(len(steps), "%s"), [job_id, *steps]))

    def has_job_requests(self, job_id: str, step: str) -> bool:
        with self.pg() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM job_requests WHERE job_id = %s AND step = %s LIMIT 1", [job_id, step]
                ).fetchone()
                is not None
            )

    def steps_with_requests(self, job_id: str, steps: Sequence[str]) -> set[str]:
        with self.pg() as conn:
            return step_maps.pg_steps_with_requests(conn, job_id, steps)

    def record_step_requests(self, job_id: str, table: pa.Table, forget: Sequence[str] = ()) -> None:
        self._retry(partial(step_maps.pg_record, job_id=job_id, table=table, forget=forget))

    def job_results_for_steps(self, job_id: str, steps: Sequence[str], row_keys: pa.Array | None = None) -> pa.Table:
        with self.pg() as conn:
            return step_maps.pg_results(conn, job_id, steps, row_keys)

    def start_run(self, run: RunRecord) -> None:
        with self.pg() as conn:
            insert_run(conn, run)

    def finish_run(self, run: RunRecord, *, final: bool = True) -> None:
        with self.pg() as conn:
            update_run(conn, run, final=final)

    def get_run(self, run_id: str | None) -> RunRecord | None:
        where, args = ("WHERE run_id = %s OR run_id LIKE %s", [run_id, f"{run_id}%"]) if run_id else ("", [])
        with self.pg() as conn:
            row = conn.execute(
                f"SELECT {', '.join(RUN_COLUMNS)} FROM runs {where} ORDER BY started_at DESC LIMIT 1", args
            ).fetchone()
        return run_from_row(row) if row else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self.pg() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY started_at DESC LIMIT %s", [limit]
            ).fetchall()
        return [run_from_row(r) for r in rows]

    def failures_by_reason(self, job_id: str) -> dict[str, int]:
        with self.pg() as conn:
            rows = conn.execute(
                "SELECT r.error_code, count(*) FROM job_requests j JOIN results r USING (request_key) "
                "WHERE j.job_id = %s AND r.status = 'failed' GROUP BY 1 ORDER BY 2 DESC",
                [job_id],
            ).fetchall()
        return {code or "unknown": n for code, n in rows}

    def job_results(self, job_id: str, step: str) -> pa.Table:
        """Per row of a job's step: request key and its result (null when not answered yet)."""
        with self.pg() as conn:
            rows = conn.execute(
                "SELECT j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, r.model "
                "FROM job_requests j LEFT JOIN results r USING (request_key) "
                "WHERE j.job_id = %s AND j.step = %s",
                [job_id, step],
            ).fetchall()
        return string_table(("row_key", "request_key", "status", "output", "error_code", "error", "model"), rows)

    def job_results_for_rows(self, job_id: str, step: str, row_keys: pa.Array) -> pa.Table:
        values = [k for k in row_keys.to_pylist() if k is not None]
        rows: list[tuple[Any, ...]] = []
        with self.pg() as conn:
            for start in range(0, len(values), _CHUNK):
                rows += conn.execute(
                    "SELECT j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, r.model "
                    "FROM job_requests j LEFT JOIN results r USING (request_key) "
                    "WHERE j.job_id = %s AND j.step = %s AND j.row_key = ANY(%s::text[])",
                    [job_id, step, values[start : start + _CHUNK]],
                ).fetchall()
        return string_table(("row_key", "request_key", "status", "output", "error_code", "error", "model"), rows)

    def results_for_keys(self, keys: pa.Array) -> pa.Table:
        values = [k for k in keys.to_pylist() if k is not None]
        rows: list[tuple[Any, ...]] = []
        with self.pg() as conn:
            for start in range(0, len(values), _CHUNK):
                rows += conn.execute(
                    "SELECT r.request_key, coalesce(f.status, r.status), coalesce(f.output, r.output) FROM results r "
                    "LEFT JOIN results f ON f.request_key = r.answered_by AND f.status = 'succeeded' "
                    "WHERE r.request_key = ANY(%s::text[])",
                    [values[start : start + _CHUNK]],
                ).fetchall()
        return string_table(("request_key", "status", "output"), rows)

    def list_batches(self, job_id: str) -> list[dict[str, Any]]:
        """A job's provider batches for `status` (see state/batches.py)."""
        from batchor.state.batches import BatchLedger, batch_summary

        return [batch_summary(b) for b in BatchLedger(self).job_batches(job_id)]

    def list_workers(self, run_id: str) -> list[dict[str, Any]]:
        """The workers of a shared run for `status` (see state/leases.py)."""
        from batchor.state.leases import LeaseBook

        return LeaseBook(self, "", 0).list_workers(run_id)

    def live_counts(self, run_id: str) -> dict[str, Any]:
        from batchor.state.leases import LeaseBook

        return LeaseBook(self, "", 0).live_counts(run_id)

    def close(self) -> None:
        self._engine.dispose()

    def execute(self, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Operator queries in the portable subset (`?` placeholders)."""
        with self.connection() as db:
            return db.execute(sql, args or []).fetchall()


def _execute(sql: str, args: list[Any], conn: Any) -> Any:
    """One statement on `conn`, for `_retry` (a partial of it binds the loop's values)."""
    return conn.execute(sql, args)
