"""Streamed outputs: each finished row is appended to the JSONL output as its answers are stored.

A killed run (kill -9, a lost machine) then leaves a valid file holding every row it finished,
and `--json` / `apply(on_row=...)` see each row as it finishes. A row's line is exactly the line
the export (outputs/export.py) writes for it: the same SQL projects it, over the row's stored
results with the answers of the flush under way laid over them.

Order of writes: a flush appends its finished rows *before* the state commits them (engine/sink.py
calls `stored`), so the file always holds every row the state says is answered; a kill between
the two leaves at most that flush's rows in the file and not in the state. Each flush's lines go
out in one `write` to a file opened for appending, so a kill never leaves half a line.

Resuming: the file is *rewritten from the state* when a run starts (and at each later wave, which
also brings in rows finished by SQL steps and cached answers), not continued by skipping keys
already present. Skipping would keep a line whose answer the state never committed and would
have to repair a torn last line; the rewrite is the export's own query, so the file never holds a
duplicate, and the state stays the one source of truth. The run's end replaces the file with
the full export in input order: the final file is byte for byte what a run without streaming
writes.

Without a streamed file (`--json`, `on_row` over another output) nothing is promised about a
kill, so the rows of several flushes are handed out together, at most once every
`HAND_OUT_EVERY_S` (and at each wave's resync and at the close): each hand-out runs the export's
query and two state reads, which, done at every flush (four a second), cost more CPU than the
requests themselves (2.7 ms a row in a 5,000-row realtime run at load, against 1.4 ms for the
rest of the client's work).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from batchor.duck import SMALL_ROWS, duckdb, scratch_db
from batchor.file_modes import PRIVATE_FILE
from batchor.outputs.export import build_output_sql, is_small, register_rows, result_column, result_struct
from batchor.outputs.reviewed import review_patches
from batchor.outputs.written import remember
from batchor.plan.plan_file import CompiledPlan
from batchor.spec.inputs import ROW_KEY
from batchor.state.base import StateStore
from batchor.state.step_maps import per_step

RowsFound = Callable[[list[dict[str, Any]], bool], None]  # finished rows; True: found in the state
_OVERLAID = ("status", "output", "error_code", "error")
HAND_OUT_EVERY_S = 1.0  # rows handed out without a streamed file: at most this often (see above)


class RowStream:
    """Finished rows of one run: appended to `path` (None: only handed to `found`)."""

    def __init__(
        self,
        plan: CompiledPlan,
        store: StateStore,
        path: Path | None,
        found: RowsFound | None = None,
        *,
        remembered: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan, self.store, self.path, self.found = plan, store, path, found
        self.remembered = remembered  # the spec's own output: recorded as batchor's (outputs/written.py)
        self.written: set[str] = set()  # row keys the file (or the callback) already has
        self.error: str | None = None  # why streaming stopped; the run's end still writes the file
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._inputs: pa.Table | None = None
        self._reviewed = False
        self._clock = clock
        self._held: list[pa.Table] = []  # flushes' results not handed out yet (no streamed file)
        self._handed_at = clock()

    def resync(self) -> None:
        """Rewrite the file from the state: every finished row, in input order, atomically."""
        with self._lock:
            self._release()  # the rows this run finished are not `cached` ones
            if self.error is None:
                self._guarded(self._resync)

    def stored(self, results: pa.Table) -> None:
        """Append the rows these results (about to be stored) finish. Never raises: a stream
        that cannot be written stops, and the answers are still stored."""
        with self._lock:
            if self.path is None:  # only handed out: held until HAND_OUT_EVERY_S has passed
                self._held.append(results)
                if self._clock() - self._handed_at >= HAND_OUT_EVERY_S:
                    self._release()
            elif self.error is None:
                self._guarded(lambda: self._append(results))

    def _release(self) -> None:
        """Hand out the rows of the held results (the lock is held)."""
        held, self._held = self._held, []
        self._handed_at = self._clock()
        if held and self.error is None:
            self._guarded(lambda: self._append(pa.concat_tables(held[::-1])))  # newest first: laid over the rest

    def close(self) -> None:
        with self._lock:
            self._release()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except (OSError, duckdb.Error) as exc:
            self.error = str(exc).splitlines()[0][:300]
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _resync(self) -> None:
        self._reviewed = bool(review_patches(self.plan, self.store))
        with scratch_db(is_small(self.plan)) as db:
            register_rows(db, self.plan, self.store)
            data, keys = _finished(db, self.plan, self._reviewed)
        if self.path is not None:
            self._replace(data)
        self._hand_out(data, keys, from_state=True)
        self.written = set(keys)

    def _append(self, results: pa.Table) -> None:
        requests = results.column("request_key").to_pylist()
        keys = [k for k in self.store.rows_of_requests(self.plan.job_id, requests) if k not in self.written]
        if not keys:
            return
        with scratch_db(len(keys) <= SMALL_ROWS) as db:
            db.register("rows", self._rows(keys, results))
            data, finished = _finished(db, self.plan, self._reviewed)
        if self.path is not None and data:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            _write_all(self._fd, data)
        self._hand_out(data, finished, from_state=False)
        self.written.update(finished)

    def _rows(self, keys: list[str], results: pa.Table) -> pa.Table:
        """These rows as the export's `rows` table: input columns, then per step its stored result
        with the flush's answers laid over it."""
        if self._inputs is None:
            columns = [ROW_KEY, *self.plan.header.input.columns]
            self._inputs = pa.Table.from_batches(list(self.plan.iter_batches(columns)))
        wanted = pa.array(keys, pa.string())
        table = self._inputs.filter(pc.is_in(self._inputs.column(ROW_KEY), value_set=wanted))
        row_keys = table.column(ROW_KEY).combine_chunks()
        steps = [s.name for s in self.plan.header.steps]
        found = per_step(self.store.job_results_for_steps(self.plan.job_id, steps, row_keys), steps)
        for i, stored in enumerate(found):  # one state query for every step's results
            table = table.append_column(result_column(i), result_struct(_overlaid(stored, results), row_keys))
        return table

    def _replace(self, data: bytes) -> None:
        assert self.path is not None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            _write_all(fd, data)
            os.close(fd)
            os.chmod(tmp, PRIVATE_FILE)
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if self.remembered:
            remember(self.path, self.plan.header.state_location)

    def _hand_out(self, data: bytes, keys: Sequence[str], from_state: bool) -> None:
        if self.found is None:
            return
        rows = [json.loads(line) for line in data.splitlines() if line]
        fresh = [row for row in rows if row.get(ROW_KEY) not in self.written]
        if fresh:
            self.found(fresh, from_state)


