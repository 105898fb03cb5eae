"""DuckDB state: the embedded default.

DuckDB admits one process per database file, so connections are short: each named transition
opens, commits and closes, which lets `batchor status` or `plan` read between an apply's flushes.
Exclusive apply is a separate advisory lock file (see `lock.py`).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pyarrow as pa

from batchor.errors import StateCorruptError, StateError, StateLockedError, StateVersionError
from batchor.private import private_dir
from batchor.state.base import RunRecord
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION

_RUN_COLUMNS = ("run_id", "job_id", "plan_id", "name", "status", "mocked", "requests", "succeeded",
                "failed", "cached", "skipped", "input_tokens", "output_tokens", "cost_usd",
                "paused_reason", "output_path", "plan_path", "started_at", "finished_at")


_PROCESS_LOCK = threading.RLock()


class DuckDBStore:
    """State in one DuckDB file, created owner-only."""

    def __init__(self, path: Path, *, connect_timeout_s: float = 30.0) -> None:
        self.path = path
        self.location = str(path)
        self.connect_timeout_s = connect_timeout_s
        self._held: duckdb.DuckDBPyConnection | None = None
        private_dir(path.parent)
        with self.connection() as db:
            self._migrate(db)
        _owner_only(path)

    # --- connections -----------------------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work (reused when a session is held).

        One at a time per process: DuckDB shares one database instance between a process's
        connections, and opening one while another thread closes the last one races."""
        with _PROCESS_LOCK:
            if self._held is not None:
                yield self._held
                return
            db = self._connect()
            try:
                yield db
            finally:
                db.close()

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one connection across several operations (e.g. the end of a run)."""
        with _PROCESS_LOCK:
            if self._held is not None:
                yield
                return
            self._held = self._connect()
            try:
                yield
            finally:
                self._held.close()
                self._held = None

    def _connect(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.005
        while True:
            try:
                return duckdb.connect(str(self.path))
            except duckdb.IOException as exc:
                text = str(exc)
                if "lock" not in text.lower():
                    raise _open_error(self.path, text) from None
                if time.monotonic() > deadline:
                    raise StateLockedError(
                        f"state {self.path} is held by another process", hint="wait for it to finish"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
            except duckdb.Error as exc:
                raise _open_error(self.path, str(exc)) from None

    def _migrate(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = _first(db.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'").fetchall())
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StateVersionError(
                f"state {self.path} has schema version {current}; this batchor knows up to {SCHEMA_VERSION}",
                hint="upgrade batchor, or use another --state",
            )
        for version, statements in MIGRATIONS:
            if version <= current:
                continue
            db.execute("BEGIN")
            for sql in statements:
                db.execute(sql)
            db.execute("INSERT OR REPLACE INTO batchor_meta VALUES ('schema_version', ?)", [str(version)])
            db.execute("COMMIT")

    # --- the cache -------------------------------------------------------------------------

    def cached_keys(self, keys: pa.Array) -> set[str]:
        if len(keys) == 0:
            return set()
        probe = pa.table({"k": keys})
        with self.connection() as db:
            db.register("probe", probe)
            rows = db.execute("SELECT r.request_key FROM results r JOIN probe p ON r.request_key = p.k "
                              "WHERE r.status = 'succeeded'").fetchall()
            db.unregister("probe")
        return {r[0] for r in rows}

    def cached_key_array(self, keys: pa.Array) -> pa.Array:
        """`cached_keys` as an Arrow array (each key once): a million cached keys never become
        Python strings, and a whole step is checked in one join instead of one per batch."""
        if len(keys) == 0:
            return pa.array([], pa.string())
        probe = pa.table({"k": keys})
        with self.connection() as db:
            db.register("probe", probe)
            found = db.sql("SELECT r.request_key FROM results r SEMI JOIN (SELECT DISTINCT k FROM probe) p "
                           "ON r.request_key = p.k WHERE r.status = 'succeeded'").to_arrow_table()
            db.unregister("probe")
        return found.column(0).combine_chunks().cast(pa.string())

    # --- transitions -----------------------------------------------------------------------

    def record_results(self, results: pa.Table, attempts: pa.Table | None = None) -> None:
        """Store a flush of finished requests and their attempts in one transaction."""
        with self.connection() as db:
            db.execute("BEGIN")
            db.register("new_results", results)
            db.execute("INSERT OR REPLACE INTO results SELECT request_key, step, status, output, error_code, "
                       "error, attempts, input_tokens, output_tokens, cost_usd, run_id, now() FROM new_results")
            db.unregister("new_results")
            if attempts is not None and attempts.num_rows:
                db.register("new_attempts", attempts)
                db.execute("INSERT INTO attempts SELECT request_key, run_id, attempt, outcome, status_code, error, "
                           "duration_ms, raw, now() FROM new_attempts")
                db.unregister("new_attempts")
            db.execute("COMMIT")

    def add_run_requests(self, job_id: str, step: str, table: pa.Table) -> None:
        """Record which request answers each row of a job's step (once per job)."""
        with self.connection() as db:
            db.execute("BEGIN")
            db.register("new_map", table)
            db.execute("INSERT OR REPLACE INTO job_requests SELECT ?, ?, row_key, request_key FROM new_map",
                       [job_id, step])
            db.unregister("new_map")
            db.execute("COMMIT")

    def has_job_requests(self, job_id: str, step: str) -> bool:
        with self.connection() as db:
            row = db.execute("SELECT 1 FROM job_requests WHERE job_id = ? AND step = ? LIMIT 1",
                             [job_id, step]).fetchall()
        return bool(row)

    def start_run(self, run: RunRecord) -> None:
        with self.connection() as db:
            values = [getattr(run, c) for c in _RUN_COLUMNS[:-2]]
            db.execute(f"INSERT INTO runs ({', '.join(_RUN_COLUMNS[:-2])}, started_at) "
                       f"VALUES ({', '.join('?' * (len(_RUN_COLUMNS) - 2))}, now())", values)

    def finish_run(self, run: RunRecord, *, final: bool = True) -> None:
        sets = ", ".join(f"{c} = ?" for c in _RUN_COLUMNS[4:-2])
        values = [getattr(run, c) for c in _RUN_COLUMNS[4:-2]]
        finished = ", finished_at = now()" if final else ""
        with self.connection() as db:
            db.execute(f"UPDATE runs SET {sets}{finished} WHERE run_id = ?", values + [run.run_id])

    def get_run(self, run_id: str | None) -> RunRecord | None:
        where, args = ("WHERE run_id = ? OR run_id LIKE ?", [run_id, f"{run_id}%"]) if run_id else ("", [])
        with self.connection() as db:
            row = db.execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs {where} "
                             "ORDER BY started_at DESC LIMIT 1", args).fetchall()
        row = _first(row)
        return RunRecord(**dict(zip(_RUN_COLUMNS, row))) if row else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self.connection() as db:
            rows = db.execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs ORDER BY started_at DESC LIMIT ?",
                              [limit]).fetchall()
        return [RunRecord(**dict(zip(_RUN_COLUMNS, r))) for r in rows]

    def failures_by_reason(self, job_id: str) -> dict[str, int]:
        with self.connection() as db:
            rows = db.execute(
                "SELECT r.error_code, count(*) FROM job_requests j JOIN results r USING (request_key) "
                "WHERE j.job_id = ? AND r.status = 'failed' GROUP BY 1 ORDER BY 2 DESC", [job_id]).fetchall()
        return {code or "unknown": n for code, n in rows}

    def job_results(self, job_id: str, step: str) -> pa.Table:
        """Per row of a job's step: request key and its result (null when not answered yet)."""
        with self.connection() as db:
            return db.sql(
                "SELECT j.row_key, j.request_key, r.status, r.output, r.error_code, r.error "
                "FROM job_requests j LEFT JOIN results r USING (request_key) "
                "WHERE j.job_id = ? AND j.step = ?", params=[job_id, step]).to_arrow_table()

    def results_for_keys(self, keys: pa.Array) -> pa.Table:
        probe = pa.table({"k": keys})
        with self.connection() as db:
            db.register("probe", probe)
            table = db.sql("SELECT r.request_key, r.status, r.output FROM results r "
                           "JOIN probe p ON r.request_key = p.k").to_arrow_table()
            db.unregister("probe")
        return table

    def list_batches(self, job_id: str) -> list[dict[str, Any]]:
        """A job's provider batches for `status` (see state/batches.py)."""
        from batchor.state.batches import BatchLedger, batch_summary

        return [batch_summary(b) for b in BatchLedger(self).job_batches(job_id)]

    def close(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None

    def size_bytes(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def execute(self, sql: str, args: list[Any] | None = None) -> list[tuple]:
        """Read-only queries for operator commands."""
        with self.connection() as db:
            return db.execute(sql, args or []).fetchall()


def _first(rows: list[tuple]) -> tuple | None:
    """First row of a fully fetched result (DuckDB 2 refuses new work while a result is open)."""
    return rows[0] if rows else None


def _open_error(path: Path, text: str) -> StateError:
    lowered = text.lower()
    if "not a valid duckdb" in lowered or "corrupt" in lowered or "invalid" in lowered or "magic" in lowered:
        return StateCorruptError(f"state {path} is not a readable batchor state file: {text[:200]}",
                                 hint="restore it from a backup, or point --state at a new file")
    if "version" in lowered:
        return StateVersionError(f"state {path} was written by a newer DuckDB/batchor: {text[:200]}",
                                 hint="upgrade batchor")
    return StateError(f"cannot open state {path}: {text[:200]}")


def _owner_only(path: Path) -> None:
    for candidate in (path, Path(str(path) + ".wal")):
        if candidate.exists():
            os.chmod(candidate, 0o600)
