"""Operator views and chores over the state: status, history, export, prune, prices.

All of them open the state with short connections, so they work while an apply is running.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from batchor.errors import PlanFileError, RunNotFoundError, StateError
from batchor.state import is_postgres, open_state, state_location
from batchor.state.base import RunRecord, StateStore
from batchor.state.compact import compact_duckdb, state_bytes
from batchor.state.raw import unpack
from batchor.state.runs import shown_runs
from batchor.state.spend import failure_costs, run_spend

CANCELLED_REASON = ("its provider batches were cancelled (`batchor cancel`); "
                    "the next apply collects what they finished and sends the rest")


def _run(store: StateStore, run_id: str | None) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFoundError(f"no run {run_id!r} in state {store.location}" if run_id else
                               f"no runs yet in state {store.location}", hint="see `batchor runs`")
    return run


def run_status(run_id: str | None, state: str | None) -> dict[str, Any]:
    store = open_state(state_location(state))
    run = shown_runs(store, [_run(store, run_id)])[0]
    data = {k: v for k, v in asdict(run).items() if k != "extra"}
    live = getattr(store, "live_counts", None)  # shared (PostgreSQL) state: count the answers stored so far
    if live is not None and run.finished_at is None:
        data.update(live(run.run_id))
    data["failures_by_reason"] = store.failures_by_reason(run.job_id)
    data["spend"] = run_spend(store, [run.run_id])[run.run_id]
    data["failed_rows_cost"] = failure_costs(store, run.job_id)
    batches = getattr(store, "list_batches", None)
    if batches is not None:
        data["batches"] = batches(run.job_id)
    workers = getattr(store, "list_workers", None)  # shared (PostgreSQL) state only
    if workers is not None:
        data["workers"] = workers(run.run_id)
    return data


def migrate_state(source: str | None, target: str) -> dict[str, Any]:
    """Create or upgrade the schema of `target`; with `source`, copy its state into `target` in bulk."""
    from batchor.state.transfer import copy_state

    into = open_state(target)  # opening applies the target's schema migrations
    report: dict[str, Any] = {"to": into.location, "schema_version": _schema_version(into)}
    if source is not None:
        origin = open_state(source)
        report["from"] = origin.location
        report["tables"] = copy_state(origin, into)
    return report


def _schema_version(store: StateStore) -> int | None:
    version = getattr(store, "schema_version", None)
    return version() if version is not None else None


def cancel_run(run_id: str | None, state: str | None) -> dict[str, Any]:
    """Cancel the provider batches in flight for a run's job; the next apply collects what finished."""
    import asyncio

    from batchor.engine.batch_cancel import cancel_batches

    store = open_state(state_location(state))
    run = _run(store, run_id)
    batches = asyncio.run(cancel_batches(store, run.job_id))
    if run.status == "in_flight":  # its batches are being stopped: it is no longer waiting on them
        run.status, run.paused_reason = "interrupted", CANCELLED_REASON
        store.finish_run(run)
    return {"run_id": run.run_id, "batches": batches}


def list_runs(state: str | None, limit: int = 20) -> list[dict[str, Any]]:
    store = open_state(state_location(state))
    runs = shown_runs(store, store.list_runs(limit))
    spend = run_spend(store, [r.run_id for r in runs])
    return [{**{k: v for k, v in asdict(r).items() if k != "extra"}, "spend": spend[r.run_id]} for r in runs]


def export_results(run_id: str | None, state: str | None, output: Path, fmt: str | None = None) -> dict[str, Any]:
    """Write a run's results (finished or not: unanswered rows show `_status` pending)."""
    from batchor.outputs.export import write_output
    from batchor.plan.plan_file import load_plan

    store = open_state(state_location(state))
    run = _run(store, run_id)
    if not run.plan_path or not Path(run.plan_path).exists():
        raise PlanFileError(f"the plan of run {run.run_id} is not available ({run.plan_path})",
                            hint="export needs the saved plan file the run was applied from")
    plan = load_plan(Path(run.plan_path))
    path = write_output(plan, store, output, fmt)
    return {"run_id": run.run_id, "output": str(path)}


def export_attempts(run_id: str | None, state: str | None, output: Path) -> dict[str, Any]:
    """Every attempt of a run as JSONL, raw provider responses decompressed (the audit trail)."""
    store = open_state(state_location(state))
    run = _run(store, run_id)
    rows = store.execute("SELECT request_key, attempt, outcome, status_code, error, duration_ms, raw, created_at, "
                         "input_tokens, output_tokens, cost_usd, estimated "
                         "FROM attempts WHERE run_id = ? ORDER BY created_at", [run.run_id])
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        for key, attempt, outcome, status, error, ms, raw, at, tokens_in, tokens_out, cost, estimated in rows:
            body = json.loads(unpack(raw)) if raw else None
            handle.write(json.dumps({"request_key": key, "attempt": attempt, "outcome": outcome, "status": status,
                                     "error": error, "duration_ms": ms, "at": str(at), "input_tokens": tokens_in,
                                     "output_tokens": tokens_out, "cost_usd": cost, "estimated": bool(estimated),
                                     "raw": body}, ensure_ascii=False) + "\n")
    return {"run_id": run.run_id, "output": str(output), "attempts": len(rows)}


def prune(state: str | None, *, older_than_days: float | None, finished: bool, answers: bool,
          compact: bool = False) -> dict[str, int]:
    """Drop raw payloads (and, only when asked, answers); with `compact`, rewrite the DuckDB file
    so it shrinks (DuckDB reuses freed space but never returns it to the file system)."""
    location = state_location(state)
    if compact and is_postgres(location):
        raise StateError("--compact rewrites a DuckDB state file; PostgreSQL reclaims space itself",
                         hint="drop --compact; to return space to the OS run VACUUM FULL in PostgreSQL")
    size_before = None if is_postgres(location) else state_bytes(Path(location))
    store = open_state(location)
    conditions, args = [], []
    if older_than_days is not None:
        cutoff = dt.datetime.now() - dt.timedelta(days=older_than_days)
        conditions.append("created_at < ?")
        args.append(cutoff)
    if finished:
        conditions.append("run_id IN (SELECT run_id FROM runs WHERE finished_at IS NOT NULL)")
    where = " AND ".join(conditions) or "TRUE"
    (raw,) = store.execute(f"SELECT count(*) FROM attempts WHERE raw IS NOT NULL AND {where}", args)[0]
    store.execute(f"UPDATE attempts SET raw = NULL WHERE raw IS NOT NULL AND {where}", args)
    dropped = 0
    if answers:
        result_where = where.replace("created_at", "finished_at")
        (dropped,) = store.execute(f"SELECT count(*) FROM results WHERE {result_where}", args)[0]
        store.execute(f"DELETE FROM results WHERE {result_where}", args)
    store.execute("CHECKPOINT")
    report = {"raw_payloads_dropped": int(raw), "answers_dropped": int(dropped)}
    if compact:
        store.close()
        report.update(compact_duckdb(Path(location), size_before))
    return report


def prices(query: str | None, provider: str | None) -> dict[str, Any]:
    from batchor.plan.prices import list_prices, price_table_info

    found = list_prices(provider=provider, query=query) if (query or provider) else []
    return {"table": price_table_info(), "models": [p.to_dict() for p in found]}
