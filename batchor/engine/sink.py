"""Result buffering: finished requests reach the state in batched transactions, not one per row.

A flush happens when the buffer is full or the flush interval passed; the DuckDB write runs in a
worker thread (DuckDB releases the GIL) so the event loop keeps sending meanwhile. A write has a
fixed cost (a transaction, the stream's reads), so on a machine busy enough that writes take long
the interval grows to keep writing to about WRITE_SHARE of the time: a 5,000-row realtime apply at
load average 25 made 1,400 writes of a few rows each, and most of its CPU was theirs.

A write that fails (`disk_full` for lack of space, else `state_write_failed`) says so once
(`on_failed`: the run stops sending at the first failed write) and keeps its rows in memory, in
front of the buffer; later flushes try again, so what was bought is stored as soon as there is
room. When a full disk ended the run with answers still in memory, `store_when_room` waits for
space (BATCHOR_DISK_WAIT_S) before the run gives them up.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from batchor.engine.events import Event, EventSink
from batchor.errors import DiskFullError, StateError, StateWriteError, as_disk_full
from batchor.humanize import money
from batchor.state.base import ATTEMPT_SCHEMA_FULL as ATTEMPT_SCHEMA
from batchor.state.base import RESULT_SCHEMA_FULL as RESULT_SCHEMA
from batchor.state.base import StateStore
from batchor.state.raw import pack

# How long a DuckDB state stays attached across an apply's flushes (StateStore.kept_attached): each
# flush still commits, but attaching the file and checkpointing it at every detach cost most of a
# small flush. Another process (`status`, `plan`) then waits at most about this long for the file.
KEEP_ATTACHED_S = 2.0
# After a write failed for lack of space, how long buffered answers wait before a flush that is
# merely due tries again (a failed write attaches the file, replays its WAL and tries a checkpoint:
# ~0.3 s on a small disk; every worker winding down would otherwise try once more in turn).
FULL_RETRY_S = 2.0
# How long answers bought but not stored wait in memory for room on a full disk after the run
# stopped sending, before it ends without them (they are then asked, and paid for, again).
DISK_WAIT_ENV = "BATCHOR_DISK_WAIT_S"
DEFAULT_DISK_WAIT_S = 300.0
WRITE_SHARE = 0.25  # at most about this share of the wall time goes to writes (the interval grows)


class ResultSink:
    def __init__(
        self,
        store: StateStore,
        run_id: str,
        *,
        flush_rows: int = 2000,
        flush_interval_s: float = 0.25,
        keep_raw: bool = True,
        before_store: Callable[[pa.Table], None] | None = None,
        on_failed: Callable[[StateError], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.before_store = before_store  # a streamed output appends the rows these finish (outputs/stream.py)
        self.run_id = run_id
        self.flush_rows = flush_rows
        self.flush_interval_s = flush_interval_s
        self.keep_raw = keep_raw
        self._results: dict[str, list[Any]] = {f.name: [] for f in RESULT_SCHEMA}
        self._attempts: dict[str, list[Any]] = {f.name: [] for f in ATTEMPT_SCHEMA}
        self._clock = clock
        self._last_flush = clock()
        self._write_s = 0.0  # how long the last write took
        self._lock = asyncio.Lock()
        self.flushed = 0
        self.on_failed = on_failed
        self.failed: StateError | None = None  # the first failed write (DiskFullError: lack of space)
        self._streamed = 0  # rows in front of the buffer a failed write already gave `before_store`

    def add_result(
        self,
        *,
        key: str,
        step: str,
        status: str,
        output: str | None,
        error_code: str | None,
        error: str | None,
        attempts: int,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        model: str | None = None,
        answered_by: str | None = None,
        answer: str | None = None,
        fallback_for: str | None = None,
    ) -> None:
        """A settled request; `answered_by`: the fallback request that answered it (its `answer`
        is what rows waiting on this request read, see engine/pipeline.py); `fallback_for`: this
        request is a fallback model's, answering that one."""
        values = (
            key,
            step,
            status,
            output,
            error_code,
            error,
            attempts,
            input_tokens,
            output_tokens,
            cost_usd,
            self.run_id,
            model,
            answered_by,
        )
        for name, value in zip(self._results, values):
            self._results[name].append(value)

    def add_attempt(
        self,
        *,
        key: str,
        attempt: int,
        outcome: str,
        status_code: int | None,
        error: str | None,
        duration_ms: int,
        raw: bytes | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        estimated: bool = False,
        step: str | None = None,
        counted_input_tokens: int | None = None,
        feedback: str | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        uncached_usd: float | None = None,
        model: str | None = None,
    ) -> None:
        """One provider call of a row (see engine/recorder.py): billed tokens and cost, 0 when unanswered;
        `counted_input_tokens` is the plan's count of what was sent (None when the request differs)."""
        kept = raw if (raw and self.keep_raw) else None  # compressed by the flush, off the event loop
        values = (
            key,
            self.run_id,
            attempt,
            outcome,
            status_code,
            error,
            duration_ms,
            kept,
            input_tokens,
            output_tokens,
            cost_usd,
            estimated,
            step,
            counted_input_tokens,
            feedback,
            cache_read_tokens,
            cache_write_tokens,
            uncached_usd,
            model,
        )
        for name, value in zip(self._attempts, values):
            self._attempts[name].append(value)

    def due(self) -> bool:
        pending = len(self._results["request_key"])
        if self._resting():
            return False
        interval = max(self.flush_interval_s, self._write_s / WRITE_SHARE)
        return pending >= self.flush_rows or (pending > 0 and self._clock() - self._last_flush >= interval)

    def _resting(self) -> bool:
        """A write failed moments ago: do not try again yet (FULL_RETRY_S)."""
        return self.failed is not None and self._clock() - self._last_flush < FULL_RETRY_S

    def _take(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]] | None:
        if not self._results["request_key"] and not self._attempts["request_key"]:
            return None
        taken = self._results, self._attempts
        self._results = {f.name: [] for f in RESULT_SCHEMA}
        self._attempts = {f.name: [] for f in ATTEMPT_SCHEMA}
        self._last_flush = self._clock()
        return taken

    def _write(self, taken: tuple[dict[str, list[Any]], dict[str, list[Any]]]) -> int:
        """Pack raw payloads (zlib releases the GIL), build the tables, store them."""
        results, attempts = taken
        began = self._clock()
        attempts = {**attempts, "raw": [pack(raw) if raw else None for raw in attempts["raw"]]}  # kept as sent
        table = pa.table(results, schema=RESULT_SCHEMA)
        streamed, self._streamed = self._streamed, table.num_rows  # this write streams them all
        try:
            if self.before_store is not None and table.num_rows > streamed:
                self.before_store(table.slice(streamed))  # not again the ones a failed write put back
        finally:  # an `on_row` that raised stops the run, but the answers are stored
            self.store.record_results(table, pa.table(attempts, schema=ATTEMPT_SCHEMA))
        self._streamed = 0
        self._write_s = self._clock() - began
        return len(results["request_key"])

    async def flush(self) -> bool:
        """Store what the buffer holds; False when a write failed for lack of space and its rows
        stay in memory (see `_kept`)."""
        async with self._lock:
            if self._resting():  # flushes queued behind the failed write (`flush_sync` tries once more)
                return False
            taken = self._take()
            if taken is None:
                return True
            try:
                self.flushed += await asyncio.to_thread(self._write, taken)
            except Exception as exc:  # noqa: BLE001 - _kept raises it when nobody listens
                return self._kept(taken, exc)
            return True

    def flush_sync(self) -> None:
        taken = self._take()
        if taken is not None:
            try:
                self.flushed += self._write(taken)
            except Exception as exc:
                if self._kept(taken, exc):
                    return
                raise

    @property
    def unstored(self) -> int:
        """Answers (paid for) that the state does not hold yet."""
        return len(self._results["request_key"])

    @property
    def unstored_usd(self) -> float:
        """What the attempts the state does not hold yet cost."""
        return float(sum(self._attempts["cost_usd"]))

    def _kept(self, taken: tuple[dict[str, list[Any]], dict[str, list[Any]]], exc: Exception) -> bool:
        """A failed write: True when its rows are stored all the same (the commit was made and only
        the checkpoint after it failed), else they go back in front of the buffer for later
        flushes. The first failure is told once (`on_failed`: the run stops sending); every
        failure is raised when nobody listens (a batch's collect)."""
        full = as_disk_full(exc, self.store.location)
        if full is not None and full.stored:
            self.flushed += len(taken[0]["request_key"])
            self._streamed = 0
        else:
            self._put_back(taken)
        if self.on_failed is None:
            raise exc
        self.fail(full or _write_failed(exc, self.store.location))
        return full is not None and full.stored

    def fail(self, error: StateError) -> None:
        """A write of this run failed (this sink's, or another the run depends on: a pipeline's row
        maps): told once, the run stops sending and ends with it even if a later write succeeds."""
        if self.failed is None:
            self.failed = error
            if self.on_failed is not None:
                self.on_failed(error)

    def _put_back(self, taken: tuple[dict[str, list[Any]], dict[str, list[Any]]]) -> None:
        for kept, buffer in zip(taken, (self._results, self._attempts)):
            for name, values in kept.items():
                buffer[name][:0] = values


