"""How a run ends: its status, judged on its rows, and the record written on every way out.

A run is `succeeded` only when no row is left pending. Otherwise the reason it stopped names the
status (interrupted, paused, budget, in_flight, or failed for a run-wide provider error), and a run
that reached its end with rows failed or still pending is `partial` (some answered) or `failed`.
Counts and spend in the record come from what the state stored (state/runs.py), not from the
counters the process kept; each status has one exit code (errors.exit_code_for_status).
"""

from __future__ import annotations

import asyncio

from batchor.engine.types import StopSignal
from batchor.errors import BatchorError
from batchor.state.base import OUTPUT_NOT_WRITTEN, RunRecord, RunStatus, StateStore
from batchor.state.runs import run_tallies, with_tally

_STOP_STATUS: dict[str, RunStatus] = {
    "in_flight": "in_flight",
    "interrupted": "interrupted",
    "quota": "paused",
    "budget": "budget",
    "unknown_model": "failed",
    "auth_failed": "failed",
}


def derive_status(stop: StopSignal, rows: dict[str, int]) -> RunStatus:
    """The run's status from why it stopped and how many rows are succeeded/failed/pending."""
    if stop.reason in _STOP_STATUS:
        return _STOP_STATUS[stop.reason]
    if rows["failed"] or rows["pending"]:
        return "partial" if rows["succeeded"] else "failed"
    return "succeeded"


def status_reason(status: str, stop: StopSignal, rows: dict[str, int]) -> str | None:
    """What the record says about why the run ended this way (None for a clean success)."""
    if stop.detail and status != "succeeded":
        return stop.detail
    if rows["pending"] and status in ("partial", "failed"):
        return f"{rows['pending']:,} row(s) still have no answer; run the same command again"
    return None


def output_not_written(run_id: str, error: BatchorError) -> str:
    """The record's note for a run whose rows were judged but whose output file was not written."""
    return (
        f"{OUTPUT_NOT_WRITTEN} ({error.message}); the answers are in the state: "
        f"`batchor export {run_id} -o FILE` writes it, or the same apply once the path is writable"
    )


def stored_counts(store: StateStore, run: RunRecord) -> RunRecord:
    """`run` with answered, failed, tokens and spend as its results were stored."""
    return with_tally(run, run_tallies(store, [run.run_id])[run.run_id])


def error_status(exc: BaseException) -> tuple[RunStatus, str]:
    """Status and reason for a run ended by an exception (the error is still raised afterwards)."""
    if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
        return "interrupted", "stopped by KeyboardInterrupt"
    if isinstance(exc, BatchorError):
        return "failed", f"{exc.code}: {exc.message}"[:2000]
    return "failed", f"{type(exc).__name__}: {exc}"[:2000]


def finish_after_error(store: StateStore, run: RunRecord, exc: BaseException) -> None:
    """Best effort: the record of a run an exception ended says so, with what it stored.

    The state itself may be what failed (disk full): then the record stays `running` and shows as
    `died` once the lock is released (state/runs.py)."""
    run.status, run.paused_reason = error_status(exc)
    try:
        store.finish_run(stored_counts(store, run))
    except Exception:  # noqa: BLE001 - the original error is the one to report
        pass


def settle_earlier_runs(store: StateStore, job_id: str, this: RunRecord) -> None:
    """Runs of this job left `in_flight` none of whose batches is still running at the provider
    (this apply collected them) are finished too: their record names the run that collected them,
    and ends with its rows and failures (their batches' answers are in them)."""
    this_run, status = this.run_id, this.status
    for run_id in store.collected_in_flight_runs(job_id, this_run):
        earlier = store.get_run(run_id)
        if earlier is not None:
            done = status in ("succeeded", "partial", "failed")
            earlier.status = status if done else "partial"
            earlier.paused_reason = f"its provider batches were collected by run {this_run}" + (
                "" if done else f", which ended {status}"
            )
            if this.rows is not None and this.failures is not None:
                earlier.end_with(this.rows, this.failures)
            store.finish_run(stored_counts(store, earlier))
