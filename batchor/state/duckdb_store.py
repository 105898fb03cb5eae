"""DuckDB state: the embedded default.

DuckDB admits one process per database file, so the file is attached only for each unit of work
(or a series of them), which lets `batchor status` or `plan` read between an apply's flushes: see
`duckdb_file.py`. Exclusive apply is a separate advisory lock file (see `lock.py`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from batchor.duck import SMALL_ROWS, duckdb, one_thread
from batchor.errors import ForeignStateError, StateVersionError, as_disk_full
from batchor.file_modes import private_dir
from batchor.state import step_maps
from batchor.state.base import RUN_COLUMNS, RunRecord, StateStore, follow_fallbacks_sql, run_from_row, run_values
from batchor.state.duckdb_file import _PROCESS_LOCK, AttachedFile, corrupt_state, is_corruption
from batchor.state.migrations import MIGRATIONS, SCHEMA_VERSION
from batchor.state.new_state import made_from_template
from batchor.state.open_check import checked_before, remember_checked
from batchor.state.step_maps import LISTED_KEYS

_MODEL = "r.model"  # which model answered, read with each result


class DuckDBStore(StateStore):
    """State in one DuckDB file, created owner-only."""

    def __init__(self, path: Path, *, connect_timeout_s: float = 30.0) -> None:
        self.path = path
        self.location = str(path)
        self.connect_timeout_s = connect_timeout_s
        self._file = AttachedFile(path, connect_timeout_s)
        private_dir(path.parent)
        if not path.exists() and made_from_template(path):
            remember_checked(path)  # a copy of a new state this process made and checked
        if not checked_before(path):
            with self.connection() as db:
                self._migrate(db)
                self._check_length(db)
            remember_checked(path)
        _owner_only(path)

    # --- connections -----------------------------------------------------------------------

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work (the held one inside a session), the state file
        attached only meanwhile. One at a time per process: they share the host instance."""
        with _PROCESS_LOCK, self._corruption_reported(), self._file.unit() as db:
            yield db

    @contextmanager
    def _corruption_reported(self) -> Iterator[None]:
        """A damaged block met by any query becomes `state_corrupt` (DuckDB checks each block's
        checksum as it reads it), whatever command was running."""
        try:
            yield
        except duckdb.Error as exc:
            if not is_corruption(str(exc)):
                raise
            raise corrupt_state(self.path, str(exc)) from None

    @contextmanager
    def session(self) -> Iterator[None]:
        """Keep the file attached across several operations (e.g. the end of a run)."""
        with self._file.unit():
            yield

    def kept_attached(self, seconds: float) -> AbstractContextManager[None]:
        """See AttachedFile.kept: an apply's flushes skip most attach/checkpoint cycles."""
        return self._file.kept(seconds)

    def _migrate(self, db: duckdb.DuckDBPyConnection) -> None:
        """Bring the file to SCHEMA_VERSION: the missing migrations in one transaction, so a file
        is at one version or the next, never in between (and a new file is made in ~20 ms, not 45:
        each commit writes to the WAL)."""
        self._refuse_foreign(db)
        db.execute("CREATE TABLE IF NOT EXISTS batchor_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = _first(db.execute("SELECT value FROM batchor_meta WHERE key = 'schema_version'").fetchall())
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StateVersionError(
                f"state {self.path} has schema version {current}; this batchor knows up to {SCHEMA_VERSION}",
                hint="upgrade batchor, or use another --state",
            )
        missing = [sql for version, statements in MIGRATIONS if version > current for sql in statements]
        if not missing:
            return
        db.execute("BEGIN")
        for sql in missing:
            db.execute(sql)
        db.execute("INSERT OR REPLACE INTO batchor_meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        db.execute("COMMIT")

    def _refuse_foreign(self, db: duckdb.DuckDBPyConnection) -> None:
        """A DuckDB file with tables but no `batchor_meta` is someone else's database: batchor's
        tables are not written into it (a mistyped --state would mix them with the user's data)."""
        tables = db.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
            "AND NOT internal ORDER BY 1"
        ).fetchall()
        names = [t[0] for t in tables]
        if names and "batchor_meta" not in names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise ForeignStateError(
                f"{self.path} is a DuckDB database batchor did not create (tables: {shown}); "
                "batchor will not write its state into it",
                hint="point --state (or `state:`) at a new file or at a state batchor made, e.g. .batchor/state.duckdb",
            )

    def _check_length(self, db: duckdb.DuckDBPyConnection) -> None:
        """A truncated file is found on open: shorter than the blocks in use (free blocks at the
        end may lie past the end of the file, so only the used ones are counted)."""
        if Path(str(self.path) + ".wal").exists():
            return  # blocks still in the WAL are not in the file yet
        row = _first(
            db.execute(
                "SELECT block_size, used_blocks FROM pragma_database_size() WHERE database_name = ?", [self._file.alias]
            ).fetchall()
        )
        if row is None:
            return
        expected, actual = _HEADER_BYTES + int(row[0]) * int(row[1]), self.path.stat().st_size
        if actual < expected:
            raise corrupt_state(
                self.path, f"the file is truncated: {actual:,} bytes of the {expected:,} it should hold"
            )

    # --- the cache -------------------------------------------------------------------------

    def cached_keys(self, keys: pa.Array) -> set[str]:
        return set(self.cached_key_array(keys).to_pylist())

    def cached_key_array(self, keys: pa.Array) -> pa.Array:
        """`cached_keys` as an Arrow array (each key once): a million cached keys never become
        Python strings, and a whole step is checked in one join instead of one per batch."""
        if len(keys) == 0:
            return pa.array([], pa.string())
        return self._stored_keys(keys, "r.status = 'succeeded' OR r.answered_by IS NOT NULL", {})

    def failed_key_array(self, keys: pa.Array, codes: Sequence[str]) -> pa.Array:
        """Which of these keys (each once) are stored as failed with one of `codes`."""
        if len(keys) == 0 or not codes:
            return pa.array([], pa.string())
        return self._stored_keys(
            keys,
            "r.status = 'failed' AND r.answered_by IS NULL AND list_contains($codes, r.error_code)",
            {"codes": list(codes)},
        )

    def _stored_keys(self, keys: pa.Array, where: str, params: dict[str, Any]) -> pa.Array:
        """The keys among `keys` whose stored result meets `where`. Up to `LISTED_KEYS` keys go as
        one list parameter: registering an Arrow table as the probe costs DuckDB 3-4 ms of CPU more
        per query, and every plan and apply asks two such queries. More are joined as Arrow."""
        with self.connection() as db:
            if len(keys) <= LISTED_KEYS:
                rows = db.execute(
                    "SELECT r.request_key FROM results r WHERE r.request_key IN "
                    f"(SELECT unnest($keys::VARCHAR[])) AND ({where})",
                    {**params, "keys": keys.to_pylist()},
                ).fetchall()
                return pa.array([row[0] for row in rows], pa.string())
            db.register("probe", pa.table({"k": keys}))
            found = db.sql(
                "SELECT r.request_key FROM results r SEMI JOIN (SELECT DISTINCT k FROM probe) p "
                f"ON r.request_key = p.k WHERE {where}",
                params=params or None,
            ).to_arrow_table()
            db.unregister("probe")
        return found.column(0).combine_chunks().cast(pa.string())

    # --- transitions -----------------------------------------------------------------------

    def record_results(self, results: pa.Table, attempts: pa.Table | None = None) -> None:
        """Store a flush of finished requests and their attempts in one transaction.

        A key's new answer replaces its stored one (the first, if a flush holds a key twice). On a
        full disk the first write to fail is usually the checkpoint DuckDB makes as the file is
        detached, after the commit reached the WAL: that DiskFullError says `stored`."""
        committed = False
        try:
            with self.connection() as db:
                self._write_results(db, results, attempts)
                committed = True
        except Exception as exc:  # committed: its rows are in the WAL, read back on the next attach
            full = as_disk_full(exc, self.location)
            if full is None:
                raise
            full.stored = committed  # writing them again would store their attempts twice
            raise full from exc

    def _write_results(self, db: duckdb.DuckDBPyConnection, results: pa.Table, attempts: pa.Table | None) -> None:
        db.execute("BEGIN")
        db.register("new_results", _first_per_key(results, "request_key"))
        db.execute("DELETE FROM results WHERE request_key IN (SELECT request_key FROM new_results)")
        columns = ", ".join(results.schema.names)
        db.execute(f"INSERT INTO results ({columns}, finished_at) SELECT {columns}, now() FROM new_results")
        db.unregister("new_results")
        if attempts is not None and attempts.num_rows:
            db.register("new_attempts", attempts)
            columns = ", ".join(attempts.schema.names)
            db.execute(f"INSERT INTO attempts ({columns}, created_at) SELECT {columns}, now() FROM new_attempts")
            db.unregister("new_attempts")
        db.execute("COMMIT")

    def add_run_requests(self, job_id: str, step: str, table: pa.Table) -> None:
        """Record which request answers each row of a job's step (a row's new mapping replaces its old)."""
        with self.connection() as db:
            db.execute("BEGIN")
            db.register("new_map", _first_per_key(table, "row_key"))
            db.execute(
                "DELETE FROM job_requests WHERE job_id = ? AND step = ? AND row_key IN (SELECT row_key FROM new_map)",
                [job_id, step],
            )
            db.execute("INSERT INTO job_requests SELECT ?, ?, row_key, request_key FROM new_map", [job_id, step])
            db.unregister("new_map")
            db.execute("COMMIT")

    def forget_run_requests(self, job_id: str, step: str) -> None:
        """Drop a job step's row map before it is recorded again in full (rows may have gone)."""
        with self.connection() as db:
            db.execute("DELETE FROM job_requests WHERE job_id = ? AND step = ?", [job_id, step])

    def follow_fallbacks(self, job_id: str, steps: Sequence[str]) -> None:
        if steps:
            with self.connection() as db:
                db.execute(follow_fallbacks_sql(len(steps), "?"), [job_id, *steps])

    def has_job_requests(self, job_id: str, step: str) -> bool:
        with self.connection() as db:
            row = db.execute(
                "SELECT 1 FROM job_requests WHERE job_id = ? AND step = ? LIMIT 1", [job_id, step]
            ).fetchall()
        return bool(row)

    def steps_with_requests(self, job_id: str, steps: Sequence[str]) -> set[str]:
        with self.connection() as db:
            return step_maps.duck_steps_with_requests(db, job_id, steps)

    def record_step_requests(self, job_id: str, table: pa.Table, forget: Sequence[str] = ()) -> None:
        with self.connection() as db:
            step_maps.duck_record(db, job_id, table, forget)

    def job_results_for_steps(self, job_id: str, steps: Sequence[str], row_keys: pa.Array | None = None) -> pa.Table:
        big = row_keys is None or len(row_keys) * len(steps) > SMALL_ROWS
        with self.connection() as db, one_thread(db) if big else nullcontext():
            return step_maps.duck_results(db, job_id, steps, row_keys)

    def start_run(self, run: RunRecord) -> None:
        with self.connection() as db:
            values = run_values(run, RUN_COLUMNS[:-2])
            db.execute(
                f"INSERT INTO runs ({', '.join(RUN_COLUMNS[:-2])}, started_at) "
                f"VALUES ({', '.join('?' * (len(RUN_COLUMNS) - 2))}, now())",
                values,
            )

    def finish_run(self, run: RunRecord, *, final: bool = True) -> None:
        sets = ", ".join(f"{c} = ?" for c in RUN_COLUMNS[4:-2])
        values = run_values(run, RUN_COLUMNS[4:-2])
        finished = ", finished_at = now()" if final else ""
        with self.connection() as db:
            db.execute(f"UPDATE runs SET {sets}{finished} WHERE run_id = ?", values + [run.run_id])

    def get_run(self, run_id: str | None) -> RunRecord | None:
        where, args = ("WHERE run_id = ? OR run_id LIKE ?", [run_id, f"{run_id}%"]) if run_id else ("", [])
        with self.connection() as db:
            row = db.execute(
                f"SELECT {', '.join(RUN_COLUMNS)} FROM runs {where} ORDER BY started_at DESC LIMIT 1", args
            ).fetchall()
        first = _first(row)
        return run_from_row(first) if first else None

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self.connection() as db:
            rows = db.execute(
                f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY started_at DESC LIMIT ?", [limit]
            ).fetchall()
        return [run_from_row(r) for r in rows]

    def failures_by_reason(self, job_id: str) -> dict[str, int]:
        with self.connection() as db:
            rows = db.execute(
                "SELECT r.error_code, count(*) FROM job_requests j JOIN results r USING (request_key) "
                "WHERE j.job_id = ? AND r.status = 'failed' GROUP BY 1 ORDER BY 2 DESC",
                [job_id],
            ).fetchall()
        return {code or "unknown": n for code, n in rows}

    def job_results(self, job_id: str, step: str) -> pa.Table:
        """Per row of a job's step: request key and its result (null when not answered yet)."""
        with self.connection() as db:
            return db.sql(
                f"SELECT j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, {_MODEL} "
                "FROM job_requests j LEFT JOIN results r USING (request_key) "
                "WHERE j.job_id = ? AND j.step = ?",
                params=[job_id, step],
            ).to_arrow_table()

    def job_results_for_rows(self, job_id: str, step: str, row_keys: pa.Array) -> pa.Table:
        """A step's results for these rows (the export's parts). A big part is read on one thread
        (see `one_thread`); a few thousand rows are not worth its three statements (~2 ms CPU), and
        a small job's export reads its one part two to four times per apply."""
        big = len(row_keys) > SMALL_ROWS
        with self.connection() as db, one_thread(db) if big else nullcontext():
            db.register("probe_rows", pa.table({"k": row_keys}))
            table = db.sql(
                f"SELECT j.row_key, j.request_key, r.status, r.output, r.error_code, r.error, {_MODEL} "
                "FROM (SELECT row_key, request_key FROM job_requests WHERE job_id = $1 AND step = $2 "
                "AND row_key IN (SELECT k FROM probe_rows)) j LEFT JOIN results r USING (request_key)",
                params=[job_id, step],
            ).to_arrow_table()
            db.unregister("probe_rows")
        return table

    def results_for_keys(self, keys: pa.Array) -> pa.Table:
        probe = pa.table({"k": keys})
        with self.connection() as db:
            db.register("probe", probe)
            table = db.sql(
                "SELECT r.request_key, coalesce(f.status, r.status) AS status, coalesce(f.output, r.output) AS output "
                "FROM results r JOIN probe p ON r.request_key = p.k "
                "LEFT JOIN results f ON f.request_key = r.answered_by AND f.status = 'succeeded'"
            ).to_arrow_table()
            db.unregister("probe")
        return table

    def list_batches(self, job_id: str) -> list[dict[str, Any]]:
        """A job's provider batches for `status` (see state/batches.py)."""
        from batchor.state.batches import BatchLedger, batch_summary

        return [batch_summary(b) for b in BatchLedger(self).job_batches(job_id)]

    def close(self) -> None:
        self._file.release()

    def execute(self, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Read-only queries for operator commands."""
        with self.connection() as db:
            return db.execute(sql, args or []).fetchall()


def _first(rows: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """First row of a fully fetched result (DuckDB 2 refuses new work while a result is open)."""
    return rows[0] if rows else None


def _first_per_key(table: pa.Table, key: str) -> pa.Table:
    """`table` with each `key` once (its first row), as the tables' former primary keys had it
    (migration 3 dropped them; the writes above keep keys unique instead)."""
    if pc.count_distinct(table.column(key), mode="all").as_py() == table.num_rows:
        return table
    numbered = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    first = numbered.group_by(key, use_threads=False).aggregate([("_row", "min")]).column("_row_min")
    return table.take(pc.take(first, pc.sort_indices(first)))


_HEADER_BYTES = 3 * 4096  # DuckDB's file header and its two database headers, before the blocks


def _owner_only(path: Path) -> None:
    for candidate in (path, Path(str(path) + ".wal")):
        if candidate.exists():
            os.chmod(candidate, 0o600)
