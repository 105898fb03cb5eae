"""The Python API's operator functions over the state: status, runs, export, prune, cancel,
prices, migrate_state (exported as `batchor.status`, `batchor.runs`, ...; the CLI's operator
commands print what they return).

All of them open the state with short connections, so they work while an apply is running.
Writes go through named state operations (`state/prune.py`), never raw SQL here.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from batchor.errors import NoStateError, PlanFileError, RunNotFoundError, StateError
from batchor.plan.plan_file import CompiledPlan
from batchor.state import is_postgres, open_existing_state, open_state, state_exists, state_location
from batchor.state.answer_stats import report_totals as report_totals  # the CLI's estimate lines
from batchor.state.answer_stats import run_step_report
from batchor.state.base import END_ROW_COLUMNS, RunRecord, StateStore
from batchor.state.base import OUTPUT_NOT_WRITTEN as OUTPUT_NOT_WRITTEN  # the CLI's runs table
from batchor.state.compact import compact_duckdb, state_bytes
from batchor.state.prune import attempt_log, drop_answers, drop_raw_payloads, reclaim_space
from batchor.state.raw import unpack
from batchor.state.runs import LIVE, shown_runs
from batchor.state.spend import failure_costs, run_spend

CANCELLED_REASON = (
    "its provider batches were cancelled (`batchor cancel`); "
    "the next apply collects what they finished and sends the rest"
)


def _run(store: StateStore, run_id: str | None) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFoundError(
            f"no run {run_id!r} in state {store.location}" if run_id else f"no runs yet in state {store.location}",
            hint="see `batchor runs`",
        )
    return run


def status(run_id: str | None = None, *, state: str | None = None) -> dict[str, Any]:
    """One run (the latest by default): progress, spend, failures by reason, batches, workers."""
    store = open_existing_state(state)
    run = shown_runs(store, [_run(store, run_id)])[0]
    data = _record(run)
    live = getattr(store, "live_counts", None)  # shared (PostgreSQL) state: count the answers stored so far
    if live is not None and run.finished_at is None:
        data.update(live(run.run_id))
    failures = _failures(store, run)
    data["failures_by_reason"] = None if failures is None else {k: v["rows"] for k, v in failures.items()}
    data["spend"] = run_spend(store, [run.run_id])[run.run_id]
    data["steps"] = run_step_report(store, run.run_id)  # the plan's estimate per step next to the spend
    data["models"] = store.run_model_spend(run.run_id)  # spend and failed calls per model (fallbacks)
    data["failed_rows_cost"] = failures
    batches = getattr(store, "list_batches", None)
    if batches is not None:
        data["batches"] = batches(run.job_id)
    workers = getattr(store, "list_workers", None)  # shared (PostgreSQL) state only
    if workers is not None:
        data["workers"] = workers(run.run_id)
    return data


def _record(run: RunRecord) -> dict[str, Any]:
    """A run's record as data: `rows` (the output's rows by status when it ended, or None) in place
    of the columns that hold it, `succeeded`/`failed`/`cached` counting requests."""
    data = {k: v for k, v in asdict(run).items() if k not in ("extra", "failures", *END_ROW_COLUMNS)}
    return {**data, "rows": run.rows}


def _failures(store: StateStore, run: RunRecord) -> dict[str, dict[str, Any]] | None:
    """Failed rows by reason (rows, cost): what a finished run ended with; the job's now for a run
    still going, or for the latest run of its job that did not keep them (ended by an error, or
    recorded by an older batchor); None for such an earlier run, whose job later runs changed."""
    if run.failures is not None and run.status not in LIVE:
        return run.failures
    if run.status in LIVE or _latest_of_job(store, run):
        return failure_costs(store, run.job_id)
    return None


def _latest_of_job(store: StateStore, run: RunRecord) -> bool:
    return not _later_runs(store, run)


def _later_runs(store: StateStore, run: RunRecord) -> list[str]:
    """Runs of the same job started after `run`, oldest first: what may have changed its rows since."""
    return store.later_runs(run.job_id, run.started_at)


def rows_now_note(run_id: str, later: list[str]) -> str | None:
    """What `export`/`results` say of an earlier run: its rows are shown as the state holds them now."""
    if not later:
        return None
    shown = ", ".join(later[:3]) + (f" and {len(later) - 3} more" if len(later) > 3 else "")
    return (
        f"run {run_id} is not the latest run of its job: these are its plan's rows with the answers stored "
        f"now, after {len(later)} later run(s) ({shown}); what it ended with: `batchor status {run_id}`"
    )


def migrate_state(target: str, source: str | None = None) -> dict[str, Any]:
    """Create or upgrade the schema of `target`; with `source`, copy its state into `target` in bulk."""
    from batchor.state.transfer import copy_state

    origin = None if source is None else _migration_source(source)  # checked before anything is created
    into = open_state(target)  # opening applies the target's schema migrations
    report: dict[str, Any] = {"to": into.location, "schema_version": _schema_version(into)}
    if origin is not None:
        report["from"] = origin.location
        report["tables"] = copy_state(origin, into)
    return report


def _migration_source(source: str) -> StateStore:
    """The state `--from` names, opened as it is: a missing file or an empty database is
    `no_state` (copying from it would first create it, then copy nothing)."""
    from batchor.state.postgres_store import PostgresStore, without_password

    store = PostgresStore(source, migrate=False) if is_postgres(source) else None
    if (store.schema_version() == 0) if store is not None else not state_exists(source):
        raise NoStateError(
            f"no batchor state at {without_password(source)} to migrate from; nothing was created",
            hint="check the --from path or URL (`batchor runs --state SOURCE` lists its runs)",
        )
    return store if store is not None else open_state(source)


def _schema_version(store: StateStore) -> int | None:
    version = getattr(store, "schema_version", None)
    return version() if version is not None else None


def cancel(run_id: str | None = None, *, state: str | None = None) -> dict[str, Any]:
    """Cancel the provider batches in flight for a run's job; the next apply collects what finished."""
    import asyncio

    from batchor.engine.batch_cancel import cancel_batches

    store = open_existing_state(state)
    run = _run(store, run_id)
    batches = asyncio.run(cancel_batches(store, run.job_id))
    if run.status == "in_flight":  # its batches are being stopped: it is no longer waiting on them
        run.status, run.paused_reason = "interrupted", CANCELLED_REASON
        store.finish_run(run)
    return {"run_id": run.run_id, "batches": batches}


