"""Run records as the data says they are: counts and spend from stored results, dead runs named.

A run record is written by the process that runs it, so it can only be as true as that process's
last write. What `status` and `runs` show is recomputed from the state instead:

- requests answered and failed are counted from the results the run stored (a finished run keeps
  the failures it ended with, whose results a later run may have taken over); spend and tokens are
  the sum of its billed attempts (state/spend.py);
- rows are the output's rows by `_status` when the run ended, kept in its record with its failures
  by reason (RunRecord.rows, .failures): what `status RUN` shows after later runs changed the job;
- a run still marked `running` whose process is gone is `died`: on DuckDB nobody holds the apply
  lock (`<state>.lock`, see lock.py); on PostgreSQL none of its workers has a live lease.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from batchor.state.base import RunRecord, StateStore
from batchor.state.lock import lock_is_held
from batchor.state.spend import run_spend

TALLY_FIELDS = ("succeeded", "failed", "cost_usd", "input_tokens", "output_tokens")
# Requests answered and failed: a SQL step's rows are stored as results too, with no attempt;
# they are rows, not requests (an output's rows are counted by `_status`, see RunRecord.rows).
ANSWERED_SQL = "status = 'succeeded' AND attempts > 0"
_TALLY_SQL = (
    f"SELECT run_id, count(*) FILTER (WHERE {ANSWERED_SQL}), count(*) FILTER (WHERE status = 'failed'), "
    "coalesce(sum(cost_usd), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) "
    "FROM results WHERE run_id IN ({}) GROUP BY run_id"
)
DIED_REASON = "the process stopped without finishing the run (killed, crashed or lost its machine)"
LIVE = ("running", "in_flight")  # statuses a process (or a provider batch) may still change


def run_tallies(store: StateStore, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: what it answered, failed, and spent, as stored (a run with no results: zeros)."""
    tallies: dict[str, dict[str, Any]] = {run_id: dict.fromkeys(TALLY_FIELDS, 0) for run_id in run_ids}
    if not run_ids:
        return tallies
    for run_id, *values in store.execute(_TALLY_SQL.format(", ".join("?" * len(run_ids))), list(run_ids)):
        tallies[run_id] = {name: (float(v) if name == "cost_usd" else int(v)) for name, v in zip(TALLY_FIELDS, values)}
    # Spend is the sum of billed attempts (rejected ones included); runs recorded before the
    # attempt ledger have none, and keep what their results say.
    for run_id, spend in run_spend(store, list(run_ids)).items():
        if spend["attempts_billed"]:
            tallies[run_id].update(
                cost_usd=spend["total_usd"], input_tokens=spend["input_tokens"], output_tokens=spend["output_tokens"]
            )
    return tallies


def with_tally(run: RunRecord, tally: dict[str, Any]) -> RunRecord:
    """`run` with its stored tally. A finished run keeps the failures it ended with: a later run
    that answers those requests (--retry-failed, a transient failure sent again) takes their stored
    results over, which must not rewrite this run's history to `partial` with 0 failed."""
    if run.finished_at is not None and run.status not in LIVE:
        tally = {**tally, "failed": max(tally["failed"], run.failed or 0)}
    return dataclasses.replace(run, **tally)


def process_alive(store: StateStore, run: RunRecord) -> bool:
    """Whether some process may still be working on `run` (holding the lock, or a live lease)."""
    if getattr(store, "shared", False):
        rows = store.execute(
            "SELECT count(*) FROM workers WHERE run_id = ? AND status = 'running' AND lease_until >= now()",
            [run.run_id],
        )
        return bool(rows and rows[0][0])
    return lock_is_held(Path(store.location + ".lock"))


def shown_runs(store: StateStore, runs: list[RunRecord]) -> list[RunRecord]:
    """`runs` with counts and spend from the stored results, and `died` where the process is gone."""
    tallies = run_tallies(store, [r.run_id for r in runs])
    shown = []
    for run in runs:
        run = with_tally(run, tallies[run.run_id])
        if run.status == "running" and not process_alive(store, run):
            run = dataclasses.replace(run, status="died", paused_reason=run.paused_reason or DIED_REASON)
        shown.append(run)
    return shown


def close_dead_runs(store: StateStore, job_id: str | None = None) -> list[str]:
    """Finish the records of runs marked `running` whose process is gone: status `died`, with what
    they stored. Called by an apply that holds the state's lock, so any other running run is dead."""
    args: list[Any] = [job_id] if job_id else []
    rows = store.execute(
        "SELECT run_id FROM runs WHERE status = 'running' AND finished_at IS NULL"
        + (" AND job_id = ?" if job_id else ""),
        args,
    )
    dead = [run_id for (run_id,) in rows]
    for run_id, tally in run_tallies(store, dead).items():
        sets = ", ".join(f"{name} = ?" for name in TALLY_FIELDS)
        store.execute(
            f"UPDATE runs SET status = 'died', paused_reason = ?, {sets}, finished_at = now() WHERE run_id = ?",
            [DIED_REASON, *tally.values(), run_id],
        )
    return dead