def state_write_error(exc: Exception, where: str) -> StateError:
    """A failed state write as its coded error: `disk_full` for lack of space, else `state_write_failed`."""
    return as_disk_full(exc, where) or _write_failed(exc, where)


def _write_failed(exc: Exception, where: str) -> StateError:
    if isinstance(exc, StateError):
        return exc
    told = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return StateWriteError(
        f"writing the state {where} failed: {told}",
        hint="make the state writable again (file permissions, a read-only mount or database, the disk's "
        "or server's log), then run the same command: every answer stored before the failure is kept",
    )


def store_when_room(sinks: list[ResultSink], emit: EventSink, given_up: Callable[[], bool]) -> None:
    """A full disk stopped the run with answers bought but not stored: they wait in memory while
    the state gets room, tried every FULL_RETRY_S for up to BATCHOR_DISK_WAIT_S seconds (default
    300), or until `given_up` (a Ctrl+C)."""
    waiting = [sink for sink in sinks if isinstance(sink.failed, DiskFullError) and sink.unstored]
    if not waiting:
        return
    wait_s = float(os.environ.get(DISK_WAIT_ENV) or DEFAULT_DISK_WAIT_S)
    unstored, usd = sum(s.unstored for s in waiting), sum(s.unstored_usd for s in waiting)
    emit(Event("disk_full_waiting", {"unstored": unstored, "unstored_usd": round(usd, 6), "wait_s": wait_s}))
    deadline = time.monotonic() + wait_s
    while any(s.unstored for s in waiting) and not given_up():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(FULL_RETRY_S, left))
        for sink in waiting:
            sink.flush_sync()


def raise_if_write_failed(sinks: list[ResultSink]) -> None:
    """A state write that failed during the run ends it with that error, saying what was stored."""
    failed = next((sink.failed for sink in sinks if sink.failed is not None), None)
    if failed is None:
        return
    stored, unstored = sum(sink.flushed for sink in sinks), sum(sink.unstored for sink in sinks)
    usd = sum(sink.unstored_usd for sink in sinks)
    lost = (
        f"; {unstored:,} answer(s) bought ({money(usd)}) could not be stored and will be asked again"
        if unstored
        else ""
    )
    raise type(failed)(
        f"{failed.message}; sending stopped at the first failed write, with {stored:,} answer(s) of this run "
        f"stored{lost}",
        hint=failed.hint,
    )


async def flush_while_waiting(sink: ResultSink) -> None:
    """Store answers at least every flush interval, also while every worker waits on a slow call
    (workers flush only when they finish one): a kill -9 then loses at most that interval."""
    while True:
        await asyncio.sleep(sink.flush_interval_s)
        if sink.due():
            await sink.flush()