def runs(*, state: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
    """The latest runs, newest first, each with its spend from the ledger (none where there is
    no state yet: reading creates nothing)."""
    if not state_exists(state_location(state)):
        return []
    store = open_existing_state(state)
    records = shown_runs(store, store.list_runs(limit))
    spend = run_spend(store, [r.run_id for r in records])
    return [{**_record(r), "spend": spend[r.run_id], "steps": run_step_report(store, r.run_id)} for r in records]


def export(
    output: str | Path, run_id: str | None = None, *, state: str | None = None, fmt: str | None = None
) -> dict[str, Any]:
    """Write a run's results: the rows of the plan it ran, with the answers stored now (finished or
    not: unanswered rows show `_status` pending). The state keeps one answer per request, not one
    per run, so an earlier run's rows show what later runs of its job made of them: `note` says so."""
    from batchor.engine.reduce_run import write_group_outputs
    from batchor.outputs.export import write_output
    from batchor.plan.plan_file import load_plan

    store = open_existing_state(state)
    run = _run(store, run_id)
    if not run.plan_path or not Path(run.plan_path).exists():
        raise PlanFileError(
            f"the plan of run {run.run_id} is not available ({run.plan_path})",
            hint="export needs the saved plan file the run was applied from",
        )
    plan = load_plan(Path(run.plan_path))
    path = write_output(plan, store, Path(output), fmt)
    write_group_outputs(plan, store, path)  # each reduce step's one row per group, beside it
    later = _later_runs(store, run)
    return {
        "run_id": run.run_id,
        "output": str(path),
        "rows_as_of": "now",
        "later_runs": later,
        "note": rows_now_note(run.run_id, later),
    }


def export_attempts(output: str | Path, run_id: str | None = None, *, state: str | None = None) -> dict[str, Any]:
    """Every attempt of a run as JSONL, raw provider responses decompressed (the audit trail)."""
    store = open_existing_state(state)
    run = _run(store, run_id)
    rows = attempt_log(store, run.run_id)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as handle:
        for key, attempt, outcome, status, error, ms, raw, at, tokens_in, tokens_out, cost, estimated in rows:
            body = json.loads(unpack(raw)) if raw else None
            handle.write(
                json.dumps(
                    {
                        "request_key": key,
                        "attempt": attempt,
                        "outcome": outcome,
                        "status": status,
                        "error": error,
                        "duration_ms": ms,
                        "at": str(at),
                        "input_tokens": tokens_in,
                        "output_tokens": tokens_out,
                        "cost_usd": cost,
                        "estimated": bool(estimated),
                        "raw": body,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return {"run_id": run.run_id, "output": str(output), "attempts": len(rows)}


def prune(
    *,
    state: str | None = None,
    older_than_days: float | None = None,
    finished: bool = False,
    answers: bool = False,
    compact: bool = False,
) -> dict[str, int]:
    """Drop raw payloads (and, only when asked, answers); with `compact`, rewrite the DuckDB file
    so it shrinks (DuckDB reuses freed space but never returns it to the file system)."""
    location = state_location(state)
    if compact and is_postgres(location):
        raise StateError(
            "--compact rewrites a DuckDB state file; PostgreSQL reclaims space itself",
            hint="drop --compact; to return space to the OS run VACUUM FULL in PostgreSQL",
        )
    size_before = None if is_postgres(location) else state_bytes(Path(location))
    store = open_existing_state(state)
    before = None if older_than_days is None else dt.datetime.now() - dt.timedelta(days=older_than_days)
    raw = drop_raw_payloads(store, before=before, finished_only=finished)
    dropped = drop_answers(store, before=before, finished_only=finished) if answers else 0
    reclaim_space(store)
    report = {"raw_payloads_dropped": int(raw), "answers_dropped": int(dropped)}
    if compact:
        store.close()
        report.update(compact_duckdb(Path(location), size_before))
    return report


def show(
    target: str | Path | dict[str, Any] | CompiledPlan,
    *,
    prompts: int = 0,
    state: str | None = None,
    model: str | None = None,
    mock: bool = False,
    diff: int = 0,
) -> dict[str, Any]:
    """Everything a plan holds (a saved plan, or a spec planned now and not saved): per step the
    counts, cost and its source, the pinned model, prices and params; `prompts` sample requests per
    step exactly as sent; with `diff`, that many changed rows per step, earlier against new."""
    from batchor import api
    from batchor.plan.show import plan_view

    if isinstance(target, CompiledPlan) or (isinstance(target, (str, Path)) and api.is_plan_file(target)):
        compiled = api.load_or_plan(target, trust_plan=True)  # shown, never run: its powers are printed
    else:
        compiled = api.plan(target, state=state, model=model, mock=mock, save=False)
    view = plan_view(compiled, prompts)
    if diff:
        _add_diffs(view, compiled, state, diff)
    return view


def _add_diffs(view: dict[str, Any], compiled: CompiledPlan, state: str | None, count: int) -> None:
    from batchor.plan.changes import changed_samples, changed_settings

    store = open_state(state_location(state, compiled.header.state_location))
    try:
        for step, data in zip(compiled.header.steps, view["steps"], strict=True):
            if step.local or not step.counts.changed:
                continue
            if step.depends_on:
                settings = changed_settings(compiled, step, store)
                data["changed_samples"] = [settings] if settings else []
            else:
                data["changed_samples"] = changed_samples(compiled, step, store, count)
    finally:
        store.close()


def check_state(state: str | None = None) -> dict[str, Any]:
    """Read every stored value of the state once: damage anywhere fails with `state_corrupt`."""
    from batchor.state.check import check_state as scan

    return scan(open_existing_state(state))


def no_runs_note(state: str | None = None) -> str:
    """What `runs` says when there is none: where it looked (and why there) when there is no state
    at all, and how to reach one (a state found below this folder, `--state`)."""
    from batchor.state import find_state, missing_state_hint

    choice = find_state(state)
    if state_exists(choice.location):
        return f"no runs yet in {choice.location}"
    return (
        f"no runs yet: no state at {choice.location} (its location comes from {choice.source})\n"
        f"  fix: {missing_state_hint(choice)}"
    )


def prices(query: str | None = None, *, provider: str | None = None) -> dict[str, Any]:
    """The price table in use (version, dates) and, given a query or provider, the models found."""
    from batchor.plan.prices import list_prices, price_table_info

    found = list_prices(provider=provider, query=query) if (query or provider) else []
    return {"table": price_table_info(), "models": [p.to_dict() for p in found]}
