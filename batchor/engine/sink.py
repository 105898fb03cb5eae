"""Result buffering: finished requests reach the state in batched transactions, not one per row.

A flush happens when the buffer is full or the flush interval passed; the DuckDB write runs in a
worker thread (DuckDB releases the GIL) so the event loop keeps sending meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from batchor.state.base import ATTEMPT_SCHEMA_FULL as ATTEMPT_SCHEMA
from batchor.state.base import RESULT_SCHEMA_FULL as RESULT_SCHEMA
from batchor.state.base import StateStore
from batchor.state.raw import pack

# How long a DuckDB state stays attached across an apply's flushes (StateStore.kept_attached): each
# flush still commits, but attaching the file and checkpointing it at every detach cost most of a
# small flush. Another process (`status`, `plan`) then waits at most about this long for the file.
KEEP_ATTACHED_S = 2.0


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
    ) -> None:
        self.store = store
        self.before_store = before_store  # a streamed output appends the rows these finish (outputs/stream.py)
        self.run_id = run_id
        self.flush_rows = flush_rows
        self.flush_interval_s = flush_interval_s
        self.keep_raw = keep_raw
        self._results: dict[str, list[Any]] = {f.name: [] for f in RESULT_SCHEMA}
        self._attempts: dict[str, list[Any]] = {f.name: [] for f in ATTEMPT_SCHEMA}
        self._last_flush = time.monotonic()
        self._lock = asyncio.Lock()
        self.flushed = 0

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
        return pending >= self.flush_rows or (
            pending > 0 and time.monotonic() - self._last_flush >= self.flush_interval_s
        )

    def _take(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]] | None:
        if not self._results["request_key"] and not self._attempts["request_key"]:
            return None
        taken = self._results, self._attempts
        self._results = {f.name: [] for f in RESULT_SCHEMA}
        self._attempts = {f.name: [] for f in ATTEMPT_SCHEMA}
        self._last_flush = time.monotonic()
        return taken

    def _write(self, taken: tuple[dict[str, list[Any]], dict[str, list[Any]]]) -> int:
        """Pack raw payloads (zlib releases the GIL), build the tables, store them."""
        results, attempts = taken
        attempts["raw"] = [pack(raw) if raw else None for raw in attempts["raw"]]
        table = pa.table(results, schema=RESULT_SCHEMA)
        try:
            if self.before_store is not None and table.num_rows:
                self.before_store(table)
        finally:  # an `on_row` that raised stops the run, but the answers are stored
            self.store.record_results(table, pa.table(attempts, schema=ATTEMPT_SCHEMA))
        return len(results["request_key"])

    async def flush(self) -> None:
        async with self._lock:
            taken = self._take()
            if taken is not None:
                self.flushed += await asyncio.to_thread(self._write, taken)

    def flush_sync(self) -> None:
        taken = self._take()
        if taken is not None:
            self.flushed += self._write(taken)