def _finished(db: duckdb.DuckDBPyConnection, plan: CompiledPlan, reviewed: bool) -> tuple[bytes, list[str]]:
    """The JSONL lines (the export's own) of the rows of `rows` that are finished, and their keys."""
    query = build_output_sql(plan, "jsonl", reviewed=reviewed)
    db.execute(f"CREATE OR REPLACE TEMP TABLE finished_rows AS SELECT * FROM ({query}) WHERE _status <> 'pending'")
    try:
        keys = [str(k) for (k,) in db.execute(f"SELECT {ROW_KEY} FROM finished_rows").fetchall()]
        if not keys:
            return b"", []
        fd, tmp = tempfile.mkstemp(prefix=".batchor-stream.", suffix=".jsonl")
        os.close(fd)
        try:
            db.execute(f"COPY finished_rows TO '{tmp}' (FORMAT json)")
            return Path(tmp).read_bytes(), keys
        finally:
            os.unlink(tmp)
    finally:
        db.execute("DROP TABLE IF EXISTS finished_rows")


def _overlaid(stored: pa.Table, results: pa.Table) -> pa.Table:
    """`stored` (row_key, request_key, status, ...) with the fields of `results` laid over the
    rows whose request is among them."""
    at = pc.index_in(stored.column("request_key"), value_set=results.column("request_key").combine_chunks())
    known = pc.is_valid(at)
    for name in _OVERLAID:
        fresh = results.column(name).combine_chunks().take(at)
        merged = pc.if_else(known, fresh, stored.column(name).combine_chunks().cast(fresh.type))
        stored = stored.set_column(stored.schema.get_field_index(name), name, merged)
    return stored


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
